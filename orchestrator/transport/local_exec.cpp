#include "orchestrator/transport/local_exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

extern char** environ;

namespace spk {

namespace {

using Clock = std::chrono::steady_clock;

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

std::vector<std::string> child_env(const LocalTarget& t) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!t.node_root.empty()) env["SPARKCTL_NODE_ROOT"] = t.node_root;
  for (const auto& [k, v] : t.extra_env) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

Result<std::string> self_executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return make_error(std::string("cannot read /proc/self/exe: ") + std::strerror(errno),
                      "pass the sparkctl binary path explicitly");
  return std::string(buf, static_cast<size_t>(n));
}

// A verb that exits before reading all of stdin must not kill the head with SIGPIPE: ignored process-wide
// (writes then fail with EPIPE); the child gets the default disposition back before execve.
LocalExec::LocalExec(LocalTarget target) : target_(std::move(target)) { ::signal(SIGPIPE, SIG_IGN); }

Result<ExecReply> LocalExec::run(NodeVerb verb, std::string_view input, std::chrono::milliseconds timeout) {
  std::string binary = target_.binary;
  if (binary.empty()) {
    SPK_ASSIGN(binary, self_executable());
  }
  const std::string verb_name(node_verb_name(verb));
  std::vector<std::string> env = child_env(target_);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string a0 = binary, a1 = "node", a2 = verb_name;
  char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};

  Pipe in, out, err;
  if (::pipe2(in.fd, O_CLOEXEC) || ::pipe2(out.fd, O_CLOEXEC) || ::pipe2(err.fd, O_CLOEXEC))
    return make_error(target_.name + ": pipe: " + std::strerror(errno), "raise the open-file limit", true);
  pid_t pid = ::fork();
  if (pid < 0) return make_error(target_.name + ": fork: " + std::strerror(errno), "", true);
  if (pid == 0) {
    // Child: only async-signal-safe calls until execve.
    ::setpgid(0, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &dfl, nullptr);
    ::dup2(in.fd[0], 0);
    ::dup2(out.fd[1], 1);
    ::dup2(err.fd[1], 2);
    ::execve(binary.c_str(), argv, envp.data());
    const char msg[] = "sparkctl: cannot exec the node binary\n";
    [[maybe_unused]] auto w = ::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no race with a timeout kill
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);
  ::fcntl(in.fd[1], F_SETFL, O_NONBLOCK);

  ExecReply reply;
  size_t written = 0;
  if (input.empty()) in.close_end(1);
  const auto deadline = Clock::now() + timeout;
  bool timed_out = false;
  char buf[65536];
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[3];
    int n = 0;
    int idx_in = -1, idx_out = -1, idx_err = -1;
    if (in.fd[1] >= 0) fds[idx_in = n++] = {in.fd[1], POLLOUT, 0};
    if (out.fd[0] >= 0) fds[idx_out = n++] = {out.fd[0], POLLIN, 0};
    if (err.fd[0] >= 0) fds[idx_err = n++] = {err.fd[0], POLLIN, 0};
    int r = ::poll(fds, n, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (idx_in >= 0 && fds[idx_in].revents) {
      ssize_t w = ::write(in.fd[1], input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN) written = input.size();  // EPIPE: the verb stopped reading
      if (written >= input.size()) in.close_end(1);
    }
    auto drain = [&](int idx, Pipe& p, std::string& dst) {
      if (idx < 0 || !fds[idx].revents) return;
      ssize_t k = ::read(p.fd[0], buf, sizeof(buf));
      if (k > 0)
        dst.append(buf, static_cast<size_t>(k));
      else if (k == 0 || errno != EINTR)
        p.close_end(0);
    };
    drain(idx_out, out, reply.out);
    drain(idx_err, err, reply.err);
  }
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return make_error(target_.name + ": `sparkctl node " + verb_name + "` did not finish within " +
                          std::to_string(timeout.count()) + " ms (killed)",
                      "raise the call timeout or look at the node's load", true);
  reply.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return reply;
}

}  // namespace spk
