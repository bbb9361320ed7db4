#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kernels/base/fs.h"
#include "orchestrator/deploy/backoff.h"
#include "orchestrator/deploy/deploy_state.h"
#include "orchestrator/deploy/fingerprint.h"
#include "orchestrator/deploy/liveness.h"

namespace spk {
namespace {

using namespace std::chrono_literals;

TEST(Fingerprint, EachFieldChangesIt) {
  FingerprintInputs a{"lane-demo", "tp: 1\n", "00ff", "rev1"};
  const auto base = deployment_fingerprint(a);
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(base, deployment_fingerprint(a));
  auto b = a;
  b.recipe_text = "tp: 2\n";
  EXPECT_NE(base, deployment_fingerprint(b));
  b = a;
  b.binary_xxh3 = "00fe";
  EXPECT_NE(base, deployment_fingerprint(b));
  b = a;
  b.model_revision = "rev2";
  EXPECT_NE(base, deployment_fingerprint(b));
  // Field boundaries matter: moving a character between fields is a different deployment.
  FingerprintInputs c{"lane-demo", "tp: 1\n0", "0ff", "rev1"};
  EXPECT_NE(base, deployment_fingerprint(c));
}

TEST(DeployState, RoundTripAndAbsence) {
  char tmpl[] = "/tmp/spk-deploy-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto missing = read_deploy_state(dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().fix.find("sparkctl up"), std::string::npos);

  DeployState s{"lane-demo", "0123456789abcdef", "ready", 4242, {}};
  s.ranks.push_back({0, "local", 100, "ready", 1700000000000, 1, "http://127.0.0.1:8000", 1 << 20});
  s.ranks.push_back({1, "node-b", 101, "ready", 1700000000001, 0, "", 0});
  ASSERT_TRUE(write_deploy_state(dir, s).ok());
  auto r = read_deploy_state(dir);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->lane, "lane-demo");
  EXPECT_EQ(r->fingerprint, s.fingerprint);
  EXPECT_EQ(r->supervisor_pid, 4242);
  ASSERT_EQ(r->ranks.size(), 2u);
  EXPECT_EQ(r->ranks[0].endpoint, "http://127.0.0.1:8000");
  EXPECT_EQ(r->ranks[0].restarts, 1);
  EXPECT_EQ(r->ranks[0].kv_bytes, 1 << 20);
  EXPECT_EQ(r->ranks[1].node, "node-b");

  ASSERT_TRUE(write_file_atomic(deploy_state_path(dir), "{not json").ok());
  EXPECT_FALSE(read_deploy_state(dir).ok());
  std::filesystem::remove_all(dir);
}

TEST(Backoff, DoublesToCapResetsAndGivesUp) {
  BackoffPolicy p{10s, 300s, 600s, 7};
  RestartBackoff b(p);
  auto t = std::chrono::steady_clock::time_point{};
  const std::chrono::milliseconds want[] = {10s, 20s, 40s, 80s, 160s, 300s, 300s};
  for (auto w : want) {
    auto d = b.on_failure(t);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(*d, w);
    b.on_healthy(t + 1s);
    t += 60s;  // healthy less than reset_after: no reset
  }
  EXPECT_FALSE(b.on_failure(t).has_value()) << "give-up budget of 7 restarts";

  RestartBackoff r(p);
  ASSERT_EQ(*r.on_failure(t), 10s);
  ASSERT_EQ(*r.on_failure(t), 20s);
  r.on_healthy(t);
  EXPECT_EQ(*r.on_failure(t + 600s), 10s) << "10 min healthy resets the backoff";
  EXPECT_EQ(r.total_restarts(), 3);
}

// Issue 28: busy is not hung. A slow but answered /health with steps advancing is alive however long
// it took; an engine that reports no step past stall_after is hung at once; no answer is hung only after
// hang_polls polls in a row. Each hung verdict names the figures it rests on.
TEST(Liveness, TellsBusyFromHung) {
  LivenessJudge j({60s, 3});
  HealthProbe busy;
  busy.answered = true;
  busy.status = 200;
  busy.has_engine = true;
  busy.idle = false;
  busy.running = 4;
  busy.waiting = 60;
  busy.latency_s = 4.9;  // slow under load: not a failure
  for (int i = 0; i < 10; ++i) {
    busy.steps = 1000 + static_cast<uint64_t>(i) * 50;
    busy.stalled_ms = 30;
    EXPECT_EQ(j.judge(busy), LivenessJudge::Verdict::alive);
  }
  HealthProbe none;
  none.error = "Connection timed out after 5000 ms";
  EXPECT_EQ(j.judge(none), LivenessJudge::Verdict::suspect);
  EXPECT_EQ(j.judge(none), LivenessJudge::Verdict::suspect);
  EXPECT_EQ(j.judge(busy), LivenessJudge::Verdict::alive);  // answered again: the count starts over
  EXPECT_EQ(j.judge(none), LivenessJudge::Verdict::suspect);
  EXPECT_EQ(j.judge(none), LivenessJudge::Verdict::suspect);
  EXPECT_EQ(j.judge(none), LivenessJudge::Verdict::hung);
  EXPECT_NE(j.evidence().find("not answered 3 poll(s)"), std::string::npos) << j.evidence();
  EXPECT_NE(j.evidence().find("last answer: 1450 steps, busy"), std::string::npos) << j.evidence();

  j.reset();
  HealthProbe stuck = busy;
  stuck.stalled_ms = 75000;
  stuck.latency_s = 0.002;
  EXPECT_EQ(j.judge(stuck), LivenessJudge::Verdict::hung);
  EXPECT_NE(j.evidence().find("no step completed for 75.0 s"), std::string::npos) << j.evidence();
  EXPECT_NE(j.evidence().find("4 running, 60 waiting"), std::string::npos) << j.evidence();
  // Idle engines never stall; stand-ins without progress fields are judged by the answer alone.
  HealthProbe idle = stuck;
  idle.idle = true;
  EXPECT_EQ(j.judge(idle), LivenessJudge::Verdict::alive);
  HealthProbe bare;
  bare.answered = true;
  bare.status = 200;
  EXPECT_EQ(j.judge(bare), LivenessJudge::Verdict::alive);
}

}  // namespace
}  // namespace spk
