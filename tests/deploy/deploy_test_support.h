// Shared by the deploy tests that run the real binary: temp dirs, free ports, `sparkctl` with an env
// prefix, status --json, and a last-resort kill of every daemon a failed test may have left.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "kernels/base/fs.h"
#include "tests/support/run_binary.h"
#include "tests/support/sshd_harness.h"

namespace spk::deploy_test {

inline std::string temp_dir(const char* what) {
  std::string t = std::string("/tmp/spk-") + what + "-XXXXXX";
  return ::mkdtemp(t.data()) ? t : std::string();
}

// A TCP port free on 127.0.0.1 right now (bind :0, read, close).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline nlohmann::json status_json(const std::string& env) {
  auto r = spk::test::run_sparkctl("--json status", env, /*merge_stderr=*/false);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_object() ? j : nlohmann::json::object();
}

// Polls `pred` every 200 ms up to `limit`.
inline bool eventually(const std::function<bool()>& pred, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return pred();
}

// SIGKILLs the process group of every pidfile under `root` (recursively): a failed test leaves nothing.
inline void kill_pidfiles(const std::string& root) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".pid") continue;
    auto text = read_file(it->path().string());
    if (!text) continue;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    int pid = j.is_object() ? j.value("pid", 0) : 0;
    if (pid > 1 && ::getpgid(pid) == pid) ::kill(-pid, SIGKILL);
  }
}

// An inventory `name` over every sshd node of `cl` (the first is the head), each with its own root,
// the sparkctl binary installed there, key auth and the harness's known_hosts; written to <dir>/cluster.yaml.
// `node_extra[i]` (optional) is appended to node i's flow map, e.g. ", fabric: {ip: 10.0.0.1/24}".
inline ::testing::AssertionResult write_sshd_inventory(testing::SshdCluster& cl, const std::string& name,
                                                       const std::vector<std::string>& node_extra = {}) {
  const std::string dir = cl.dir();
  std::string inv = "name: " + name + "\ndefaults:\n  ssh: {identity: " + cl.client_key() +
                    ", known_hosts: " + dir + "/known_hosts}\nnodes:\n";
  for (size_t i = 0; i < cl.size(); ++i) {
    const auto& n = cl.node(i);
    if (auto s = cl.install_binary(i, SPARKCTL_BINARY); !s.ok())
      return ::testing::AssertionFailure() << s.error().what();
    inv += "  - {name: n" + std::to_string(i + 2) + ", role: " + (i == 0 ? "head" : "worker") +
           ", ssh: {host: " + n.host + ", port: " + std::to_string(n.port) + "}, binary: " + n.root +
           "/bin/sparkctl, cache_dir: " + n.root + "/cache, state_dir: " + n.root + "/state" +
           (i < node_extra.size() ? node_extra[i] : std::string()) + "}\n";
  }
  if (auto s = write_file_atomic(dir + "/cluster.yaml", inv); !s.ok())
    return ::testing::AssertionFailure() << s.error().what();
  return ::testing::AssertionSuccess();
}

// A lane for the runtime stand-in (tests/support/fake_serve.cpp, SPARKCTL_RUNTIME_STANDIN): cpu, a model
// path that does not exist (the stand-in reads no weights), `port`, a free master port, then `extra` YAML.
inline std::string standin_lane(const std::string& name, int port, const std::string& extra) {
  return "name: " + name + "\nbackend: cpu\nmodel: {path: /nonexistent/m, served_name: fake}\n" +
         "device_memory_gib: 1\nport: " + std::to_string(port) +
         "\nmaster_port: " + std::to_string(free_port()) + "\n" + extra;
}

// At scope exit: `sparkctl down` with `env`, then SIGKILL whatever the pidfiles under `dir` still name,
// so a failed assertion leaves no deployment running.
struct DownOnExit {
  std::string env, dir;
  ~DownOnExit() {
    (void)test::run_sparkctl("down", env);
    kill_pidfiles(dir);
  }
};

}  // namespace spk::deploy_test
