// A live `sparkctl runtime serve` for tests: spawned through /bin/sh with stdout+stderr on a pipe; ready
// when it prints "ready: serving <name> on http://127.0.0.1:<port>". The pipe is drained afterwards so the
// daemon never blocks on a full stdout. stop() sends SIGTERM and returns the exit status (128+sig if
// killed). The command line is the test's own, never untrusted input.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace spk::test {

class ServeDaemon {
 public:
  // `cmd`: the full shell command (env assignments allowed); `name`: the served model name.
  bool start(const std::string& cmd, const std::string& name,
             std::chrono::seconds timeout = std::chrono::seconds(60)) {
    int fds[2];
    if (::pipe(fds) != 0) return false;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::execl("/bin/sh", "sh", "-c", ("exec env " + cmd).c_str(), nullptr);
      ::_exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
    const std::string marker = "ready: serving " + name + " on http://127.0.0.1:";
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return false;
      log_.append(buf, static_cast<size_t>(n));
      const auto p = log_.find(marker);
      if (p != std::string::npos && log_.find('\n', p) != std::string::npos) {
        port_ = std::stoi(log_.substr(p + marker.size()));
        drain_ = std::thread([this] {
          char b[4096];
          while (::read(fd_, b, sizeof b) > 0) {
          }
        });
        return true;
      }
    }
    return false;
  }
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    if (drain_.joinable()) drain_.join();
    ::close(fd_);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ~ServeDaemon() {
    if (pid_ > 0) stop();
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] pid_t pid() const { return pid_; }  // the daemon itself (sh execs env, env execs it)
  [[nodiscard]] const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int port_ = 0;
  std::string log_;
  std::thread drain_;
};

}  // namespace spk::test
