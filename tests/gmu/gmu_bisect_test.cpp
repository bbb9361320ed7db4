// Bisection logic against fake nodes. FakeNode is the planner's line plus a boot that fails above a
// threshold (clean or dangerous); ScriptNode is a /bin/sh "runtime" run through the real ProcessProbe,
// so the exit/log classification (shortfall message = clean, SIGKILL = dangerous) is exercised too.
#include "orchestrator/gmu/gmu_bisect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "orchestrator/gmu/gmu_store.h"
#include "orchestrator/gmu/process_probe.h"

namespace spk {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// Device 10 GiB, fixed 5 GiB, 1 MiB per token (block 16). kv_tokens(G) = floor((10G - 5) GiB / 16 MiB) x 16.
struct FakeNode : GmuProbe {
  double clean_above = 2.0;      // boots at G > this exit with the planner's shortfall
  double dangerous_above = 2.0;  // boots at G > this are killed (OOM)
  double real_overhead_gib = 0;  // the boot's pool is smaller than the plan by this much
  std::optional<uint64_t> avail = 100 * kGiB;
  int boots = 0, dry_runs = 0;

  static int64_t tokens(double g, double extra_gib = 0) {
    double budget = 10.0 * kGiB * g - 5.0 * kGiB - extra_gib * kGiB;
    if (budget < 0) return -1;
    return static_cast<int64_t>(std::floor(budget / (16.0 * (1 << 20)))) * 16;
  }
  Result<DryRun> dry_run(double g) override {
    ++dry_runs;
    DryRun d{g,         true,    "", 10 * kGiB, static_cast<int64_t>(10.0 * kGiB * g - 5.0 * kGiB),
             tokens(g), 1 << 20, 16, 4096};
    if (d.kv_tokens < 0) {
      d.ok = false;
      d.error = "KV cache memory budget is negative: short by 1.00 GiB";
    }
    return d;
  }
  BootResult boot(double g) override {
    ++boots;
    if (g > dangerous_above + 1e-9) return {BootKind::dangerous, 0, "killed by signal 9", 0};
    if (g > clean_above + 1e-9) return {BootKind::clean_too_high, 0, "short by 0.02 GiB", 0};
    return {BootKind::booted, tokens(g, real_overhead_gib), "", 0};
  }
  std::optional<uint64_t> mem_available() override { return avail; }
};

BisectOptions opts(int64_t target) {
  BisectOptions o;
  o.kv_target = target;
  return o;
}

TEST(GmuBisect, AnalyticAnswerConfirmedByTwoBoots) {
  FakeNode n;
  // 2000 tokens = 125 blocks = 2000 MiB: G = 0.6953, below --min -> 0.700; one step above boots too.
  auto r = bisect_gmu(n, opts(2000));
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_DOUBLE_EQ(r->analytic_gmu, 0.7);
  EXPECT_DOUBLE_EQ(r->chosen_gmu, 0.7);
  EXPECT_GE(r->chosen_kv_tokens, 2000);
  EXPECT_EQ(r->boots, 2);
  EXPECT_NEAR(r->window_max_gmu, 0.71, 1e-9);
  // 3000 tokens -> 188 blocks = 3008 MiB: (5120 + 3008) / 10240 = 0.79375 -> 0.794.
  FakeNode m;
  auto q = bisect_gmu(m, opts(3000));
  ASSERT_TRUE(q.ok()) << q.error().what();
  EXPECT_NEAR(q->chosen_gmu, 0.794, 1e-9);
  EXPECT_LT(FakeNode::tokens(0.793), 3000);
  EXPECT_GE(FakeNode::tokens(0.794), 3000);
  EXPECT_LE(m.dry_runs, 4);  // seconds, not boots
}

TEST(GmuBisect, ClimbsFromBelowWhenTheRealPoolIsSmaller) {
  FakeNode n;
  n.real_overhead_gib = 0.15;  // the runtime needs 150 MiB more than planned: first boot is short
  auto r = bisect_gmu(n, opts(3000));
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_NEAR(r->analytic_gmu, 0.794, 1e-9);
  EXPECT_NEAR(r->chosen_gmu, 0.814, 1e-9);  // 0.794 short, 0.804 short, 0.814 fits
  EXPECT_GE(r->chosen_kv_tokens, 3000);
  EXPECT_EQ(r->rows[r->rows.size() - 4].outcome, "booted_short");
}

TEST(GmuBisect, CleanTooHighAboveThresholdNarrowsTheWindow) {
  FakeNode n;
  n.clean_above = 0.80;
  auto r = bisect_gmu(n, opts(3000));
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_NEAR(r->chosen_gmu, 0.794, 1e-9);
  EXPECT_EQ(r->rows.back().outcome, "clean_too_high");  // 0.804 refused cleanly
  EXPECT_EQ(r->window_max_gmu, 0);
}

TEST(GmuBisect, DangerousBootStopsClimbing) {
  FakeNode n;
  n.dangerous_above = 0.75;  // the target needs 0.794: the first boot is killed
  auto r = bisect_gmu(n, opts(3000));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("dangerously"), std::string::npos) << r.error().what();
  EXPECT_EQ(n.boots, 1);
}

TEST(GmuBisect, MemAvailableFloorRefusesWithoutBooting) {
  FakeNode n;
  n.avail = 15 * kGiB;  // floor 8 GiB: G at most 0.7
  auto r = bisect_gmu(n, opts(3000));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("floor"), std::string::npos) << r.error().what();
  EXPECT_EQ(n.boots, 0);
}

TEST(GmuBisect, UnreachableTargetNamesTheKnob) {
  FakeNode n;
  auto r = bisect_gmu(n, opts(1 << 20));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("--max"), std::string::npos);
  EXPECT_EQ(n.boots, 0);
}

// A scripted runtime through ProcessProbe: dry run prints the planner's JSON; boots above 0.80 exit 1
// with the planner's shortfall line, above 0.85 SIGKILL themselves; else log the KV size and "ready:".
const char* kScript = R"SH(
G=""; DRY=0; prev=""
for a in "$@"; do [ "$prev" = "--gpu-memory-utilization" ] && G=$a; [ "$a" = "--dry-run-memory" ] && DRY=1; prev=$a; done
KV=$(awk -v g="$G" 'BEGIN{b=10737418240*g-5368709120; if(b<0){print -1}else{printf "%d", int(b/16777216)*16}}')
if [ $DRY = 1 ]; then
  AV=$(awk -v g="$G" 'BEGIN{printf "%.0f", 10737418240*g-5368709120}')
  echo "{\"device_bytes\":10737418240,\"available_kv_bytes\":$AV,\"kv_tokens\":$KV,\"kv_bytes_per_token\":1048576,\"block_size\":16,\"max_model_len\":4096}"
  exit 0
fi
if awk -v g="$G" 'BEGIN{exit !(g>0.85)}'; then kill -9 $$; fi
if awk -v g="$G" 'BEGIN{exit !(g>0.80)}'; then echo "sparkctl runtime serve: KV cache memory budget is negative: short by 0.02 GiB (x)"; exit 1; fi
[ -n "$SPARKCTL_API_KEY" ] || { echo "no key"; exit 2; }
echo "KV cache size: $KV tokens"; echo "ready: serving fake"; exec sleep 30
)SH";

struct ScriptNode {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gmu-test-" + std::to_string(::getpid()));
  ScriptNode() { std::filesystem::create_directories(dir); }
  ~ScriptNode() { std::filesystem::remove_all(dir); }
  ProcessProbe probe() {
    return ProcessProbe({{"/bin/sh", "-c", kScript, "fake", "--api-key-env", "SPARKCTL_API_KEY",
                          "--gpu-memory-utilization", "0.9", "--port", "8000"},
                         dir.string(),
                         std::chrono::seconds(20)});
  }
};

TEST(GmuProcessProbe, ClassifiesBootsOfAFakeNode) {
  ScriptNode n;
  auto p = n.probe();
  auto d = p.dry_run(0.8);
  ASSERT_TRUE(d.ok()) << d.error().what();
  EXPECT_EQ(d->kv_tokens, FakeNode::tokens(0.8));
  BootResult ok = p.boot(0.75);
  EXPECT_EQ(ok.kind, BootKind::booted) << ok.detail;
  EXPECT_EQ(ok.kv_tokens, FakeNode::tokens(0.75));
  EXPECT_LT(ok.seconds, 15);  // stopped at readiness, not left to sleep 30 s
  EXPECT_EQ(p.boot(0.82).kind, BootKind::clean_too_high);
  BootResult bad = p.boot(0.9);
  EXPECT_EQ(bad.kind, BootKind::dangerous);
  EXPECT_NE(bad.detail.find("signal 9"), std::string::npos) << bad.detail;
}

TEST(GmuProcessProbe, BisectOnAFakeNodeStopsBelowTheThreshold) {
  ScriptNode n;
  auto p = n.probe();
  BisectOptions o = opts(3000);
  o.apply_floor = false;  // the floor is FakeNode's test; this machine's MemAvailable must not matter
  auto r = bisect_gmu(p, o);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_NEAR(r->chosen_gmu, 0.794, 1e-9);
  EXPECT_EQ(r->boots, 2);
  EXPECT_EQ(r->rows.back().outcome, "clean_too_high");  // 0.804 > 0.80
  // A target that needs G above the dangerous threshold: one boot, stop.
  o.kv_target = 3800;  // 238 blocks: (5120 + 3808) / 10240 -> 0.872
  auto bad = bisect_gmu(p, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("dangerously"), std::string::npos) << bad.error().what();
}

TEST(GmuStore, WritesExactlyTheSchemaUpReads) {
  ScriptNode n;
  GmuChoice c{"lane-x", "abc123", {"spark-a", "spark-b"}, 0.9291, 196608};
  ASSERT_TRUE(write_gmu_choice(n.dir.string(), c).ok());
  auto back = read_gmu_choice(n.dir.string(), "lane-x");
  ASSERT_TRUE(back.ok()) << back.error().what();
  EXPECT_DOUBLE_EQ(back->gmu, 0.929);
  EXPECT_EQ(back->nodes, c.nodes);
  EXPECT_EQ(back->kv_tokens, 196608);
  EXPECT_EQ(back->model_revision, "abc123");
  EXPECT_EQ(parse_mem_available("MemTotal: 10 kB\nMemAvailable:    2048 kB\n"), 2048u * 1024);
  EXPECT_FALSE(parse_mem_available("MemTotal: 10 kB\n").has_value());
}

}  // namespace
}  // namespace spk
