#include "orchestrator/gmu/process_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "kernels/base/fs.h"

namespace spk {

namespace {

std::string g3(double g) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", g);
  return b;
}

// fork + execvp with stdout and stderr into `log` (truncated), stdin /dev/null, own process group.
Result<pid_t> spawn(const std::vector<std::string>& argv, const std::string& log,
                    const std::vector<std::pair<std::string, std::string>>& env) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return make_error("cannot open " + log + ": " + std::strerror(errno), "check --state-dir");
  std::vector<char*> av;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    return make_error(std::string("fork: ") + std::strerror(errno), "", true);
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execvp(av[0], av.data());
    std::fprintf(stderr, "exec %s: %s\n", av[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

std::string tail(const std::string& s, size_t n = 300) {
  std::string t = s.size() > n ? s.substr(s.size() - n) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  for (char& c : t)
    if (c == '\n') c = ' ';
  return t;
}

std::string read_or_empty(const std::string& p) {
  auto r = read_file(p);
  return r.ok() ? *r : std::string();
}

// SIGTERM the process group, SIGKILL after `grace`; returns the wait status.
int stop(pid_t pid, std::chrono::seconds grace) {
  ::kill(-pid, SIGTERM);
  auto end = std::chrono::steady_clock::now() + grace;
  int st = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (::waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  return st;
}

}  // namespace

std::vector<std::string> with_flag(std::vector<std::string> argv, const std::string& flag,
                                   const std::string& value) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag) {
      argv[i + 1] = value;
      return argv;
    }
  argv.push_back(flag);
  argv.push_back(value);
  return argv;
}

Status run_logged(const std::vector<std::string>& argv, const std::string& log) {
  SPK_ASSIGN(pid_t pid, spawn(argv, log, {}));
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return ok_status();
  return make_error("`" + (argv.empty() ? std::string() : argv[0]) + " " + (argv.size() > 1 ? argv[1] : "") +
                        " ...` failed (status " + std::to_string(st) + ", log " + log + ")",
                    "run the plan's step by hand to see why");
}

std::optional<uint64_t> parse_mem_available(const std::string& meminfo) {
  std::smatch m;
  static const std::regex re(R"(MemAvailable:\s+(\d+)\s+kB)");
  if (!std::regex_search(meminfo, m, re)) return std::nullopt;
  return std::stoull(m[1]) * 1024ull;
}

std::vector<std::string> ProcessProbe::argv_at(double gmu) const {
  return with_flag(opt_.argv, "--gpu-memory-utilization", g3(gmu));
}

Result<DryRun> ProcessProbe::dry_run(double gmu) {
  auto argv = argv_at(gmu);
  argv.push_back("--dry-run-memory");
  const std::string log = opt_.log_dir + "/dry-" + g3(gmu) + ".json";
  SPK_ASSIGN(pid_t pid, spawn(argv, log, {}));
  int st = 0;
  ::waitpid(pid, &st, 0);
  const std::string out = read_or_empty(log);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error("runtime --dry-run-memory at G " + g3(gmu) + " printed no JSON: " + tail(out),
                      "run the plan's rank-0 argv with --dry-run-memory by hand to see why");
  DryRun d;
  d.gmu = gmu;
  if (j.contains("error")) {
    d.ok = false;
    d.error = j["error"].get<std::string>();
    return d;
  }
  d.ok = true;
  d.device_bytes = j.value("device_bytes", uint64_t{0});
  d.available_kv_bytes = j.value("available_kv_bytes", int64_t{0});
  d.kv_tokens = j.value("kv_tokens", int64_t{0});
  d.kv_bytes_per_token = j.value("kv_bytes_per_token", uint64_t{0});
  d.block_size = j.value("block_size", 16);
  d.max_model_len = j.value("max_model_len", 0);
  if (d.device_bytes == 0 || d.kv_bytes_per_token == 0)
    return make_error("runtime --dry-run-memory JSON lacks device_bytes / kv_bytes_per_token: " + tail(out),
                      "the runtime and this sparkctl disagree on the plan's schema (rebuild both)");
  return d;
}

BootResult ProcessProbe::boot(double gmu) {
  BootResult r;
  const auto t0 = std::chrono::steady_clock::now();
  auto argv = with_flag(argv_at(gmu), "--port", "0");  // never the lane's port: it may be serving
  std::string key_env = "SPARKCTL_API_KEY";
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "--api-key-env") key_env = argv[i + 1];
  std::random_device rd;
  const std::string log = opt_.log_dir + "/boot-" + g3(gmu) + ".log";
  auto pid = spawn(argv, log, {{key_env, "gmu-bisect-" + std::to_string(rd()) + std::to_string(rd())}});
  if (!pid.ok()) {
    r.detail = pid.error().what();
    return r;
  }
  static const std::regex kv_re(R"(KV cache size: (\d+) tokens)");
  const auto deadline = t0 + opt_.boot_timeout;
  while (true) {
    int st = 0;
    const bool exited = ::waitpid(*pid, &st, WNOHANG) == *pid;
    const std::string out = read_or_empty(log);
    if (out.find("\nready:") != std::string::npos || out.rfind("ready:", 0) == 0) {
      std::smatch m;
      if (std::regex_search(out, m, kv_re)) {
        r.kind = BootKind::booted;
        r.kv_tokens = std::stoll(m[1]);
      } else {
        r.detail = "ready but no \"KV cache size\" line in " + log;
      }
      if (!exited) stop(*pid, std::chrono::seconds(10));
      break;
    }
    if (exited) {
      if (WIFEXITED(st) && is_planner_shortfall(out)) {
        r.kind = BootKind::clean_too_high;
        r.detail = tail(out, 200);
      } else {
        r.detail = (WIFSIGNALED(st) ? "killed by signal " + std::to_string(WTERMSIG(st))
                                    : "exit " + std::to_string(WEXITSTATUS(st))) +
                   ": " + tail(out, 200) + " (log " + log + ")";
      }
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop(*pid, std::chrono::seconds(10));
      r.detail = "not ready after " + std::to_string(opt_.boot_timeout.count()) + " s (log " + log + ")";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::optional<uint64_t> ProcessProbe::mem_available() {
  auto t = read_file(opt_.meminfo_path);
  if (!t.ok()) return std::nullopt;
  return parse_mem_available(*t);
}

}  // namespace spk
