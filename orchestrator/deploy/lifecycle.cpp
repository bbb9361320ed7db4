#include "orchestrator/deploy/lifecycle.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "kernels/base/fs.h"
#include "orchestrator/deploy/events.h"
#include "orchestrator/deploy/rank_ops.h"
#include "orchestrator/deploy/readiness.h"
#include "orchestrator/node/daemons.h"
#include "orchestrator/transport/local_exec.h"

namespace spk {

using nlohmann::json;
using namespace std::chrono_literals;

void Progress::operator()(const std::string& phase, const std::string& what) const {
  if (!os_) return;
  char t[32];
  std::snprintf(t, sizeof t, "[%7.1fs] ",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  *os_ << t << phase << ": " << what << std::endl;
}

Result<std::vector<NodeLink>> link_spec_nodes(const DeployContext& ctx, const DeploySpec& spec,
                                              bool push_binary) {
  ClusterLoad cl = load_cluster_or_local(spec.cluster_file, ctx.state_dir);
  if (!cl.cluster) {
    std::string why;
    for (const auto& d : cl.diagnostics) why += (why.empty() ? "" : "; ") + d.str();
    return make_error("cannot load the deployment's inventory " + spec.cluster_file + ": " + why,
                      "restore the file, or stop the ranks with `sparkctl node stop` on each node");
  }
  return link_nodes(*cl.cluster, spec.nodes(), LinkOptions{ctx.accept_new_host_key, push_binary});
}

Result<std::string> read_api_key(const DeploySpec& spec) {
  SPK_ASSIGN(std::string key, read_file(spec.api_key_file));
  while (!key.empty() && (key.back() == '\n' || key.back() == ' ')) key.pop_back();
  if (key.empty()) return make_error(spec.api_key_file + " is empty", "run sparkctl switch " + spec.lane);
  return key;
}

Status bring_up(std::vector<NodeLink>& links, const DeploySpec& spec, const std::string& api_key,
                DeployState& state, const Progress& progress, const std::function<bool()>& stop_requested) {
  state.ranks.clear();
  for (const auto& r : spec.ranks)
    state.ranks.push_back({r.rank, r.node, 0, "launching", 0, 0, r.rank == 0 ? spec.endpoint : "", 0, 0});
  auto fail = [&](const Error& e) -> Status {
    progress("failed", e.message);
    const std::string tails = log_tails(links, spec, 1500);
    if (!tails.empty()) progress("logs", "tail of every node's log:\n" + tails);
    Status s = stop_all(links, spec, 5s);
    progress("cleanup", s.ok() ? "every rank started by this attempt is stopped" : s.error().message);
    for (auto& r : state.ranks) r.pid = 0, r.phase = "stopped";
    return e;
  };
  // Workers first, in rank order; rank 0 last so that its rendezvous finds every worker waiting.
  std::vector<const RankLaunch*> order;
  for (const auto& r : spec.ranks)
    if (r.rank != 0) order.push_back(&r);
  for (const auto& r : spec.ranks)
    if (r.rank == 0) order.push_back(&r);
  for (const RankLaunch* r : order) {
    NodeLink* l = find_link(links, r->node);
    if (!l) return fail(make_error("no link to node " + r->node, "pass the deployment's --cluster"));
    auto pid = launch_rank(*l, spec, *r, api_key);
    if (!pid) return fail(pid.error());
    for (auto& rs : state.ranks)
      if (rs.rank == r->rank) rs.pid = *pid, rs.started_ms = wall_ms();
    progress(r->rank == 0 ? "launch_rank0" : "launch_worker",
             "rank " + std::to_string(r->rank) + " on " + r->node + ": pid " + std::to_string(*pid));
  }
  SPK_ASSIGN(HttpEndpoint ep, parse_endpoint(spec.endpoint));
  auto check = [&]() -> Status {
    if (stop_requested && stop_requested()) return make_error("stop requested", "");
    auto ps = ps_all(links, spec);
    if (!ps) return ps.error();
    for (const auto& d : *ps)
      if (!d.alive)
        return make_error(d.node + ": " + d.name + " (pid " + std::to_string(d.pid) + ") exited before ready",
                          "see its log below / `sparkctl logs --node " + d.node + "`");
    return ok_status();
  };
  progress("wait_ready", "polling " + spec.endpoint + " for a real completion token (timeout " +
                             std::to_string(spec.ready_timeout_s) + " s)");
  if (Status s = wait_ready(ep, api_key, spec.served_name,
                            std::chrono::steady_clock::now() + std::chrono::seconds(spec.ready_timeout_s),
                            check, progress.fn("wait_ready"));
      !s.ok())
    return fail(s.error());
  progress("wait_ready", "rank 0 answered a completion token with the API key");
  if (Status s = run_warmup(ep, api_key, spec.served_name, spec.warmup,
                            std::chrono::seconds(spec.ready_timeout_s), progress.fn("warmup"));
      !s.ok())
    return fail(s.error());
  // KV size from rank 0's planner line "KV cache size: N tokens".
  if (NodeLink* head = find_link(links, spec.ranks.empty() ? "" : spec.ranks[0].node)) {
    auto a = call_node(
        *head->exec, NodeVerb::kLogTail,
        json{{"dir", spec.run_dir(head->node.name)}, {"names", {"rank-0"}}, {"max_bytes", 65536}}, 20s);
    static const std::regex re(R"(KV cache size: (\d+) tokens)");
    if (a)
      for (const auto& lg : a->body.value("logs", json::array())) {
        const std::string text = lg.value("text", "");
        std::smatch m;
        std::string::const_iterator it = text.begin();
        while (std::regex_search(it, text.end(), m, re)) {  // the last one: this launch's
          state.ranks[0].kv_tokens = std::stoll(m[1]);
          it = m[0].second;
        }
      }
  }
  for (auto& r : state.ranks) r.phase = "ready";
  return ok_status();
}

namespace {
std::string supervisor_dir(const std::string& state_dir) { return state_dir + "/deploy/supervisor"; }
}  // namespace

Result<int> start_supervisor(const DeployContext& ctx) {
  SPK_ASSIGN(std::string self, self_executable());
  std::vector<std::string> argv{self, "--state-dir", ctx.state_dir};
  if (!ctx.cluster_file.empty()) argv.insert(argv.end(), {"--cluster", ctx.cluster_file});
  argv.push_back("supervise");
  NodeEnv env = node_env_from_process(ctx.state_dir);
  VerbOutput o =
      node_launch(json{{"dir", supervisor_dir(ctx.state_dir)}, {"name", "supervisor"}, {"argv", argv}}, env);
  if (o.exit_code != 0)
    return make_error("cannot start the supervisor: " + o.body.value("error", std::string("?")),
                      "see " + supervisor_dir(ctx.state_dir) + "/supervisor.log");
  return o.body.value("pid", 0);
}

void stop_supervisor(const std::string& state_dir) {
  NodeEnv env = node_env_from_process(state_dir);
  VerbOutput o = node_stop(json{{"dir", supervisor_dir(state_dir)}, {"grace_ms", uint64_t{20000}}}, env);
  if (o.exit_code != 0)
    std::fprintf(stderr, "sparkctl: stopping the supervisor: %s\n", o.body.dump().c_str());
}

bool supervisor_alive(const std::string& state_dir, int* pid) {
  NodeEnv env = node_env_from_process(state_dir);
  VerbOutput o = node_ps(json{{"dir", supervisor_dir(state_dir)}}, env);
  for (const auto& d : o.body.value("daemons", json::array()))
    if (d.value("alive", false)) {
      if (pid) *pid = d.value("pid", 0);
      return true;
    }
  return false;
}

Status teardown(std::vector<NodeLink>& links, const DeploySpec& spec, const std::string& state_dir,
                bool clean, const Progress& progress) {
  if (int pid = 0; supervisor_alive(state_dir, &pid)) {
    stop_supervisor(state_dir);
    if (supervisor_alive(state_dir))
      return make_error("the supervisor (pid " + std::to_string(pid) + ") survived SIGTERM and SIGKILL",
                        "kill it by hand; its pidfile is in " + supervisor_dir(state_dir));
    progress("down", "supervisor pid " + std::to_string(pid) + " stopped");
  }
  Status s = stop_all(links, spec, 10s);
  progress("down",
           s.ok() ? "every rank stopped on " + std::to_string(links.size()) + " node(s)" : s.error().message);
  if (!s.ok()) return s;
  if (clean)
    for (auto& l : links) {
      auto a = call_node(*l.exec, NodeVerb::kClean, json{{"shm_dir", spec.shm_dir}, {"grace_ms", 5000}}, 60s);
      if (!a) return a.error();
      if (a->exit_code != 0)
        return make_error(l.node.name + ": node clean left " + a->body.dump(), "look at the node by hand");
      size_t killed = a->body.value("killed", json::array()).size();
      size_t removed = a->body.value("removed_shm", json::array()).size();
      if (killed || removed)
        progress("clean", l.node.name + ": killed " + std::to_string(killed) + " stale runtime(s), removed " +
                              std::to_string(removed) + " leaked shm segment(s)");
    }
  return ok_status();
}

}  // namespace spk
