#include "orchestrator/deploy/supervisor.h"

#include <iostream>
#include <thread>

#include "orchestrator/deploy/events.h"
#include "orchestrator/deploy/liveness.h"
#include "orchestrator/deploy/rank_ops.h"
#include "orchestrator/deploy/readiness.h"
#include "orchestrator/node/mem_floor.h"

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

// A rank stopped itself at its node's memory floor (orchestrator/node/mem_floor.h): restarting would
// meet the same floor and can wedge a unified-memory host, so every rank is stopped and the state says why.
int stop_at_memory_floor(std::vector<NodeLink>& links, const DeploySpec& spec, const std::string& dir,
                         int floor_rank, const std::string& reason, const Progress& progress) {
  progress("supervise", reason);
  append_event(dir, kMemFloorReason, reason);
  Status st = stop_all(links, spec, 10s);
  if (!st.ok()) append_event(dir, "stop_failed", st.error().what());
  const std::string msg = "not serving: " + reason + "; not restarted (it would meet the same floor)";
  save(dir, [&](DeployState& s) {
    s.phase = "stopped";
    s.message = msg;
    for (auto& r : s.ranks) r.pid = 0, r.phase = r.rank == floor_rank ? kMemFloorReason : "stopped";
  });
  append_event(dir, "stopped",
               "every rank stopped; fix the memory use, then `sparkctl up " + spec.lane + "`");
  progress("supervise", msg);
  return 1;
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
    int floor_rank = -1;
    auto ps = ps_all(*links, *spec);
    if (!ps) {
      reason = "cannot ask a node: " + ps.error().message;
      kind = "unreachable";
    } else {
      for (const auto& r : spec->ranks) {
        const DaemonInfo* d = nullptr;
        for (const auto& x : *ps)
          if (x.node == r.node && x.name == r.daemon_name()) d = &x;
        if (!d || !d->alive) {
          reason = "rank " + std::to_string(r.rank) + " on " + r.node + " (pid " +
                   std::to_string(d ? d->pid : 0) + ") is dead";
          kind = "rank_died";
          if (d && d->exit_reason == kMemFloorReason) {
            reason = "rank " + std::to_string(r.rank) + " on " + r.node +
                     " stopped at its memory floor: " + d->exit_message;
            kind = kMemFloorReason;
            floor_rank = r.rank;
            break;
          }
        }
      }
      // Another rank may have died of the group's loss; the one that stopped at the floor says why.
    }
    if (kind == kMemFloorReason)
      return stop_at_memory_floor(*links, *spec, dir, floor_rank, reason, progress);
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
