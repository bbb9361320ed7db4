// serve_receive: the worker half of the push (contract in push.h, messages in wire.h). One session:
// a control connection, then the data connections the plan announces; one thread per data connection.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "orchestrator/staging/push/block_plan.h"
#include "orchestrator/staging/push/file_io.h"
#include "orchestrator/staging/push/push.h"
#include "orchestrator/staging/push/wire.h"

namespace spk::staging {

namespace {

using nlohmann::json;
using wire::Conn;

enum class Base { none, partial, final_file };

struct RFile {
  std::string rel, final_path, partial_path;
  std::uint64_t size = 0;
  std::uint64_t blocks = 0;
  Base base = Base::none;
  std::uint64_t partial_bytes = 0;
  std::vector<std::uint64_t> have, want;
  std::vector<std::uint8_t> need;  // 1 = block still to receive
  bool work = false;               // renamed into place at the end
  bool created = false;            // partial made by this session (removed on ENOSPC)
  int fd = -1;
};

struct Session {
  explicit Session(const ReceiveOptions& o) : opt(o) {}
  const ReceiveOptions& opt;
  std::uint64_t block_bytes = 0;
  std::vector<RFile> files;
  std::mutex mu;  // guards need/want and the counters below
  std::uint64_t bytes_received = 0, rejected = 0;
  std::optional<Error> fatal;
  bool drop_created = false;  // remove partials this session created (disk full)
  std::vector<int> data_fds;  // shut down when one stream fails fatally

  void fail(Error e, bool nospace = false) {
    std::lock_guard<std::mutex> l(mu);
    if (!fatal) {
      fatal = std::move(e);
      drop_created = nospace;
    }
    for (int fd : data_fds) ::shutdown(fd, SHUT_RDWR);
  }
};

bool token_ok(const std::string& got, const std::string& want) {
  if (got.size() != want.size()) return false;
  unsigned char d = 0;
  for (std::size_t i = 0; i < got.size(); ++i) d |= static_cast<unsigned char>(got[i] ^ want[i]);
  return d == 0;
}

// Accepts until a connection says hello{token, role}; refuses (and keeps waiting) on a bad token.
Result<Conn> accept_hello(int lfd, const ReceiveOptions& opt, const std::string& role) {
  for (;;) {
    SPK_ASSIGN(Conn c, wire::accept_tcp(lfd, std::chrono::seconds(opt.idle_timeout_s)));
    c.set_timeout(opt.idle_timeout_s);
    auto hello = c.recv_json("hello");
    if (!hello) continue;
    if (!token_ok(hello->value("token", std::string()), opt.token) || hello->value("role", "") != role) {
      (void)c.send_json(wire::error_json(
          make_error("stage-recv refused " + c.peer() + ": wrong token or role", "use the session's token")));
      continue;
    }
    if (!c.send_json({{"type", "welcome"}}).ok()) continue;
    return c;
  }
}

Status read_manifest(Session& s, const json& m) {
  s.block_bytes = m.value("block_bytes", std::uint64_t{0});
  if (s.block_bytes < 4096 || s.block_bytes > (256ull << 20))
    return make_error("block size " + std::to_string(s.block_bytes) + " out of range",
                      "use 4 KiB .. 256 MiB blocks");
  std::set<std::string> seen;
  for (const auto& f : m.at("files")) {
    RFile r;
    r.rel = f.at("path").get<std::string>();
    r.size = f.at("size").get<std::uint64_t>();
    if (!seen.insert(r.rel).second) return make_error("path '" + r.rel + "' listed twice", "fix the sender");
    SPK_ASSIGN(r.final_path, safe_join(s.opt.root, r.rel));
    r.partial_path = r.final_path + ".sparkctl-partial";
    r.blocks = (r.size + s.block_bytes - 1) / s.block_bytes;
    struct stat st {};
    if (::lstat(r.partial_path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      r.base = Base::partial;
      r.partial_bytes = static_cast<std::uint64_t>(st.st_size);
    } else if (::lstat(r.final_path.c_str(), &st) == 0) {
      if (!S_ISREG(st.st_mode))
        return make_error("refused path '" + r.rel + "': " + r.final_path + " exists and is not a file",
                          "remove it on the worker");
      r.base = Base::final_file;
    }
    s.files.push_back(std::move(r));
  }
  std::vector<std::string> paths;
  for (const RFile& r : s.files)
    paths.push_back(r.base == Base::partial      ? r.partial_path
                    : r.base == Base::final_file ? r.final_path
                                                 : "");
  SPK_ASSIGN(auto have, block_hashes_many(paths, s.block_bytes, 2));
  for (std::size_t i = 0; i < s.files.size(); ++i) {
    s.files[i].have = std::move(have[i]);
    if (s.files[i].have.size() > s.files[i].blocks) s.files[i].have.resize(s.files[i].blocks);
  }
  return ok_status();
}

Status apply_plan(Session& s, const json& p) {
  const auto& pf = p.at("files");
  if (pf.size() != s.files.size())
    return make_error("plan lists a different number of files", "fix the sender");
  std::uint64_t needed = 0;
  for (std::size_t i = 0; i < s.files.size(); ++i) {
    RFile& r = s.files[i];
    r.want = pf[i].at("want").get<std::vector<std::uint64_t>>();
    if (!r.want.empty() && r.want.size() != r.blocks)
      return make_error("plan for " + r.rel + " has a wrong hash count", "fix the sender");
    r.need.assign(r.blocks, 0);
    for (std::uint64_t b : pf[i].at("send").get<std::vector<std::uint64_t>>()) {
      if (b >= r.blocks)
        return make_error("plan for " + r.rel + " names block " + std::to_string(b), "fix the sender");
      r.need[b] = 1;
    }
    bool sends = std::find(r.need.begin(), r.need.end(), 1) != r.need.end();
    r.work = sends || r.base == Base::partial || r.base == Base::none;
    if (r.work && r.want.empty()) r.want.assign(r.blocks, 0);  // cold: filled from block headers
    if (r.work) needed += r.size - (r.base == Base::partial ? std::min(r.partial_bytes, r.size) : 0);
  }
  std::uint64_t free_bytes = s.opt.max_bytes;
  if (free_bytes == 0) {
    std::error_code ec;
    std::filesystem::create_directories(s.opt.root, ec);
    struct statvfs v {};
    if (::statvfs(s.opt.root.c_str(), &v) != 0)
      return make_error("statvfs " + s.opt.root + ": " + std::strerror(errno), "check the cache dir");
    free_bytes = static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
  }
  if (needed > free_bytes)
    return make_error("not enough disk under " + s.opt.root + ": this push needs " + std::to_string(needed) +
                          " bytes (" + human_bytes(needed) + "), " + std::to_string(free_bytes) + " bytes (" +
                          human_bytes(free_bytes) + ") free",
                      "free space on that disk or point cache_dir at a larger one");
  for (RFile& r : s.files) {
    if (!r.work) continue;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(r.final_path).parent_path(), ec);
    if (ec)
      return make_error("cannot create the directory of " + r.final_path + ": " + ec.message(),
                        "check permissions");
    if (r.base == Base::final_file) SPK_TRY(copy_file(r.final_path, r.partial_path));
    r.created = r.base != Base::partial;
    r.fd = ::open(r.partial_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (r.fd < 0)
      return make_error("open " + r.partial_path + ": " + std::strerror(errno), "check permissions");
    SPK_TRY(reserve(r.fd, r.size, r.partial_path));
  }
  return ok_status();
}

// One block from any connection: checked against the plan and its hash, then written in place.
Status take_block(Session& s, Conn& c, const wire::Header& h, std::vector<char>& buf) {
  if (h.file >= s.files.size())
    return make_error(c.peer() + " sent a block of file #" + std::to_string(h.file), "fix the sender");
  RFile& r = s.files[h.file];
  std::uint64_t len = h.block + 1 == r.blocks ? r.size - h.block * s.block_bytes : s.block_bytes;
  if (h.block >= r.blocks || h.len != len)
    return make_error(c.peer() + " sent a malformed block " + std::to_string(h.block) + " of " + r.rel,
                      "fix the sender");
  buf.resize(len);
  SPK_TRY(c.recv_all(buf.data(), len));
  std::uint64_t got = XXH64(buf.data(), len, 0);
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (!r.need[h.block])
      return make_error(c.peer() + " sent block " + std::to_string(h.block) + " of " + r.rel + " twice",
                        "fix the sender");
    bool known = r.want[h.block] != 0;  // cold files learn the hash from the block header
    if (got != h.hash || (known && r.want[h.block] != got)) {
      ++s.rejected;  // stays needed: the repair round asks for it again
      return ok_status();
    }
  }
  if (Status w = pwrite_all(r.fd, buf.data(), len, h.block * s.block_bytes, r.partial_path); !w.ok())
    return w;
  std::lock_guard<std::mutex> l(s.mu);
  r.want[h.block] = got;
  r.need[h.block] = 0;
  s.bytes_received += len;
  return ok_status();
}

void data_stream(Session& s, Conn c) {
  std::vector<char> buf;
  for (;;) {
    auto h = c.recv_header();
    if (!h) return s.fail(h.error());
    if (h->type == static_cast<std::uint8_t>(wire::Type::end)) {
      (void)c.send_json({{"type", "ack"}});
      return;
    }
    if (Status st = take_block(s, c, *h, buf); !st.ok()) return s.fail(st.error(), is_disk_full(st.error()));
  }
}

Status finish(Session& s, ReceiveReport& rep) {
  for (RFile& r : s.files) {
    if (!r.work) continue;
    if (::ftruncate(r.fd, static_cast<off_t>(r.size)) != 0 || ::fsync(r.fd) != 0)
      return make_error("fsync " + r.partial_path + ": " + std::strerror(errno), "check the disk");
    ::close(r.fd);
    r.fd = -1;
    if (::rename(r.partial_path.c_str(), r.final_path.c_str()) != 0)
      return make_error("rename " + r.partial_path + ": " + std::strerror(errno), "check permissions");
    SPK_TRY(fsync_parent(r.final_path));
    rep.files.push_back(r.rel);
  }
  return ok_status();
}

void cleanup(Session& s) {
  for (RFile& r : s.files) {
    if (r.fd >= 0) ::close(r.fd);
    r.fd = -1;
    if (s.drop_created && r.work && r.created) ::unlink(r.partial_path.c_str());
  }
}

Result<ReceiveReport> run_session(Session& s, int lfd) {
  SPK_ASSIGN(Conn ctl, accept_hello(lfd, s.opt, "control"));
  auto refuse = [&](const Error& e) -> Error {
    (void)ctl.send_json(wire::error_json(e));
    return e;
  };
  SPK_ASSIGN(json manifest, ctl.recv_json("manifest"));
  if (Status st = read_manifest(s, manifest); !st.ok()) return refuse(st.error());
  json have = json::array();
  for (const RFile& r : s.files) have.push_back({{"have", r.have}});
  SPK_TRY(ctl.send_json({{"type", "have"}, {"files", have}}));
  SPK_ASSIGN(json plan, ctl.recv_json("plan"));
  if (Status st = apply_plan(s, plan); !st.ok()) {
    s.drop_created = is_disk_full(st.error());
    return refuse(st.error());
  }
  int streams = plan.value("streams", 1);
  if (streams < 1 || streams > 64)
    return refuse(make_error("plan asks for " + std::to_string(streams) + " streams", "use 1..64"));
  SPK_TRY(ctl.send_json({{"type", "ready"}}));

  std::vector<std::thread> threads;
  for (int i = 0; i < streams; ++i) {
    auto c = accept_hello(lfd, s.opt, "data");
    if (!c) {
      s.fail(c.error());
      break;
    }
    {
      std::lock_guard<std::mutex> l(s.mu);
      s.data_fds.push_back(c->fd());
      if (s.fatal) ::shutdown(c->fd(), SHUT_RDWR);
    }
    threads.emplace_back(data_stream, std::ref(s), std::move(*c));
  }
  for (auto& t : threads) t.join();
  if (s.fatal) return refuse(*s.fatal);

  std::vector<char> buf;
  for (int round = 0;; ++round) {
    SPK_ASSIGN(json done, ctl.recv_json("done"));
    json missing = json::array();
    for (std::size_t i = 0; i < s.files.size(); ++i) {
      std::vector<std::uint64_t> m;
      for (std::uint64_t b = 0; b < s.files[i].blocks; ++b)
        if (s.files[i].need[b]) m.push_back(b);
      if (!m.empty()) missing.push_back({{"file", i}, {"blocks", m}});
    }
    if (missing.empty()) break;
    if (round == 3)
      return refuse(
          make_error(std::to_string(missing.size()) +
                         " file(s) still have blocks whose hash does not match after 3 repair rounds",
                     "check memory and network of both nodes", true));
    SPK_TRY(ctl.send_json({{"type", "resend"}, {"files", missing}}));
    for (;;) {
      SPK_ASSIGN(wire::Header h, ctl.recv_header());
      if (h.type == static_cast<std::uint8_t>(wire::Type::end)) break;
      if (Status st = take_block(s, ctl, h, buf); !st.ok()) return refuse(st.error());
    }
  }
  ReceiveReport rep;
  if (Status st = finish(s, rep); !st.ok()) return refuse(st.error());
  rep.bytes_received = s.bytes_received;
  rep.blocks_rejected = s.rejected;
  SPK_TRY(ctl.send_json({{"type", "report"}, {"files", rep.files}, {"bytes_received", rep.bytes_received}}));
  return rep;
}

}  // namespace

Result<ReceiveReport> serve_receive(const ReceiveOptions& opt) {
  if (opt.token.size() < 16)
    return make_error("stage-recv token is " + std::to_string(opt.token.size()) + " characters",
                      "pass a random token of 16+ characters");
  if (opt.root.empty() || opt.root.front() != '/')
    return make_error("stage-recv root '" + opt.root + "' is not an absolute path",
                      "pass the node's cache dir");
  std::error_code ec;
  std::filesystem::create_directories(opt.root, ec);
  if (ec) return make_error("cannot create " + opt.root + ": " + ec.message(), "check the node's cache_dir");
  int port = opt.port;
  SPK_ASSIGN(int lfd, wire::listen_tcp(opt.bind, port));
  if (opt.on_listening) opt.on_listening(port);
  Session s(opt);
  auto r = run_session(s, lfd);
  ::close(lfd);
  cleanup(s);
  return r;
}

}  // namespace spk::staging
