// Helpers for tensor-parallel tests: a free loopback port and running one function per rank in threads.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <thread>
#include <vector>

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

}  // namespace spk::test
