#include "orchestrator/deploy/supervisor.h"

#include <iostream>
#include <thread>

#include "orchestrator/deploy/events.h"
#include "orchestrator/deploy/liveness.h"
#include "orchestrator/deploy/rank_ops.h"
#include "orchestrator/deploy/readiness.h"

namespace spk {

using namespace std::chrono_literals;

namespace {

// Sleeps `d` in small steps; false when `stop` was raised meanwhile.
bool nap(std::chrono::milliseconds d, const std::atomic<bool>& stop) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
    if (stop) return false;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(50ms, d));
  }
  return !stop;
}

void save(const std::string& state_dir, const std::function<void(DeployState&)>& edit) {
  auto s = read_deploy_state(state_dir);
  if (!s) return;
  edit(*s);
  (void)write_deploy_state(state_dir, *s);
}

}  // namespace

int run_supervisor(const SupervisorOptions& opt, const std::atomic<bool>& stop) {
  const std::string& dir = opt.ctx.state_dir;
  Progress progress(&std::cout);
  auto spec = read_deploy_spec(dir);
  if (!spec) {
    progress("supervise", spec.error().what());
    return 1;
  }
  auto key = read_api_key(*spec);
  auto ep = parse_endpoint(spec->endpoint);
  if (!key || !ep) {
    progress("supervise", !key ? key.error().what() : ep.error().what());
    return 1;
  }
  DeployContext ctx = opt.ctx;
  ctx.cluster_file = spec->cluster_file;
  auto links = link_spec_nodes(ctx, *spec, false);
  while (!links && nap(opt.poll, stop)) links = link_spec_nodes(ctx, *spec, false);
  if (!links) return 0;
  progress("supervise", "watching " + std::to_string(spec->ranks.size()) + " rank(s) of " + spec->lane);
  RestartBackoff backoff(opt.backoff);
  LivenessJudge judge({opt.stall_after, opt.hang_polls});
  int unreachable = 0;
  while (nap(opt.poll, stop)) {
    std::string reason, kind;
    auto ps = ps_all(*links, *spec);
    if (!ps) {
      reason = "cannot ask a node: " + ps.error().message;
      kind = "unreachable";
    } else {
      for (const auto& r : spec->ranks) {
        bool alive = false;
        int pid = 0;
        for (const auto& d : *ps)
          if (d.node == r.node && d.name == r.daemon_name()) alive = d.alive, pid = d.pid;
        if (!alive) {
          reason = "rank " + std::to_string(r.rank) + " on " + r.node + " (pid " + std::to_string(pid) +
                   ") is dead";
          kind = "rank_died";
          break;
        }
      }
    }
    if (reason.empty()) {
      // Busy is not hung: the engine's own progress decides (liveness.h), not /health's latency.
      const auto v = judge.judge(probe_health(*ep, opt.health_timeout));
      if (v == LivenessJudge::Verdict::alive) {
        unreachable = 0;
        backoff.on_healthy(std::chrono::steady_clock::now());
        continue;
      }
      if (v == LivenessJudge::Verdict::suspect) continue;
      reason = "rank 0 hung: " + judge.evidence();
      kind = "hang";
    }
    if (kind == "unreachable" && ++unreachable < opt.hang_polls) continue;
    unreachable = 0;
    judge.reset();
    progress("supervise", reason);
    append_event(dir, kind, reason);
    save(dir, [&](DeployState& s) {
      s.phase = "restarting";
      for (auto& r : s.ranks) r.phase = "dead";
    });
    Status st = stop_all(*links, *spec, 10s);
    if (!st.ok()) append_event(dir, "stop_failed", st.error().what());
    auto delay = backoff.on_failure(std::chrono::steady_clock::now());
    if (!delay) {
      const std::string msg = "gave up after " + std::to_string(backoff.total_restarts()) +
                              " restart(s) without 10 min of health; every rank is stopped";
      progress("supervise", msg);
      save(dir, [&](DeployState& s) {  // state first: whoever sees the event sees the state too
        s.phase = "failed";
        s.message = msg + " (last: " + reason + ")";
        for (auto& r : s.ranks) r.pid = 0, r.phase = "stopped";
      });
      append_event(dir, "give_up", msg);
      return 1;
    }
    append_event(dir, "restart",
                 "relaunch worker-first in " + std::to_string(delay->count()) + " ms (restart " +
                     std::to_string(backoff.total_restarts()) + ")");
    if (!nap(*delay, stop)) return 0;
    DeployState state;
    if (auto cur = read_deploy_state(dir)) state = *cur;
    const auto old = state.ranks;
    Status up = bring_up(*links, *spec, *key, state, progress, [&] { return stop.load(); });
    if (stop) return 0;
    if (!up.ok()) {
      append_event(dir, "restart_failed", up.error().what());
      save(dir, [&](DeployState& s) {
        s.phase = "restarting";
        s.message = up.error().what();
        for (auto& r : s.ranks) r.pid = 0, r.phase = "dead";
      });
      continue;  // the next poll sees no live rank and backs off further
    }
    for (auto& r : state.ranks)
      for (const auto& o : old)
        if (o.rank == r.rank) r.restarts = o.restarts + 1;
    state.phase = "ready";
    state.message.clear();
    (void)write_deploy_state(dir, state);
    append_event(dir, "restored", spec->lane + " serves again at " + spec->endpoint);
    progress("supervise", "restored");
    backoff.on_healthy(std::chrono::steady_clock::now());
  }
  progress("supervise", "stop requested: exiting (the ranks are left to whoever stops them)");
  return 0;
}

}  // namespace spk
