// push_tree: the head half of the push (contract in push.h, messages in wire.h). The blocks to send form
// one queue drained by `streams` threads, each with its own connection and one block-sized buffer:
// pread (page cache) -> xxh64 (~10 GB/s) -> send. A cold file is hashed while it is sent, so the
// source is read once; a file the worker already holds is hashed first to find the blocks that differ,
// unless its size and mtime match (quick check): then it is not read at all.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "orchestrator/staging/push/block_plan.h"
#include "orchestrator/staging/push/push.h"
#include "orchestrator/staging/push/wire.h"

namespace spk::staging {

namespace {

using nlohmann::json;
using wire::Conn;
namespace fs = std::filesystem;

struct SFile {
  std::string rel, path;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;  // st_mtim in nanoseconds: the quick check, and the destination's mtime
  int fd = -1;
};

struct Item {
  std::uint32_t file;
  std::uint64_t block;
};

Result<std::vector<SFile>> list_files(const PushOptions& opt) {
  std::vector<std::string> rels = opt.files;
  if (rels.empty()) {
    std::error_code ec;
    for (fs::recursive_directory_iterator it(opt.source_dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file()) continue;  // follows symlinks: a hub snapshot links into blobs/
      // Lexically: fs::relative resolves the symlink, naming ../../blobs/<etag> instead of the file.
      std::string rel = it->path().lexically_relative(opt.source_dir).generic_string();
      if (rel.ends_with(".sparkctl-partial")) continue;
      rels.push_back(rel);
    }
    if (ec) return make_error("cannot list " + opt.source_dir + ": " + ec.message(), "check the model dir");
    std::sort(rels.begin(), rels.end());
  }
  std::vector<SFile> out;
  for (const auto& rel : rels) {
    SFile f{rel, opt.source_dir + "/" + rel};
    f.fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd < 0)
      return make_error("cannot open " + f.path + ": " + std::strerror(errno), "check the model dir");
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) {
      std::string why = std::strerror(errno);
      ::close(f.fd);
      return make_error("cannot stat " + f.path + ": " + why, "check the model dir");
    }
    f.size = static_cast<std::uint64_t>(st.st_size);
    f.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    out.push_back(std::move(f));
  }
  return out;
}

Status pread_all(const SFile& f, char* p, std::uint64_t n, std::uint64_t off) {
  while (n > 0) {
    ssize_t r = ::pread(f.fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return make_error(
          "read " + f.path + ": " + (r == 0 ? "file shrank while pushing" : std::strerror(errno)),
          "do not change the model while it is staged");
    p += r;
    n -= static_cast<std::uint64_t>(r);
    off += static_cast<std::uint64_t>(r);
  }
  return ok_status();
}

Status send_one(const PushOptions& opt, Conn& c, const std::vector<SFile>& files, const Item& it,
                std::vector<char>& buf, std::atomic<std::uint64_t>& sent) {
  const std::uint64_t bb = opt.block_bytes;
  const SFile& f = files[it.file];
  std::uint64_t off = it.block * bb;
  std::uint64_t len = std::min(bb, f.size - off);
  buf.resize(len);
  SPK_TRY(pread_all(f, buf.data(), len, off));
  SPK_TRY(c.send_block(it.file, it.block, XXH64(buf.data(), len, 0), buf.data(), len));
  std::uint64_t now = sent += len;
  if (opt.after_block) opt.after_block(now);
  return ok_status();
}

// Calls opt.progress every 100 ms until stopped.
class Ticker {
 public:
  Ticker(const PushOptions& opt, std::atomic<std::uint64_t>& sent, std::uint64_t total)
      : opt_(opt), sent_(sent), total_(total) {
    if (opt_.progress) t_ = std::thread([this] { loop(); });
  }
  ~Ticker() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (t_.joinable()) t_.join();
  }

 private:
  void loop() {
    auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> l(mu_);
    for (bool last = false; !last;) {
      last = cv_.wait_for(l, std::chrono::milliseconds(100), [this] { return stop_; });
      PushProgress p;
      p.bytes_sent = sent_;
      p.bytes_total = total_;
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      p.rate_bytes_per_s = s > 0 ? static_cast<double>(p.bytes_sent) / s : 0;
      p.eta_s = p.rate_bytes_per_s > 0
                    ? static_cast<double>(total_ - std::min(total_, p.bytes_sent)) / p.rate_bytes_per_s
                    : 0;
      opt_.progress(p);
    }
  }
  const PushOptions& opt_;
  std::atomic<std::uint64_t>& sent_;
  std::uint64_t total_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread t_;
};

// Stops the push as soon as opt.receiver_gone() says stage-recv has failed: every watched socket is shut
// down, so no send or receive waits out io_timeout_s (e.g. the port was taken by another listener,
// which accepts the connection and never answers). A socket is unwatched before it closes.
class Watchdog {
 public:
  explicit Watchdog(const PushOptions& opt) : opt_(opt) {
    if (opt_.receiver_gone) t_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (t_.joinable()) t_.join();
  }
  void watch(int fd) {
    std::lock_guard<std::mutex> l(mu_);
    if (fired_) ::shutdown(fd, SHUT_RDWR);
    fds_.push_back(fd);
  }
  void unwatch(int fd) {
    std::lock_guard<std::mutex> l(mu_);
    fds_.erase(std::remove(fds_.begin(), fds_.end(), fd), fds_.end());
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_ && !fired_) {
      cv_.wait_for(l, std::chrono::milliseconds(100));
      if (!stop_ && opt_.receiver_gone()) {
        fired_ = true;
        for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
      }
    }
  }
  const PushOptions& opt_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> fds_;
  bool stop_ = false, fired_ = false;
  std::thread t_;
};

// Watches one connection for its lifetime (declare it after the Conn: it unwatches before the close).
struct Watched {
  Watched(Watchdog& w, int fd) : w_(w), fd_(fd) { w_.watch(fd_); }
  ~Watched() { w_.unwatch(fd_); }
  Watchdog& w_;
  int fd_;
};

Result<PushReport> push(const PushOptions& opt, std::vector<SFile>& files) {
  auto t0 = std::chrono::steady_clock::now();
  Watchdog dog(opt);
  const std::uint64_t bb = opt.block_bytes;
  const auto connect_to = std::chrono::seconds(opt.connect_timeout_s);
  auto hello = [&](const char* role) {
    return json{{"type", "hello"}, {"token", opt.token}, {"role", role}};
  };
  SPK_ASSIGN(Conn ctl, wire::connect_tcp(opt.host, opt.port, connect_to, opt.receiver_gone));
  Watched ctl_watched(dog, ctl.fd());
  ctl.set_timeout(opt.io_timeout_s);
  SPK_TRY(ctl.send_json(hello("control")));
  SPK_TRY(ctl.recv_json("welcome"));
  json mf = json::array();
  PushReport rep;
  for (const auto& f : files) {
    mf.push_back({{"path", f.rel}, {"size", f.size}, {"mtime_ns", f.mtime_ns}});
    rep.bytes_total += f.size;
  }
  rep.files = files.size();
  SPK_TRY(ctl.send_json(
      {{"type", "manifest"}, {"block_bytes", bb}, {"quick_check", !opt.hash_all}, {"files", mf}}));
  SPK_ASSIGN(json have, ctl.recv_json("have"));
  if (have.at("files").size() != files.size())
    return make_error(ctl.peer() + " answered for a different file list", "rerun");
  rep.worker_bytes_hashed = have.value("bytes_hashed", std::uint64_t{0});

  std::vector<Item> queue;
  json plan = json::array();
  std::uint64_t total = 0;
  std::vector<std::string> to_hash(files.size());  // only files the worker holds something of
  auto same = [&](std::uint32_t i) { return have["files"][i].value("same", false); };
  for (std::uint32_t i = 0; i < files.size(); ++i)
    if (!same(i) && !have["files"][i].at("have").empty()) {
      to_hash[i] = files[i].path;
      rep.bytes_hashed += files[i].size;
    }
  SPK_ASSIGN(auto wants, block_hashes_many(to_hash, bb, std::max(2, opt.streams)));
  for (std::uint32_t i = 0; i < files.size(); ++i) {
    auto h = have["files"][i].at("have").get<std::vector<std::uint64_t>>();
    std::uint64_t nblocks = (files[i].size + bb - 1) / bb;
    std::vector<std::uint64_t> want, send;
    if (same(i)) {
      if (opt.hash_all)
        return make_error(
            ctl.peer() + " skipped " + files[i].rel + " by size and mtime although asked to hash it",
            "update sparkctl on that node");
      ++rep.files_skipped_quick;  // nothing to send or hash
    } else if (h.empty()) {
      for (std::uint64_t b = 0; b < nblocks; ++b) send.push_back(b);
    } else {
      want = std::move(wants[i]);
      if (want.size() != nblocks)
        return make_error(files[i].path + " changed while pushing",
                          "do not change the model while it is staged");
      send = blocks_to_send(want, h);
    }
    rep.blocks_skipped += nblocks - send.size();
    for (std::uint64_t b : send) {
      queue.push_back({i, b});
      total += std::min(bb, files[i].size - b * bb);
    }
    plan.push_back({{"want", want}, {"send", send}});
  }
  const int streams =
      std::max(1, std::min<int>(opt.streams, static_cast<int>(std::max<std::size_t>(queue.size(), 1))));
  SPK_TRY(ctl.send_json({{"type", "plan"}, {"streams", streams}, {"files", plan}}));
  SPK_TRY(ctl.recv_json("ready"));

  std::atomic<std::uint64_t> sent{0}, next{0};
  std::mutex err_mu;
  std::optional<Error> err;
  {
    Ticker ticker(opt, sent, total);
    std::vector<std::thread> threads;
    for (int s = 0; s < streams; ++s)
      threads.emplace_back([&] {
        auto run = [&]() -> Status {
          SPK_ASSIGN(Conn c, wire::connect_tcp(opt.host, opt.port, connect_to, opt.receiver_gone));
          Watched c_watched(dog, c.fd());
          c.set_timeout(opt.io_timeout_s);
          SPK_TRY(c.send_json(hello("data")));
          SPK_TRY(c.recv_json("welcome"));
          std::vector<char> buf;
          for (std::uint64_t k; (k = next++) < queue.size();)
            SPK_TRY(send_one(opt, c, files, queue[k], buf, sent));
          SPK_TRY(c.send_end());
          SPK_TRY(c.recv_json("ack"));
          return ok_status();
        };
        if (Status st = run(); !st.ok()) {
          next = queue.size();  // the other streams stop too
          std::lock_guard<std::mutex> l(err_mu);
          if (!err) err = st.error();
        }
      });
    for (auto& t : threads) t.join();
  }
  if (err) {
    // The receiver says why it hung up on the control connection (disk full, bad path...).
    ctl.set_timeout(5);
    auto why = ctl.recv_json("done");
    // A message from the receiver is not retryable-marked; a dead or silent link is: then ours is better.
    return !why.ok() && !why.error().retryable ? why.error() : *err;
  }
  std::vector<char> buf;
  std::uint64_t resent = 0;
  for (;;) {  // repair rounds: blocks the receiver refused (hash mismatch) go again on the control link
    SPK_TRY(ctl.send_json({{"type", "done"}}));
    SPK_ASSIGN(json ans, ctl.recv_json(nullptr));
    if (ans.value("type", "") == "report") break;
    if (ans.value("type", "") != "resend")
      return make_error(ctl.peer() + " sent an unexpected message", "rerun");
    for (const auto& f : ans.at("files"))
      for (std::uint64_t b : f.at("blocks").get<std::vector<std::uint64_t>>()) {
        Item it{f.at("file").get<std::uint32_t>(), b};
        if (it.file >= files.size() || b * bb >= std::max<std::uint64_t>(files[it.file].size, 1))
          return make_error(ctl.peer() + " asked for a block that does not exist", "rerun");
        SPK_TRY(send_one(opt, ctl, files, it, buf, sent));
        ++resent;
      }
    SPK_TRY(ctl.send_end());
  }
  rep.bytes_sent = sent;
  rep.blocks_sent = queue.size() + resent;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace

Result<PushReport> push_tree(const PushOptions& opt) {
  if (opt.block_bytes < 4096 || opt.block_bytes > (256ull << 20))
    return make_error("block size " + std::to_string(opt.block_bytes) + " out of range",
                      "use 4 KiB .. 256 MiB");
  if (opt.token.size() < 16)
    return make_error("push token too short", "pass a random token of 16+ characters");
  SPK_ASSIGN(std::vector<SFile> files, list_files(opt));
  // The receiver's answers are parsed with json::value/at/get, which throw on a wrong shape: an error.
  Result<PushReport> r = make_error("push did not run");
  try {
    r = push(opt, files);
  } catch (const std::exception& e) {
    r = make_error(std::string("malformed answer from stage-recv: ") + e.what(),
                   "run the same sparkctl version on the head and the worker");
  }
  for (auto& f : files) ::close(f.fd);
  return r;
}

}  // namespace spk::staging
