// serve_receive: the worker half of the push (contract in push.h, messages in wire.h). One session:
// a control connection, then the data connections the plan announces; one thread per data connection.
//
// Durability overlaps the transfer instead of following it (a 1 GiB cold push on a VM disk: ~0.8 s on
// the wire, then up to ~2.5 s more for one fsync of a page cache full of dirty blocks):
//  - blocks are written O_DIRECT where the filesystem states its alignment (statx DIOALIGN): they are on
//    the device when pwrite returns, no dirty page cache is left to flush, and GiBs of weights do not
//    evict the node's page cache (it is dropped before launch anyway). A file's short last block, and
//    filesystems without direct I/O (tmpfs), go through the page cache with writeback started at once
//    (sync_file_range WRITE), so the final fsync finds little left to do;
//  - a file whose last block has landed is finished (ftruncate, fsync, rename, directory fsync) by a
//    finisher thread while the other files keep arriving. The rename still follows the fsync.
//
// Quick check: a final file whose size and mtime equal the manifest's is not hashed (its `have` is
// empty, `same` true) and not touched. Every file this session writes gets the source's mtime before its
// rename; a final file the hashes prove equal gets it in place, so the next session skips it unread.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
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
  std::int64_t mtime_ns = -1;  // the source's mtime (nanoseconds); -1 = not sent: left as written
  bool same = false;           // quick check passed: final file of equal size and mtime, not read
  Base base = Base::none;
  std::uint64_t partial_bytes = 0;
  std::uint64_t final_bytes = 0;  // size of the final file found (base final_file)
  std::vector<std::uint64_t> have, want;
  std::vector<std::uint8_t> need;  // 1 = block still to receive, 2 = being written, 0 = written
  std::uint64_t remaining = 0;     // blocks with need != 0; the file is finished when it reaches 0
  bool work = false;               // renamed into place once complete
  bool created = false;            // partial made by this session (removed on ENOSPC)
  bool finished = false;           // fsynced and renamed (finisher thread)
  int fd = -1;                     // page-cache fd: the short last block, ftruncate, fsync
  int dfd = -1;                    // O_DIRECT fd of the same partial, -1 = none
  std::uint32_t dio_align = 0;     // its offset/length/memory alignment
};

// Page-aligned block buffer (O_DIRECT reads user memory at the filesystem's alignment).
class AlignedBuf {
 public:
  char* get(std::uint64_t n) {
    if (n > cap_) {
      cap_ = (n + 4095) / 4096 * 4096;
      p_.reset(static_cast<char*>(std::aligned_alloc(4096, cap_)));
      if (!p_) cap_ = 0;
    }
    return p_.get();
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> p_;
  std::uint64_t cap_ = 0;
};

struct Session {
  explicit Session(const ReceiveOptions& o) : opt(o) {}
  ~Session() { stop_finisher(); }
  const ReceiveOptions& opt;
  std::uint64_t block_bytes = 0;
  std::vector<RFile> files;
  std::mutex mu;  // guards need/want/remaining/finished, the counters, the finisher queue
  std::uint64_t bytes_received = 0, bytes_direct = 0, rejected = 0;
  std::uint64_t bytes_hashed = 0;  // destination bytes read_manifest hashed
  std::optional<Error> fatal;
  bool drop_created = false;  // remove partials this session created (disk full)
  std::vector<int> data_fds;  // shut down when one stream fails fatally
  std::vector<std::string> renamed;
  std::deque<std::size_t> to_finish;
  std::condition_variable finish_cv;
  bool finisher_stop = false;
  std::thread finisher;
  int lfd = -1;                 // the listening socket (shut down when the head goes away)
  std::atomic<int> ctl_fd{-1};  // the control connection, once accepted
  std::atomic<bool> head_gone{false};

  void fail(Error e, bool nospace = false) {
    std::lock_guard<std::mutex> l(mu);
    fail_locked(std::move(e), nospace);
  }
  void fail_locked(Error e, bool nospace) {
    if (!fatal) {
      fatal = std::move(e);
      drop_created = nospace;
    }
    for (int fd : data_fds) ::shutdown(fd, SHUT_RDWR);
  }
  void queue_finish_locked(std::size_t i) {
    to_finish.push_back(i);
    finish_cv.notify_one();
  }
  // Finishes what is queued, then stops; the files are closed or finished afterwards.
  void stop_finisher() {
    {
      std::lock_guard<std::mutex> l(mu);
      finisher_stop = true;
    }
    finish_cv.notify_all();
    if (finisher.joinable()) finisher.join();
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
    // Anyone may connect: read the hello without json::value (it throws on a non-string).
    auto str = [&](const char* k) {
      const auto it = hello->find(k);
      return it != hello->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (!token_ok(str("token"), opt.token) || str("role") != role) {
      (void)c.send_json(wire::error_json(
          make_error("stage-recv refused " + c.peer() + ": wrong token or role", "use the session's token")));
      continue;
    }
    if (!c.send_json({{"type", "welcome"}}).ok()) continue;
    return c;
  }
}

std::int64_t mtime_ns_of(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

timespec to_timespec(std::int64_t ns) {
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

Status read_manifest(Session& s, const json& m) {
  s.block_bytes = m.value("block_bytes", std::uint64_t{0});
  const bool quick = m.value("quick_check", false);
  if (s.block_bytes < 4096 || s.block_bytes > (256ull << 20))
    return make_error("block size " + std::to_string(s.block_bytes) + " out of range",
                      "use 4 KiB .. 256 MiB blocks");
  std::set<std::string> seen;
  for (const auto& f : m.at("files")) {
    RFile r;
    r.rel = f.at("path").get<std::string>();
    r.size = f.at("size").get<std::uint64_t>();
    r.mtime_ns = f.value("mtime_ns", std::int64_t{-1});
    if (r.mtime_ns < -1)
      return make_error("mtime_ns " + std::to_string(r.mtime_ns) + " of '" + r.rel + "' is before 1970",
                        "fix the source file's mtime (touch it) and stage again");
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
      r.final_bytes = static_cast<std::uint64_t>(st.st_size);
      r.same = quick && r.mtime_ns >= 0 && static_cast<std::uint64_t>(st.st_size) == r.size &&
               mtime_ns_of(st) == r.mtime_ns;
    }
    s.files.push_back(std::move(r));
  }
  std::vector<std::string> paths;
  for (const RFile& r : s.files) {
    paths.push_back(r.base == Base::partial                 ? r.partial_path
                    : r.base == Base::final_file && !r.same ? r.final_path
                                                            : "");
    struct stat st {};
    if (!paths.back().empty() && ::stat(paths.back().c_str(), &st) == 0)
      s.bytes_hashed += static_cast<std::uint64_t>(st.st_size);
  }
  SPK_ASSIGN(auto have, block_hashes_many(paths, s.block_bytes, 2));
  for (std::size_t i = 0; i < s.files.size(); ++i) {
    s.files[i].have = std::move(have[i]);
    if (s.files[i].have.size() > s.files[i].blocks) s.files[i].have.resize(s.files[i].blocks);
  }
  return ok_status();
}

// A block's bytes at `off`: O_DIRECT when the fd, offset and length allow it, else the page cache with
// its writeback started now.
// `direct` (may be null) says which way it went.
Status write_block(RFile& r, const char* p, std::uint64_t len, std::uint64_t off, bool* direct = nullptr) {
  const std::uint32_t a = r.dio_align;
  if (direct) *direct = false;
  if (r.dfd >= 0 && a != 0 && off % a == 0 && len % a == 0) {
    int e = pwrite_errno(r.dfd, p, len, off);
    if (e == 0 && direct) *direct = true;
    if (e == 0) return ok_status();
    if (e != EINVAL) return write_error(e, r.partial_path);
    // The filesystem refused the alignment after all: the page cache (below) rewrites the whole block.
  }
  SPK_TRY(pwrite_all(r.fd, p, len, off, r.partial_path));
  ::sync_file_range(r.fd, static_cast<off_t>(off), static_cast<off_t>(len), SYNC_FILE_RANGE_WRITE);
  return ok_status();
}

// The blocks of a changed final file that the plan keeps, copied into its fresh partial (the others
// arrive over the wire). Read through the page cache (read_manifest just hashed them), written like
// received blocks: O_DIRECT where possible.
Status copy_kept_blocks(Session& s, RFile& r) {
  int in = ::open(r.final_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return make_error("open " + r.final_path + ": " + std::strerror(errno), "check permissions");
  AlignedBuf abuf;
  Status st;
  for (std::uint64_t b = 0; b < r.blocks && st.ok(); ++b) {
    if (r.need[b]) continue;
    const std::uint64_t off = b * s.block_bytes, len = std::min(s.block_bytes, r.size - off);
    char* buf = abuf.get(len);
    if (buf == nullptr) {
      st = make_error("out of memory for a " + human_bytes(len) + " block", "use smaller blocks");
      break;
    }
    ssize_t got = 0;
    for (std::uint64_t done = 0; done < len; done += static_cast<std::uint64_t>(got)) {
      got = ::pread(in, buf + done, len - done, static_cast<off_t>(off + done));
      if (got < 0 && errno == EINTR) {
        got = 0;
        continue;
      }
      if (got <= 0) {
        st = make_error("read " + r.final_path + ": " + (got == 0 ? "file shrank" : std::strerror(errno)),
                        "do not change the model dir on the worker while it is staged");
        break;
      }
    }
    if (st.ok()) st = write_block(r, buf, len, off);
  }
  ::close(in);
  return st;
}

// A complete partial becomes the final file: size, fsync, then (only then) the rename and the
// directory's fsync. The page cache it used is dropped: the bytes are on disk.
// The source's mtime is set after the last write and the truncate (both move it) and before the fsync.
Status finish_file(RFile& r) {
  if (::ftruncate(r.fd, static_cast<off_t>(r.size)) != 0)
    return make_error("truncate " + r.partial_path + ": " + std::strerror(errno), "check the disk");
  if (r.mtime_ns >= 0) {
    const timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(r.mtime_ns)};
    if (::futimens(r.fd, ts) != 0)
      return make_error("set the mtime of " + r.partial_path + ": " + std::strerror(errno),
                        "check that stage-recv owns its cache dir");
  }
  if (::fsync(r.fd) != 0)
    return make_error("fsync " + r.partial_path + ": " + std::strerror(errno), "check the disk");
  ::posix_fadvise(r.fd, 0, 0, POSIX_FADV_DONTNEED);
  if (r.dfd >= 0) ::close(r.dfd);
  ::close(r.fd);
  r.fd = r.dfd = -1;
  if (::rename(r.partial_path.c_str(), r.final_path.c_str()) != 0)
    return make_error("rename " + r.partial_path + ": " + std::strerror(errno), "check permissions");
  return fsync_parent(r.final_path);
}

// The finisher thread: files in the order their last block landed, until stop_finisher().
void finisher_loop(Session& s) {
  std::unique_lock<std::mutex> l(s.mu);
  for (;;) {
    s.finish_cv.wait(l, [&] { return !s.to_finish.empty() || s.finisher_stop; });
    if (s.to_finish.empty()) return;
    std::size_t i = s.to_finish.front();
    s.to_finish.pop_front();
    RFile& r = s.files[i];
    l.unlock();
    Status st = finish_file(r);
    l.lock();
    if (!st.ok()) {
      s.fail_locked(st.error(), is_disk_full(st.error()));
      continue;
    }
    r.finished = true;
    s.renamed.push_back(r.rel);
  }
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
    // A final file longer than the source with the source's bytes as its prefix sends nothing but
    // is still rewritten (truncated).
    r.work = sends || r.base == Base::partial || r.base == Base::none ||
             (r.base == Base::final_file && r.final_bytes != r.size);
    if (r.same && sends)
      return make_error("plan sends blocks of " + r.rel + ", which matched by size and mtime",
                        "fix the sender");
    // Equal by hash but not by mtime (changed mtime, or written before mtimes were kept): the source's
    // mtime in place, so the next session's quick check skips it. A failure only costs that skip.
    if (!r.work && !r.same && r.mtime_ns >= 0) {
      const timespec ts[2] = {{0, UTIME_OMIT}, to_timespec(r.mtime_ns)};
      (void)::utimensat(AT_FDCWD, r.final_path.c_str(), ts, AT_SYMLINK_NOFOLLOW);
    }
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
    r.created = r.base != Base::partial;
    r.fd = ::open(r.partial_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (r.fd < 0)
      return make_error("open " + r.partial_path + ": " + std::strerror(errno), "check permissions");
    // A changed final file: its blocks that stay are cloned (reflink filesystems) or copied below.
    const bool cloned = r.base == Base::final_file && clone_file(r.final_path, r.fd);
    SPK_TRY(reserve(r.fd, r.size, r.partial_path));
    r.dio_align = s.opt.direct_io ? direct_io_align(r.fd) : 0;
    if (r.dio_align != 0 && r.dio_align <= 4096 && s.block_bytes % r.dio_align == 0)
      r.dfd = ::open(r.partial_path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW);
    if (r.base == Base::final_file && !cloned) SPK_TRY(copy_kept_blocks(s, r));
  }
  std::lock_guard<std::mutex> l(s.mu);
  for (std::size_t i = 0; i < s.files.size(); ++i) {
    RFile& r = s.files[i];
    r.remaining = static_cast<std::uint64_t>(std::count(r.need.begin(), r.need.end(), 1));
    if (r.work && r.remaining == 0) s.queue_finish_locked(i);  // nothing to receive: finish it now
  }
  s.finisher = std::thread(finisher_loop, std::ref(s));
  return ok_status();
}

// One block from any connection: checked against the plan and its hash, then written in place. The
// file's last missing block hands it to the finisher.
Status take_block(Session& s, Conn& c, const wire::Header& h, AlignedBuf& abuf) {
  if (h.file >= s.files.size())
    return make_error(c.peer() + " sent a block of file #" + std::to_string(h.file), "fix the sender");
  RFile& r = s.files[h.file];
  std::uint64_t len = h.block + 1 == r.blocks ? r.size - h.block * s.block_bytes : s.block_bytes;
  if (h.block >= r.blocks || h.len != len)
    return make_error(c.peer() + " sent a malformed block " + std::to_string(h.block) + " of " + r.rel,
                      "fix the sender");
  char* buf = abuf.get(len);
  if (buf == nullptr)
    return make_error("out of memory for a " + human_bytes(len) + " block", "use smaller blocks");
  SPK_TRY(c.recv_all(buf, len));
  std::uint64_t got = XXH64(buf, len, 0);
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (r.need[h.block] != 1)
      return make_error(c.peer() + " sent block " + std::to_string(h.block) + " of " + r.rel + " twice",
                        "fix the sender");
    bool known = r.want[h.block] != 0;  // cold files learn the hash from the block header
    if (got != h.hash || (known && r.want[h.block] != got)) {
      ++s.rejected;  // stays needed: the repair round asks for it again
      return ok_status();
    }
    r.need[h.block] = 2;  // this thread writes it; another copy of it is refused
  }
  bool direct = false;
  if (Status w = write_block(r, buf, len, h.block * s.block_bytes, &direct); !w.ok()) return w;
  std::lock_guard<std::mutex> l(s.mu);
  r.want[h.block] = got;
  r.need[h.block] = 0;
  s.bytes_received += len;
  if (direct) s.bytes_direct += len;
  if (--r.remaining == 0) s.queue_finish_locked(h.file);
  return ok_status();
}

void data_stream(Session& s, Conn c) {
  AlignedBuf buf;
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

// Waits for the finisher; every file with work must have been finished.
Status finish(Session& s, ReceiveReport& rep) {
  s.stop_finisher();
  std::lock_guard<std::mutex> l(s.mu);
  if (s.fatal) return *s.fatal;
  for (const RFile& r : s.files)
    if (r.work && !r.finished)
      return make_error(r.rel + " was not finished although every block arrived", "report this as a bug");
  rep.files = s.renamed;
  return ok_status();
}

void cleanup(Session& s) {
  s.stop_finisher();
  for (RFile& r : s.files) {
    if (r.dfd >= 0) ::close(r.dfd);
    if (r.fd >= 0) ::close(r.fd);
    r.fd = r.dfd = -1;
    if (s.drop_created && r.work && r.created && !r.finished) ::unlink(r.partial_path.c_str());
  }
}

// A manifest or plan message is head input: a missing key or a wrong type is an error, never an
// exception escaping the verb.
template <typename F>
Status json_step(const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return make_error(std::string("malformed ") + what + " from the head: " + e.what(),
                      "run the same sparkctl version on the head and the worker");
  }
}

Result<ReceiveReport> run_session(Session& s, int lfd) {
  SPK_ASSIGN(Conn ctl, accept_hello(lfd, s.opt, "control"));
  s.ctl_fd = ctl.fd();
  if (s.head_gone) ::shutdown(ctl.fd(), SHUT_RDWR);
  auto refuse = [&](const Error& e) -> Error {
    (void)ctl.send_json(wire::error_json(e));
    return e;
  };
  SPK_ASSIGN(json manifest, ctl.recv_json("manifest"));
  if (Status st = json_step("manifest", [&] { return read_manifest(s, manifest); }); !st.ok())
    return refuse(st.error());
  json have = json::array();
  for (const RFile& r : s.files) have.push_back({{"have", r.have}, {"same", r.same}});
  SPK_TRY(ctl.send_json({{"type", "have"}, {"bytes_hashed", s.bytes_hashed}, {"files", have}}));
  SPK_ASSIGN(json plan, ctl.recv_json("plan"));
  if (Status st = json_step("plan", [&] { return apply_plan(s, plan); }); !st.ok()) {
    s.drop_created = is_disk_full(st.error());
    return refuse(st.error());
  }
  const int streams =
      plan.contains("streams") && plan["streams"].is_number_integer()
          ? static_cast<int>(std::clamp<std::int64_t>(plan["streams"].get<std::int64_t>(), -1, 65))
      : plan.contains("streams") ? -1
                                 : 1;
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

  AlignedBuf buf;
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
  rep.bytes_direct = s.bytes_direct;
  rep.blocks_rejected = s.rejected;
  SPK_TRY(ctl.send_json({{"type", "report"}, {"files", rep.files}, {"bytes_received", rep.bytes_received}}));
  return rep;
}

}  // namespace

namespace {

// One receiver per root: an exclusive flock on <root>.stage-recv.lock that holds the owner's pid. A
// previous receiver (its head just killed) is waited for; it stops within ~0.1 s (head_fd watch).
class RootLock {
 public:
  ~RootLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
  }
  Status acquire(const std::string& root, int wait_s) {
    path_ = root + ".stage-recv.lock";
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0)
      return make_error("cannot open " + path_ + ": " + std::strerror(errno), "check the node's cache_dir");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR)
        return make_error("flock " + path_ + ": " + std::strerror(errno), "check the node's cache_dir");
      if (std::chrono::steady_clock::now() >= deadline) {
        char buf[32] = {};
        const ssize_t n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
        const std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "?";
        return make_error("another stage-recv (pid " + pid + ") is still receiving into " + root + " after " +
                              std::to_string(wait_s) + " s",
                          "wait for that stage to finish, or stop it (kill " + pid + ")", true);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::string pid = std::to_string(::getpid());
    if (::ftruncate(fd_, 0) == 0) (void)::pwrite(fd_, pid.data(), pid.size(), 0);
    return ok_status();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// Watches head_fd for a hang-up; on one, stops the session: the listener and every connection are shut
// down, so whatever the session waits on returns at once.
class HeadWatch {
 public:
  HeadWatch(Session& s, int head_fd) : s_(s) {
    if (head_fd < 0 || ::pipe2(stop_, O_CLOEXEC) != 0) return;
    t_ = std::thread([this, head_fd] { run(head_fd); });
  }
  ~HeadWatch() {
    if (t_.joinable()) {
      const char c = 0;
      (void)::write(stop_[1], &c, 1);
      t_.join();
    }
    for (int fd : stop_)
      if (fd >= 0) ::close(fd);
  }

 private:
  void run(int head_fd) {
    for (;;) {
      pollfd p[2] = {{head_fd, 0, 0}, {stop_[0], POLLIN, 0}};  // POLLERR/POLLHUP are always reported
      const int r = ::poll(p, 2, -1);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 || (p[1].revents & POLLIN)) return;
      if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) break;
    }
    s_.head_gone = true;
    s_.fail(
        make_error("the head went away (its end of stage-recv's output closed): receive stopped, "
                   "partial files kept for the next run",
                   "run `sparkctl stage` again", true));
    ::shutdown(s_.lfd, SHUT_RDWR);
    if (const int c = s_.ctl_fd.load(); c >= 0) ::shutdown(c, SHUT_RDWR);
  }
  Session& s_;
  int stop_[2] = {-1, -1};
  std::thread t_;
};

// listen_tcp, retried for up to a second on a port still held by a receiver that is exiting (its
// flock may be released a moment before its listening socket is closed).
Result<int> listen_retrying(const ReceiveOptions& opt, int& port) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    int p = port;
    auto fd = wire::listen_tcp(opt.bind, p);
    if (fd.ok() || opt.port == 0 || std::chrono::steady_clock::now() >= deadline ||
        fd.error().message.find(std::strerror(EADDRINUSE)) == std::string::npos) {
      port = p;
      return fd;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
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
  std::string root = opt.root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  RootLock lock;
  SPK_TRY(lock.acquire(root, opt.takeover_wait_s));
  int port = opt.port;
  SPK_ASSIGN(int lfd, listen_retrying(opt, port));
  if (opt.on_listening) opt.on_listening(port);
  Session s(opt);
  s.lfd = lfd;
  Result<ReceiveReport> r = make_error("stage-recv did not run");
  {
    HeadWatch watch(s, opt.head_fd);
    r = run_session(s, lfd);
  }
  if (!r && s.head_gone) r = *s.fatal;  // the cause, not the shut-down socket's error
  ::close(lfd);
  cleanup(s);
  return r;
}

}  // namespace spk::staging
