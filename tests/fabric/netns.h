// Two network namespaces joined by a veth pair, made by the test with `ip` (fork/exec, argv only), and
// a way to run code inside one of them from a thread (setns(CLONE_NEWNET) is per thread). Names carry
// the test's pid: spk-fab-<pid>-a/b; leftovers of dead test processes are removed at start.
// Only addresses assigned inside these namespaces are ever used.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace spk::fabric::testing {

struct ProcResult {
  int code = -1;
  std::string out;  // stdout + stderr
};

// fork/exec with argv (no shell), output captured.
inline ProcResult run_argv(const std::vector<std::string>& argv) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execvp(a[0], a.data());
    ::_exit(127);
  }
  ::close(p[1]);
  ProcResult r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) r.out.append(buf, size_t(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Runs fn() on a fresh thread that first joins namespace `ns`; returns what fn returns.
template <class F>
auto in_netns(const std::string& ns, F fn) -> decltype(fn()) {
  auto task = std::packaged_task<decltype(fn())()>([&] {
    int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) std::abort();  // the fixture made it: cannot fail quietly
    ::close(fd);
    return fn();
  });
  auto fut = task.get_future();
  std::thread t(std::move(task));
  t.join();
  return fut.get();
}

class NetnsPair {
 public:
  static constexpr const char* kPrefix = "spk-fab-";
  std::string a, b;   // namespace names; veth "veth-a" lives in a, "veth-b" in b
  std::string error;  // non-empty: not permitted here (the test skips with it)

  NetnsPair() {
    cleanup_leftovers();
    const std::string base = std::string(kPrefix) + std::to_string(::getpid());
    a = base + "-a";
    b = base + "-b";
    if (auto r = run_argv({"ip", "netns", "add", a}); r.code != 0) {
      error = "`ip netns add` not permitted here: " + r.out;
      a.clear();
      b.clear();
      return;
    }
    run_argv({"ip", "netns", "add", b});
    auto r = run_argv(
        {"ip", "-n", a, "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b", "netns", b});
    if (r.code != 0) error = "cannot create a veth pair: " + r.out;
  }
  ~NetnsPair() {
    if (!a.empty()) run_argv({"ip", "netns", "del", a});
    if (!b.empty()) run_argv({"ip", "netns", "del", b});
  }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // Namespaces of this prefix whose owning test process is gone.
  static void cleanup_leftovers() {
    std::istringstream in(run_argv({"ip", "netns", "list"}).out);
    std::string line;
    while (std::getline(in, line)) {
      std::string name = line.substr(0, line.find(' '));
      if (name.rfind(kPrefix, 0) != 0) continue;
      int pid = std::atoi(name.c_str() + std::string(kPrefix).size());
      if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0) run_argv({"ip", "netns", "del", name});
    }
  }
};

}  // namespace spk::fabric::testing
