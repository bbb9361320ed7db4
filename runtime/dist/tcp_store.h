// Internal: rank 0's token-authenticated key/value store, and the client that adapts it to
// gloo::rendezvous::Store. Wire (every message one frame, see frame_socket.h):
//   hello:  "SPK1 " token "\n" kind " " rank      kind: store | ctrl      reply: "OK" | "ERR " why
//   set:    'S' u32 keylen key value                                      reply: "O"
//   get:    'G' u32 timeout_ms key  (waits until set or timeout)          reply: "O" value | "T"
// Keys are bounded to 4 KiB, values by kMaxFrame.
#pragma once

#include <gloo/rendezvous/store.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dist/frame_socket.h"

namespace spk::rt::dist {

std::string hello_frame(const std::string& token, const std::string& kind, int rank);

// Runs on rank 0: accepts connections, checks the token, serves store requests on its own threads
// and hands "ctrl" connections to on_ctrl(rank, socket).
class StoreServer {
 public:
  StoreServer(std::string token, int world, std::function<void(int, FrameSocket)> on_ctrl);
  ~StoreServer();
  Status start(const HostPort& bind, int* bound_port);
  void stop();  // closes the listening socket and every store connection (handed-over ctrl sockets stay)
  // Connections refused because their hello carried another token (reported in the missing-rank error).
  [[nodiscard]] int token_refusals() const;

 private:
  void accept_loop();
  void serve(FrameSocket s);
  std::string token_;
  int world_;
  std::function<void(int, FrameSocket)> on_ctrl_;
  int listen_fd_ = -1;
  bool stopping_ = false;
  int token_refusals_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
  std::vector<int> conn_fds_;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

// Connects (retrying until deadline while nobody listens) and says hello; a refused token is an
// error that names the token and the fix.
Result<FrameSocket> dial(const HostPort& master, const std::string& token, const std::string& kind, int rank,
                         Clock::time_point deadline);

class StoreClient : public gloo::rendezvous::Store {
 public:
  StoreClient(FrameSocket s, std::chrono::milliseconds timeout) : s_(std::move(s)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::string get_or_throw(const std::string& key, std::chrono::milliseconds timeout);
  std::mutex mu_;
  FrameSocket s_;
  std::chrono::milliseconds timeout_;
  std::map<std::string, std::string> cache_;
};

}  // namespace spk::rt::dist
