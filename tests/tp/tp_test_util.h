// Helpers for tensor-parallel tests: a free loopback port, running one function per rank in threads, and
// running one function per rank of a process group joined over loopback.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <barrier>
#include <chrono>
#include <csignal>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dist/process_group.h"

namespace spk::test {

// A port that was free a moment ago on 127.0.0.1 (the kernel hands out ephemeral ports in rotation).
inline int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Gloo writes to sockets without MSG_NOSIGNAL: a peer that went away must not kill the test binary
// (the runtime serve binary ignores SIGPIPE too).
inline const bool kIgnoreSigpipe = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

// Runs fn(rank) for rank in [0, world) on one thread each and joins them.
inline void run_ranks(int world, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r) ts.emplace_back([&fn, r] { fn(r); });
  for (auto& t : ts) t.join();
}

// How run_world's ranks join: the communicator kind ("gloo", "gloo-host") and its timeouts.
struct WorldOptions {
  std::string comm = "gloo";
  std::chrono::seconds join_timeout{20};
  std::chrono::seconds collective_timeout{20};
};

// Runs fn(rank, communicator) for rank in [0, world) on one thread each, every rank joined to one process
// group on 127.0.0.1, and returns "rank R: <error>" for each rank whose join or fn failed. Every rank keeps
// its group until all are done (a group closed early breaks a peer's last collective: see
// process_group_test).
inline std::vector<std::string> run_world(int world,
                                          const std::function<Status(int, rt::dist::Communicator&)>& fn,
                                          const WorldOptions& opt = {}) {
  const int port = free_loopback_port();
  std::mutex mu;
  std::vector<std::string> errors;
  std::barrier done_all(world);
  run_ranks(world, [&](int r) {
    struct Arrive {
      std::barrier<>& b;
      ~Arrive() { b.arrive_and_wait(); }
    };
    auto fail = [&](const std::string& e) {
      std::lock_guard lk(mu);
      errors.push_back("rank " + std::to_string(r) + ": " + e);
    };
    rt::dist::GroupOptions o;
    o.rank = r, o.world = world, o.comm = opt.comm, o.token = "t";
    o.master = "127.0.0.1:" + std::to_string(port);
    o.join_timeout = opt.join_timeout;
    o.collective_timeout = opt.collective_timeout;
    auto g = rt::dist::join_group(o);
    Arrive arrive{done_all};  // before g is destroyed, on every path
    if (!g.ok()) return fail(g.error().what());
    const Status st = fn(r, (*g)->comm());
    if (!st.ok()) fail(st.error().what());
  });
  return errors;
}

}  // namespace spk::test
