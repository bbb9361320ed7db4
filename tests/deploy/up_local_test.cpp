// (a) `up lane-demo` on the implicit one-node local cluster with the real runtime (CPU, synthetic
// Qwen3-tiny): a real chat completion with the API key, `status` shows it, `up` again is "already up",
// `logs` shows rank 0's lines, `down` leaves no process, no pidfile and no shm segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "orchestrator/deploy/readiness.h"
#include "orchestrator/gmu/gmu_store.h"
#include "orchestrator/node/runtime_procs.h"
#include "orchestrator/node/shm_segments.h"
#include "tests/deploy/deploy_test_support.h"

namespace spk {
namespace {

using namespace deploy_test;
using nlohmann::json;
namespace fs = std::filesystem;

// `plan --json` is what `up` ran (issue 27): every rank's argv (after the runtime's words: argv[0] is
// the node's binary, or the stand-in that replaces `sparkctl runtime serve`) and env equal spec.json's,
// and every step the plan does not mark skipped shows up as a phase of `up`'s progress (none skipped).
void expect_plan_is_what_up_ran(const std::string& plan_out, const std::string& state,
                                const std::string& up_out, bool standin) {
  json plan = json::parse(plan_out, nullptr, false);
  ASSERT_TRUE(plan.is_object()) << plan_out;
  auto spec_text = read_file(state + "/deploy/spec.json");
  ASSERT_TRUE(spec_text.ok());
  json spec = json::parse(*spec_text);
  ASSERT_EQ(plan["ranks"].size(), spec["ranks"].size());
  for (size_t i = 0; i < spec["ranks"].size(); ++i) {
    auto pa = plan["ranks"][i]["argv"].get<std::vector<std::string>>();
    auto sa = spec["ranks"][i]["argv"].get<std::vector<std::string>>();
    pa.erase(pa.begin(), pa.begin() + (standin ? 3 : 1));
    sa.erase(sa.begin());
    EXPECT_EQ(pa, sa) << "rank " << i << ": plan --json differs from what up launched";
    std::vector<std::pair<std::string, std::string>> pe, se;
    for (const auto& e : plan["ranks"][i]["env"]) pe.emplace_back(e["name"], e["value"]);
    for (const auto& e : spec["ranks"][i]["env"]) se.emplace_back(e[0], e[1]);
    EXPECT_EQ(pe, se) << "rank " << i;
  }
  for (const auto& st : plan["steps"]) {
    const std::string phase = "s] " + st["kind"].get<std::string>() + ":";
    if (st["skipped"].get<bool>())
      EXPECT_EQ(up_out.find(phase), std::string::npos) << "plan skips " << phase << " but up ran it";
    else if (st["kind"] != "launch_worker" || !standin)
      EXPECT_NE(up_out.find(phase), std::string::npos) << "plan lists " << phase << ", up never ran it";
  }
}

TEST(UpLocal, LaneDemoServesAChatCompletionThenDownLeavesNothing) {
  const std::string dir = temp_dir("up-local");
  ASSERT_FALSE(dir.empty());
  const std::string state = dir + "/state", recipes = dir + "/recipes", shm = dir + "/shm";
  fs::create_directories(recipes);
  fs::create_directories(shm);
  auto demo = read_file(std::string(SPARKCTL_TEST_DATA_DIR) + "/../../recipes/lane-demo.yaml");
  ASSERT_TRUE(demo.ok());
  const int port = free_port();
  // The embedded lane-demo with ports of its own (another test or demo may hold 8000).
  ASSERT_TRUE(write_file_atomic(recipes + "/lane-demo.yaml",
                                *demo + "port: " + std::to_string(port) +
                                    "\nmaster_port: " + std::to_string(free_port()) + "\n")
                  .ok());
  const std::string env = "SPARKCTL_STATE_DIR=" + state + " SPARKCTL_RECIPES_DIR=" + recipes +
                          " SPARKCTL_SHM_DIR=" + shm + " SPARKCTL_NPM_DIR=" + SPARKCTL_NPM_DIR +
                          " SPARKCTL_STATS_INTERVAL_S=1 ";

  auto up = test::run_sparkctl("up lane-demo --no-drop-caches --ready-timeout 300", env);
  ASSERT_EQ(up.code, 0) << up.out;
  EXPECT_NE(up.out.find("preflight: ok"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("launch_rank0"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("warmup 1"), std::string::npos) << up.out;
  std::cout << up.out;
  auto plan = test::run_sparkctl("--json plan lane-demo", env, /*merge_stderr=*/false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  expect_plan_is_what_up_ran(plan.out, state, up.out, /*standin=*/false);

  auto key = read_file(state + "/deploy/api_key");
  ASSERT_TRUE(key.ok());
  std::string k = *key;
  while (!k.empty() && k.back() == '\n') k.pop_back();
  auto ep = parse_endpoint("http://127.0.0.1:" + std::to_string(port) + "/v1");
  ASSERT_TRUE(ep.ok());
  auto n = chat_completion(*ep, k, "demo", 8, 6, std::chrono::seconds(120));
  ASSERT_TRUE(n.ok()) << n.error().what();
  EXPECT_GE(*n, 1);
  auto wrong = chat_completion(*ep, "not-the-key", "demo", 8, 2, std::chrono::seconds(30));
  EXPECT_FALSE(wrong.ok());

  json st = status_json(env);
  ASSERT_EQ(st.value("phase", ""), "ready") << st.dump(2);
  ASSERT_EQ(st["ranks"].size(), 1u);
  const int pid = st["ranks"][0]["pid"];
  const int sup = st["supervisor"]["pid"];
  EXPECT_TRUE(st["ranks"][0]["alive"].get<bool>());
  EXPECT_GT(st["ranks"][0]["kv_tokens"].get<int64_t>(), 0) << st.dump(2);
  EXPECT_TRUE(st["supervisor"]["alive"].get<bool>());
  EXPECT_EQ(test::run_sparkctl("status", env).code, 0);

  auto again = test::run_sparkctl("up lane-demo --no-drop-caches", env);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("already up"), std::string::npos) << again.out;
  EXPECT_EQ(status_json(env)["ranks"][0]["pid"], pid) << "reused, not relaunched";

  // The operator's view: a vLLM-style periodic line, one access line per request, status counters.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  auto logs = test::run_sparkctl("logs --node local --bytes 65536", env);
  EXPECT_EQ(logs.code, 0) << logs.out;
  EXPECT_NE(logs.out.find("[local/rank-0] ready:"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("Avg prompt throughput: "), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("Avg generation throughput: "), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("KV cache usage: "), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("generated tokens in "), std::string::npos) << "access line: " << logs.out;
  json serving = status_json(env)["serving"];
  EXPECT_EQ(serving.value("model", ""), "demo") << serving.dump(2);
  EXPECT_EQ(serving.value("max_model_len", 0), 2048) << serving.dump(2);
  EXPECT_GE(serving.value("requests", 0), 2) << serving.dump(2);
  EXPECT_GT(serving.value("generation_tokens", 0), 0) << serving.dump(2);
  auto tail = test::run_sparkctl("logs --node local -n 2", env);
  EXPECT_EQ(tail.code, 0);
  size_t rank0_lines = 0;
  for (size_t at = tail.out.find("[local/rank-0]"); at != std::string::npos;
       at = tail.out.find("[local/rank-0]", at + 1))
    ++rank0_lines;
  EXPECT_EQ(rank0_lines, 2u) << tail.out;

  // bench finds the deployment's endpoint and API key by itself (state dir), no env var needed.
  auto bench = test::run_sparkctl(
      "bench lane-demo --probe-tokens 4 --repeats 1 --max-concurrency 2 --needle-tokens 0 --out " + state +
          "/b",
      "env -u SPARKCTL_API_KEY " + env);
  EXPECT_EQ(bench.code, 0) << bench.out;
  EXPECT_NE(bench.out.find("first after ready"), std::string::npos) << bench.out;

  auto down = test::run_sparkctl("down", env);
  ASSERT_EQ(down.code, 0) << down.out;
  EXPECT_FALSE(pid_alive(pid));
  EXPECT_FALSE(pid_alive(sup));
  EXPECT_TRUE(find_runtime_processes(state).empty()) << "a runtime of this state dir survived down";
  EXPECT_TRUE(find_shm_segments(shm).empty());
  for (const auto& e : fs::recursive_directory_iterator(state))
    EXPECT_NE(e.path().extension(), ".pid") << e.path();
  EXPECT_EQ(test::run_sparkctl("status", env).code, 1) << "stopped is not ready";
  json stopped = status_json(env);
  EXPECT_TRUE(stopped["serving"].is_null()) << stopped.dump(2);
  EXPECT_EQ(stopped["ranks"][0]["endpoint"], "") << "no stale endpoint after down: " << stopped.dump(2);
  EXPECT_EQ(stopped["ranks"][0]["kv_tokens"], 0) << "no stale KV after down: " << stopped.dump(2);
  // Up right after down: the port's TIME_WAIT leftovers are not "in use" (nothing listens).
  auto up2 = test::run_sparkctl("up lane-demo --no-drop-caches --ready-timeout 300", env);
  EXPECT_EQ(up2.code, 0) << up2.out;
  // logs shows the current run only (the log is appended across launches); --all-runs shows both.
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const std::string header = "[local/rank-0] == sparkctl node launch rank-0";
  EXPECT_EQ(count(test::run_sparkctl("logs --node local --bytes 1000000", env).out, header), 1u);
  EXPECT_EQ(count(test::run_sparkctl("logs --node local --bytes 1000000 --all-runs", env).out, header), 2u);
  EXPECT_EQ(test::run_sparkctl("down", env).code, 0);
  kill_pidfiles(state);
  fs::remove_all(dir);
}

// Readiness is not granted before the warmup ends: a warmup request that fails (the stand-in answers 500
// to max_tokens >= 6) fails `up`, prints the tail of the node's log, stops what it started, and the
// deployment is never marked ready. Also: `up` uses the GMU stored by `gmu bisect --write`.
TEST(UpLocal, FailedWarmupMeansNeverReadyAndNothingLeftRunning) {
  const std::string dir = temp_dir("up-warm");
  ASSERT_FALSE(dir.empty());
  const std::string state = dir + "/state", lane = dir + "/lane-wf.yaml";
  fs::create_directories(dir + "/shm");
  ASSERT_TRUE(write_file_atomic(lane, standin_lane("lane-wf", free_port(),
                                                   "env: {SPK_FAKE_FAIL_MAX_TOKENS: \"6\"}\n"
                                                   "warmup:\n  - {prompt_tokens: 8, max_tokens: 2}\n"
                                                   "  - {prompt_tokens: 8, max_tokens: 6}\n"))
                  .ok());
  const std::string env = "SPARKCTL_STATE_DIR=" + state + " SPARKCTL_SHM_DIR=" + dir +
                          "/shm SPARKCTL_RUNTIME_STANDIN=" + SPK_FAKE_SERVE + " ";
  // A stored GMU choice for this lane, model revision and node set replaces the recipe's value.
  ASSERT_TRUE(write_gmu_choice(state, GmuChoice{"lane-wf", "", {"local"}, 0.777, 1000}).ok());
  auto up = test::run_sparkctl("up " + lane + " --no-drop-caches", env);
  EXPECT_EQ(up.code, 1) << up.out;
  EXPECT_NE(up.out.find("gpu_memory_utilization 0.777 from"), std::string::npos) << up.out;
  auto spec = read_file(state + "/deploy/spec.json");
  ASSERT_TRUE(spec.ok());
  EXPECT_NE(spec->find("\"0.777\""), std::string::npos) << *spec;
  // plan applies the stored choice exactly as up does, and says where it came from.
  auto plan = test::run_sparkctl("--json plan " + lane, env, /*merge_stderr=*/false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("gpu_memory_utilization 0.777 from"), std::string::npos) << plan.out;
  {
    json pj = json::parse(plan.out, nullptr, false);
    ASSERT_TRUE(pj.is_object());
    auto spec_j = json::parse(*spec);
    auto pa = pj["ranks"][0]["argv"].get<std::vector<std::string>>();
    auto sa = spec_j["ranks"][0]["argv"].get<std::vector<std::string>>();
    EXPECT_EQ(std::vector<std::string>(pa.begin() + 3, pa.end()),
              std::vector<std::string>(sa.begin() + 1, sa.end()));
  }
  EXPECT_NE(up.out.find("warmup request 2 failed"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("[local/rank-0] fake serve: chat completion, max_tokens 6"), std::string::npos)
      << "the tail of the node's log is shown: " << up.out;
  EXPECT_NE(up.out.find("every rank started by this attempt is stopped"), std::string::npos) << up.out;
  const auto at = up.out.find("rank 0 on local: pid ");
  ASSERT_NE(at, std::string::npos) << up.out;
  const int pid = std::stoi(up.out.substr(at + 21));
  EXPECT_FALSE(pid_alive(pid));
  json st = status_json(env);
  EXPECT_EQ(st.value("phase", ""), "failed") << st.dump(2);
  for (const auto& e : st["events"]) EXPECT_NE(e["kind"], "ready") << st.dump(2);
  EXPECT_FALSE(st["supervisor"]["alive"].get<bool>())
      << "no supervisor for a deployment that never got ready";
  for (const auto& e : fs::recursive_directory_iterator(state))
    EXPECT_NE(e.path().extension(), ".pid") << e.path();
  kill_pidfiles(state);
  fs::remove_all(dir);
}

// Supervisor: rank 0 alive but its /health failing (a hang) -> every rank stopped and relaunched
// ("hang", "restored", restarts 1); hung again while every relaunch dies at start -> after the give-up
// budget (2 here) everything is stopped and the deployment is failed.
TEST(UpLocal, SupervisorRestartsAHungEngineThenGivesUp) {
  const std::string dir = temp_dir("up-hang");
  ASSERT_FALSE(dir.empty());
  const std::string state = dir + "/state", lane = dir + "/lane-hang.yaml", hang = dir + "/hang",
                    dead = dir + "/dead";
  fs::create_directories(dir + "/shm");
  ASSERT_TRUE(write_file_atomic(lane, standin_lane("lane-hang", free_port(),
                                                   "env: {SPK_FAKE_HEALTH_FAIL_FILE: \"" + hang +
                                                       "\", SPK_FAKE_START_FAIL_FILE: \"" + dead + "\"}\n"))
                  .ok());
  const std::string env =
      "SPARKCTL_STATE_DIR=" + state + " SPARKCTL_SHM_DIR=" + dir +
      "/shm SPARKCTL_RUNTIME_STANDIN=" + SPK_FAKE_SERVE +
      " SPARKCTL_RESTART_BACKOFF_MS=200 SPARKCTL_SUPERVISE_POLL_MS=300 SPARKCTL_RESTART_GIVE_UP=2 ";
  auto up = test::run_sparkctl("up " + lane + " --no-drop-caches --ready-timeout 30", env);
  ASSERT_EQ(up.code, 0) << up.out;
  const int first = status_json(env)["ranks"][0]["pid"];
  const int sup = status_json(env)["supervisor"]["pid"];
  auto has_event = [](const json& st, const char* kind) {
    for (const auto& e : st.value("events", json::array()))
      if (e["kind"] == kind) return true;
    return false;
  };
  json st;
  ASSERT_TRUE(write_file_atomic(hang, "").ok());
  ASSERT_TRUE(eventually([&] { return has_event(st = status_json(env), "hang"); }, std::chrono::seconds(30)))
      << st.dump(2);
  fs::remove(hang);  // the relaunched engine is healthy
  ASSERT_TRUE(eventually(
      [&] {
        st = status_json(env);
        return has_event(st, "restored") && st.value("phase", "") == "ready" &&
               st["ranks"][0]["restarts"] == 1 && st["ranks"][0]["alive"].get<bool>();
      },
      std::chrono::seconds(30)))
      << st.dump(2);
  EXPECT_FALSE(pid_alive(first)) << "the hung rank was stopped";
  ASSERT_TRUE(write_file_atomic(dead, "").ok());  // from now on every relaunch dies at start
  ASSERT_TRUE(write_file_atomic(hang, "").ok());
  ASSERT_TRUE(eventually(  // status reads state.json before the event log: wait for both
      [&] { return has_event(st = status_json(env), "give_up") && st.value("phase", "") == "failed"; },
      std::chrono::seconds(60)))
      << st.dump(2);
  EXPECT_EQ(st.value("phase", ""), "failed") << st.dump(2);
  EXPECT_TRUE(has_event(st, "restart_failed")) << st.dump(2);
  EXPECT_TRUE(eventually([&] { return !pid_alive(sup); }, std::chrono::seconds(10)))
      << "the supervisor exits";
  for (const auto& r : st["ranks"]) EXPECT_FALSE(r["alive"].get<bool>()) << st.dump(2);
  EXPECT_EQ(test::run_sparkctl("down", env).code, 0);
  kill_pidfiles(state);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spk
