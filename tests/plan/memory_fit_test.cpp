// Memory fit before launch (issue 27): `plan`, `recipe validate` and `up` run the runtime's memory
// planner dry (`runtime serve ... --dry-run-memory`) with each rank's real argv and refuse a lane that
// does not fit, naming the shortfall and the knobs, before anything starts. The recipe's and the
// runtime's default max_num_batched_tokens agree.
#include "orchestrator/deploy/memory_fit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "kernels/base/fs.h"
#include "recipes/recipe.h"
#include "tests/support/run_binary.h"

namespace spk {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

TEST(MemoryFit, ParsesThePlannersAnswer) {
  auto fits = parse_dry_run(0, "n", 0,
                            "[info] loading\n{\n  \"device_bytes\": 2147483648,\n  \"available_kv_bytes\": "
                            "1073741824,\n  \"kv_tokens\": 4096,\n  \"x\": {\n    \"y\": 1\n  }\n}\n");
  EXPECT_EQ(fits.status, "fits") << fits.detail;
  EXPECT_EQ(fits.kv_tokens, 4096);
  EXPECT_NE(fits.detail.find("1.00 GiB of 2.00 GiB"), std::string::npos) << fits.detail;
  auto shortf = parse_dry_run(
      1, "n", 1, "{\n  \"error\": \"KV cache memory budget is negative: short by 1.5 GiB\"\n}\n");
  EXPECT_EQ(shortf.status, "short");
  EXPECT_NE(shortf.detail.find("short by 1.5 GiB"), std::string::npos);
  EXPECT_EQ(parse_dry_run(0, "n", 2, "sparkctl: --model: no such dir\n").status, "error");
  const std::string k = memory_knobs({"sparkctl", "runtime", "serve", "--gpu-memory-utilization", "0.93",
                                      "--max-model-len", "4096", "--max-num-batched-tokens", "8192",
                                      "--kv-cache-dtype", "fp8", "--tensor-parallel-size", "2"});
  for (const char* want : {"gpu_memory_utilization 0.93", "max_model_len 4096", "max_num_batched_tokens 8192",
                           "kv_cache_dtype fp8", "tensor_parallel 2"})
    EXPECT_NE(k.find(want), std::string::npos) << want << " in " << k;
}

TEST(MemoryFit, RecipeAndRuntimeDefaultsOfMaxNumBatchedTokensAgree) {
  auto r = test::run_sparkctl("runtime serve --help");
  ASSERT_EQ(r.code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(--max-num-batched-tokens[^\n]*?(\d+))"))) << r.out;
  EXPECT_EQ(std::stoll(m[1]), Recipe{}.max_num_batched_tokens) << m[0];
}

struct Lanes {
  std::string dir, env;
  Lanes() {
    char t[] = "/tmp/spk-memfit-XXXXXX";
    dir = ::mkdtemp(t) ? t : "";
    fs::create_directories(dir + "/recipes");
    fs::create_directories(dir + "/shm");
    env = "SPARKCTL_STATE_DIR=" + dir + "/state SPARKCTL_RECIPES_DIR=" + dir +
          "/recipes SPARKCTL_SHM_DIR=" + dir + "/shm SPARKCTL_NPM_DIR=" + SPARKCTL_NPM_DIR + " ";
  }
  ~Lanes() {
    (void)test::run_sparkctl("down", env);
    fs::remove_all(dir);
  }
  // lane-demo under another name with another device memory budget.
  void write(const std::string& name, const std::string& gib) const {
    auto demo = read_file(std::string(SPARKCTL_SOURCE_DIR) + "/recipes/lane-demo.yaml");
    std::string y = *demo;
    y = std::regex_replace(y, std::regex("name: lane-demo"), "name: " + name);
    y = std::regex_replace(y, std::regex("device_memory_gib: 2"), "device_memory_gib: " + gib);
    (void)write_file_atomic(dir + "/recipes/" + name + ".yaml", y);
  }
};

TEST(MemoryFitCli, PlanValidateAndUpRefuseALaneThatDoesNotFitBeforeAnythingStarts) {
  Lanes l;
  ASSERT_FALSE(l.dir.empty());
  l.write("lane-tight", "0.02");  // 20 MiB: the runtime's own overhead alone is more
  l.write("lane-roomy", "2");

  // Without the model on this machine nothing can be measured: said, not guessed.
  auto v0 = test::run_sparkctl("recipe validate lane-tight", l.env);
  EXPECT_EQ(v0.code, 0) << v0.out;
  EXPECT_NE(v0.out.find("not checked"), std::string::npos) << v0.out;

  // The synthetic checkpoint, made by the plan's own synth-model command.
  auto pj = json::parse(test::run_sparkctl("--json plan lane-tight", l.env, false).out, nullptr, false);
  ASSERT_TRUE(pj.is_object());
  std::vector<std::string> synth;
  for (const auto& st : pj["steps"])
    if (st["kind"] == "synth_model") synth = st["commands"][0]["argv"].get<std::vector<std::string>>();
  ASSERT_FALSE(synth.empty()) << pj.dump(2);
  std::string args;
  for (size_t i = 1; i < synth.size(); ++i) args += " '" + synth[i] + "'";
  auto made = test::run_sparkctl(args, l.env);
  ASSERT_EQ(made.code, 0) << made.out;

  auto plan = test::run_sparkctl("plan lane-tight", l.env);
  EXPECT_EQ(plan.code, 1) << plan.out;
  EXPECT_NE(plan.out.find("short by"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("knobs: gpu_memory_utilization "), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("max_num_batched_tokens 2048"), std::string::npos) << plan.out;
  auto pjson = json::parse(test::run_sparkctl("--json plan lane-tight", l.env, false).out, nullptr, false);
  ASSERT_TRUE(pjson.is_object());
  EXPECT_EQ(pjson["memory_fit"][0]["status"], "short") << pjson.dump(2);

  auto v = test::run_sparkctl("recipe validate lane-tight", l.env);
  EXPECT_EQ(v.code, 0) << "valid, only not runnable: " << v.out;
  std::string out = v.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_EQ(out.substr(out.rfind('\n') + 1), "runnable by this build: no") << v.out;
  EXPECT_EQ(test::run_sparkctl("recipe validate --strict lane-tight", l.env).code, 1);

  auto up = test::run_sparkctl("up lane-tight --no-drop-caches --ready-timeout 60", l.env);
  EXPECT_EQ(up.code, 1) << up.out;
  EXPECT_NE(up.out.find("does not fit in memory"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("short by"), std::string::npos) << up.out;
  EXPECT_EQ(up.out.find("launch_rank0"), std::string::npos) << "nothing may start: " << up.out;

  auto roomy = test::run_sparkctl("plan lane-roomy", l.env);
  EXPECT_EQ(roomy.code, 0) << roomy.out;
  EXPECT_NE(roomy.out.find("rank 0 on local: fits: KV cache"), std::string::npos) << roomy.out;
  auto vr = test::run_sparkctl("recipe validate --strict lane-roomy", l.env);
  EXPECT_EQ(vr.code, 0) << vr.out;
  EXPECT_NE(vr.out.find("runnable by this build: yes"), std::string::npos) << vr.out;
}

}  // namespace
}  // namespace spk
