// The connection front of the HTTP server: one epoll thread owns every connection until it holds a whole
// request, so slow or idle clients cost a file descriptor and a small buffer, never a handler thread.
//
//   accept (cpp-httplib's listener) -> adopt(fd) -> [front thread] read the head (cap, deadline)
//     -> classify: answered here (health, metrics, models, 401/404/405/4xx) or dispatched
//     -> read the body (Content-Length or chunked, capped while reading, deadline)
//     -> bounded queue -> handler thread (generation) -> keep-alive: back to the front thread
//
// Why not cpp-httplib alone (0.11, Debian's): it hands each accepted socket to a pool thread that then
// reads the head, so N idle connections hold N threads (issue 28: 24 slow senders stop all serving); its
// read timeout is per recv(), so a byte every few seconds never trips it; heads are read in full before
// any hook runs (256 MB of header lines), chunked bodies ignore the payload cap, and a body without a
// length is read until EOF. Its request parser, router and response writer are kept: the handler thread
// runs them on the buffered request (http_server.cpp).
//
// Caps and clocks: a head must be complete within head_timeout of the connection's start (or of the end
// of its previous response) and within max_head_bytes; a body within body_timeout of its head and within
// max_body_bytes (decoded, for chunked); at most max_connections connections wait for a request, at most
// max_connections_per_peer of them from one peer IP (peer_ledger.h: which one is closed to admit a new
// one, so that a reconnecting flood of idle sockets from a few addresses cannot lock clients out);
// at most max_queued complete requests wait for a handler thread, beyond that 503 with Retry-After.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/serve/peer_ledger.h"
#include "runtime/serve/request_head.h"

namespace spk::rt {

struct FrontConfig {
  size_t max_head_bytes = 32u << 10;
  size_t max_body_bytes = 4u << 20;
  std::chrono::milliseconds head_timeout{5000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};  // a response the client does not read
  size_t max_connections = 4096;                   // connections waiting for (part of) a request
  size_t max_connections_per_peer = 1024;          // of them from one peer IP address
  size_t max_buffered_bytes = 256u << 20;          // request bodies held (being read, queued, handled)
  int workers = 64;                                // handler threads
  size_t max_queued = 1024;                        // complete requests waiting for a handler thread
};

struct FrontResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. Allow, Retry-After
};

// The server's decision on a request head.
struct Verdict {
  bool dispatch = false;  // false: answer `response` from the front thread
  bool body_expected = false;
  FrontResponse response;
};

struct FrontHooks {
  // Front thread: must not block (no engine waits, no I/O).
  std::function<Verdict(const RequestHead&)> classify;
  // Handler thread: the connection and the whole request (head as parsed, body de-chunked, a
  // Content-Length set). True = the connection may serve another request.
  std::function<bool(int fd, const std::string& request)> handle;
  // An error response in the API's shape.
  std::function<FrontResponse(int status, const std::string& message)> error;
  // Every response the front writes itself (route path, status), for /metrics.
  std::function<void(const std::string& path, int status)> observe;
};

struct FrontStats {
  size_t connections = 0;     // held by the front thread now
  size_t queued = 0;          // requests waiting for a handler thread
  size_t busy = 0;            // handler threads in a request
  uint64_t evicted_cap = 0;   // closed to admit a newer connection at max_connections
  uint64_t evicted_peer = 0;  // closed at max_connections_per_peer for a newer one of the same peer
  uint64_t refused = 0;       // new ones closed at once: at a limit, and no waiting connection to close
  uint64_t head_timeouts = 0, body_timeouts = 0, busy_refusals = 0, oversized = 0;
};

class ConnectionFront {
 public:
  ConnectionFront(FrontConfig cfg, FrontHooks hooks);
  ~ConnectionFront();
  ConnectionFront(const ConnectionFront&) = delete;
  ConnectionFront& operator=(const ConnectionFront&) = delete;

  Status start();
  // Takes a freshly accepted socket (any thread).
  void adopt(int fd);
  // Closes every connection (handlers in a request see their socket shut down) and joins the threads.
  void stop();
  [[nodiscard]] FrontStats stats() const;

 private:
  struct Conn;
  struct Job {
    std::unique_ptr<Conn> conn;
    std::string request;
    size_t charged = 0;
  };
  using Clock = std::chrono::steady_clock;

  void loop();
  void worker();
  void take_incoming();
  void on_readable(Conn& c);
  void on_writable(Conn& c);
  void process(Conn& c);
  void on_head(Conn& c, const HeadParse& hp);
  void finish_body(Conn& c);
  void respond(Conn& c, const FrontResponse& r, bool close, const char* path_label = nullptr);
  void fail(Conn& c, int status, const std::string& message);
  void flush(Conn& c);
  void close_conn(int fd);
  void to_head_phase(Conn& c);
  bool admit(const std::string& peer);
  void sweep();
  void set_interest(Conn& c, uint32_t events);
  void release(size_t bytes);

  FrontConfig cfg_;
  FrontHooks hooks_;
  int epfd_ = -1, wakefd_ = -1;
  std::thread loop_thread_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stop_{false};
  uint64_t next_serial_ = 0;
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;  // front thread only
  PeerLedger ledger_;                                     // front thread only: conns_ by peer

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::vector<int> incoming_;
  std::vector<std::unique_ptr<Conn>> returned_;
  std::deque<Job> queue_;
  std::unordered_set<int> busy_fds_;
  size_t idle_workers_ = 0;
  size_t buffered_ = 0;
  FrontStats stats_;
};

}  // namespace spk::rt
