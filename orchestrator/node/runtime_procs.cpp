#include "orchestrator/node/runtime_procs.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace spk {

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_nul(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\0') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::optional<std::string> env_value(const std::string& environ_blob, const std::string& key) {
  for (const auto& kv : split_nul(environ_blob))
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  return std::nullopt;
}

// Zombies count as dead: they hold no memory and cannot be killed further.
bool is_zombie(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto rp = stat.rfind(')');
  return rp != std::string::npos && rp + 2 < stat.size() && stat[rp + 2] == 'Z';
}

}  // namespace

bool pid_alive(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  return !is_zombie(pid);
}

std::vector<RuntimeProc> find_runtime_processes(const std::optional<std::string>& node_root_env,
                                                const std::string& proc_dir) {
  std::vector<RuntimeProc> out;
  const pid_t self = ::getpid();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(proc_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == self) continue;
    auto argv = split_nul(slurp(e.path().string() + "/cmdline"));
    if (argv.size() < 2 || argv[1] != "runtime") continue;
    if (std::filesystem::path(argv[0]).filename() != "sparkctl") continue;
    if (env_value(slurp(e.path().string() + "/environ"), "SPARKCTL_NODE_ROOT") != node_root_env) continue;
    if (is_zombie(pid)) continue;
    RuntimeProc p;
    p.pid = pid;
    p.pgid = ::getpgid(pid);
    for (size_t i = 0; i < argv.size(); ++i) p.cmdline += (i ? " " : "") + argv[i];
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<pid_t> kill_runtime_processes(const std::vector<RuntimeProc>& procs, int grace_ms) {
  const pid_t own_group = ::getpgrp();
  auto signal_one = [&](const RuntimeProc& p, int sig) {
    if (p.pgid == p.pid && p.pgid > 1 && p.pgid != own_group)
      ::kill(-p.pgid, sig);
    else
      ::kill(p.pid, sig);
  };
  for (const auto& p : procs) signal_one(p, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  auto all_dead = [&] {
    for (const auto& p : procs)
      if (pid_alive(p.pid)) return false;
    return true;
  };
  while (!all_dead() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (const auto& p : procs)
    if (pid_alive(p.pid)) signal_one(p, SIGKILL);
  std::vector<pid_t> gone;
  for (int i = 0; i < 100 && !all_dead(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (const auto& p : procs)
    if (!pid_alive(p.pid)) gone.push_back(p.pid);
  return gone;
}

}  // namespace spk
