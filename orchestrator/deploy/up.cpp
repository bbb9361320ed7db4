#include "orchestrator/deploy/up.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "kernels/base/fs.h"
#include "orchestrator/deploy/events.h"
#include "orchestrator/deploy/fabric_gate.h"
#include "orchestrator/deploy/fingerprint.h"
#include "orchestrator/deploy/memory_fit.h"
#include "orchestrator/deploy/rank_ops.h"
#include "orchestrator/deploy/stored_gmu.h"
#include "orchestrator/deploy/up_stage.h"
#include "orchestrator/gmu/gmu_store.h"
#include "orchestrator/gmu/process_probe.h"
#include "orchestrator/node/preflight_report.h"
#include "orchestrator/plan.h"
#include "orchestrator/transport/file_hash.h"
#include "orchestrator/transport/local_exec.h"
#include "recipes/recipe_store.h"

namespace spk {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string random_key() {
  std::random_device rd;
  std::string k = "spk-";
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) k += hex[rd() % 16];
  return k;
}

// argv of the plan with argv[0] = the node's binary (or the stand-in replacing "sparkctl runtime serve").
std::vector<std::string> node_argv(std::vector<std::string> argv, const std::string& binary,
                                   const char* standin) {
  if (standin && *standin && argv.size() >= 3 && argv[1] == "runtime" && argv[2] == "serve") {
    argv.erase(argv.begin(), argv.begin() + 3);
    argv.insert(argv.begin(), standin);
    return argv;
  }
  argv[0] = binary;
  return argv;
}

// A deployment is live when some rank daemon of its spec is alive.
Result<bool> any_alive(std::vector<NodeLink>& links, const DeploySpec& spec) {
  SPK_ASSIGN(auto ps, ps_all(links, spec));
  for (const auto& d : ps)
    if (d.alive) return true;
  return false;
}

// Everything `up` decides before it touches a process on any node: recipe, inventory, plan (stored GMU
// applied), what this build can run, the fingerprint, and the node links (binary pushed where it differs).
struct PreparedUp {
  RecipeSource src;
  Recipe recipe;
  Cluster cluster;
  Plan plan;
  std::string self, self_hash, fp;
  const char* standin = nullptr;  // SPARKCTL_RUNTIME_STANDIN or null
  std::vector<std::string> names;
  std::vector<NodeLink> links;
  bool synthesized = false, fitted = false;  // done once, before the old deployment stops (switch)
};

Result<PreparedUp> prepare_up(const DeployContext& ctx, const UpOptions& opt, const Progress& progress) {
  PreparedUp p;
  SPK_ASSIGN(p.src, find_recipe_source(opt.lane, recipe_dirs(ctx.state_dir)));
  RecipeLoad loaded = load_recipe(p.src.text, p.src.file, p.src.origin);
  if (!loaded.ok()) {
    std::string why;
    for (const auto& d : loaded.diagnostics)
      if (d.severity == Severity::error) why += (why.empty() ? "" : "; ") + d.str();
    return make_error(opt.lane + " is invalid: " + why, "sparkctl recipe validate " + opt.lane);
  }
  p.recipe = *loaded.recipe;
  ClusterLoad cl = load_cluster_or_local(ctx.cluster_file, ctx.state_dir);
  if (!cl.cluster) {
    std::string why;
    for (const auto& d : cl.diagnostics) why += (why.empty() ? "" : "; ") + d.str();
    return make_error("inventory " + ctx.cluster_file + " is invalid: " + why, "sparkctl cluster show");
  }
  p.cluster = *cl.cluster;
  SPK_ASSIGN(p.self, self_executable());
  PlanOptions po;
  po.binary = p.self;
  po.fabric_setup = opt.fabric_setup;
  po.skip_fabric = opt.skip_fabric;
  po.skip_stage = opt.skip_stage;
  SPK_ASSIGN(p.plan, build_plan(p.recipe, p.cluster, po));
  if (auto note = apply_stored_gmu(ctx.state_dir, p.recipe, p.plan)) p.plan.notes.push_back(*note);
  const char* standin = std::getenv("SPARKCTL_RUNTIME_STANDIN");
  p.standin = standin && *standin ? standin : nullptr;
  if (!p.plan.runnable() && !p.standin) {
    std::string what;
    for (const auto& u : p.plan.unhonoured)
      what += (what.empty() ? "" : "; ") + u.key + ": " + u.value + " (" + u.detail + ")";
    return make_error(opt.lane + " asks for what this build cannot honour: " + what,
                      "see `sparkctl plan " + opt.lane + "`; pick a lane this build runs, like lane-demo");
  }
  if (p.standin)
    progress("plan",
             std::string("runtime stand-in ") + p.standin + " replaces `sparkctl runtime serve` (test hook)");
  progress("plan", opt.lane + ": TP " + std::to_string(p.plan.tensor_parallel) + " on " +
                       std::to_string(p.plan.nodes) + " node(s) of cluster " + p.plan.cluster + ", serves '" +
                       p.plan.served_name + "' at " + p.plan.endpoint);
  for (const auto& n : p.plan.notes) progress("gmu", n);

  SPK_ASSIGN(p.self_hash, file_xxh3_hex(p.self));
  p.fp = deployment_fingerprint({p.recipe.name, p.src.text, p.self_hash, lane_model_revision(p.recipe)});

  for (int i = 0; i < p.plan.nodes; ++i) p.names.push_back(p.cluster.nodes[i].name);
  SPK_ASSIGN(p.links,
             link_nodes(p.cluster, p.names, LinkOptions{ctx.accept_new_host_key, true}, progress.fn("link")));
  progress("link",
           std::to_string(p.links.size()) + " node(s) reachable, sparkctl " + p.self_hash + " on each");
  return p;
}

// What `node preflight` gets for this lane on every node.
json preflight_input(const PreparedUp& p, const UpOptions& opt, const std::vector<int>& ports, bool drop) {
  json pin{{"ports", ports},
           {"shm_dir", opt.shm_dir},
           {"drop_caches", drop},
           {"expect_binary_xxh3", p.self_hash},
           {"model_dirs", json::object()},
           {"model_required", p.recipe.model.source != ModelSource::synthetic}};
  if (runs_step(p.plan, StepKind::stage_weights)) {  // staged after preflight: checked by the stage
    pin["model_required"] = false;
    return pin;
  }
  if (!p.standin)  // a stand-in runtime reads no weights
    for (const auto& l : p.links) pin["model_dirs"][l.node.name] = model_dir(p.recipe, l.node);
  return pin;
}

// The synthetic checkpoint on every node (deterministic: same files everywhere); once per PreparedUp.
Status synth_models(PreparedUp& p, const Progress& progress) {
  if (p.synthesized) return ok_status();
  for (const auto& st : p.plan.steps) {
    if (st.kind != StepKind::synth_model) continue;
    for (const auto& c : st.commands) {
      NodeLink* l = find_link(p.links, c.node);
      auto out = std::find(c.argv.begin(), c.argv.end(), "--out");
      if (out != c.argv.end() && out + 1 != c.argv.end()) {
        auto v = call_node(*l->exec, NodeVerb::kStageVerify, json{{"dir", *(out + 1)}}, 120s);
        if (v && v->exit_code == 0) {
          progress("synth_model", c.node + ": " + *(out + 1) + " exists and is complete");
          continue;
        }
      }
      SPK_TRY(run_on_node(*l, l->node.state_dir + "/deploy/run", "synth-model",
                          node_argv(c.argv, l->binary, nullptr), 600s));
      progress("synth_model", c.node + ": generated " + (out != c.argv.end() ? *(out + 1) : std::string()));
    }
  }
  p.synthesized = true;
  return ok_status();
}

// Memory fit: the runtime's planner, dry, with every rank's real argv on its node. A stand-in runtime
// has no planner: skipped.
Status memory_fit(PreparedUp& p, const Progress& progress) {
  if (p.standin || p.fitted) return ok_status();
  MemoryFit fit = check_memory_fit(p.links, p.plan);
  const std::vector<std::string>& argv0 = p.plan.ranks.front().process.argv;
  if (fit.refused())
    return make_error(
        p.recipe.name + " does not fit in memory (the planner's dry run, per rank):\n" + fit.text(argv0),
        "lower max_model_len, max_num_batched_tokens or kv_cache_dtype, raise "
        "gpu_memory_utilization or tensor_parallel in the recipe (knobs above)");
  for (const auto& r : fit.ranks)
    progress("memory_fit", "rank " + std::to_string(r.rank) + " on " + r.node + ": " + r.detail);
  p.fitted = true;
  return ok_status();
}

Result<UpOutcome> launch_prepared(const DeployContext& ctx, const UpOptions& opt, PreparedUp& p,
                                  const Progress& progress) {
  Recipe& recipe = p.recipe;
  Plan& plan = p.plan;
  auto& links = p.links;
  const std::string& fp = p.fp;
  const char* standin = p.standin;

  // --- the deployment already in this state dir
  if (auto old = read_deploy_spec(ctx.state_dir); old.ok()) {
    DeployContext octx = ctx;
    octx.cluster_file = old->cluster_file;
    auto olinks = link_spec_nodes(octx, *old, false);
    if (olinks) {
      auto live = any_alive(*olinks, *old);
      if (live && *live) {
        if (old->fingerprint == fp && old->lane == recipe.name) {
          progress("up", "already up: " + old->lane + " (fingerprint " + fp + ") at " + old->endpoint);
          if (!supervisor_alive(ctx.state_dir) && opt.supervise) {
            DeployContext sctx = ctx;
            sctx.cluster_file = old->cluster_file;
            auto sp = start_supervisor(sctx);
            if (sp) progress("supervise", "supervisor restarted: pid " + std::to_string(*sp));
          }
          return UpOutcome::already_up;
        }
        return make_error("a deployment of " + old->lane + " (fingerprint " + old->fingerprint +
                              ") is live in " + ctx.state_dir + "; " + recipe.name + " now has fingerprint " +
                              fp +
                              " (recipe, binary or model changed), and a live deployment is never reused",
                          "sparkctl switch " + opt.lane + " (stops every rank, cleans, relaunches fresh)");
      }
      // Leftover pidfiles of dead ranks: clear them.
      (void)stop_all(*olinks, *old, 2s);
    }
  }

  // --- spec (what is launched) and API key
  DeploySpec spec;
  spec.lane = recipe.name;
  spec.fingerprint = fp;
  spec.cluster_file = ctx.cluster_file.empty() ? "" : std::filesystem::absolute(ctx.cluster_file).string();
  spec.endpoint = plan.endpoint;
  spec.served_name = plan.served_name;
  spec.api_key_env = recipe.api_key_env;
  spec.api_key_file = deploy_dir(ctx.state_dir) + "/api_key";
  spec.shm_dir = opt.shm_dir;
  spec.ready_timeout_s = opt.ready_timeout_s;
  spec.warmup = recipe.warmup;
  for (auto& l : links) spec.run_dirs.emplace_back(l.node.name, l.node.state_dir + "/deploy/run");
  auto fill_ranks = [&] {
    spec.ranks.clear();
    for (const auto& r : plan.ranks) {
      NodeLink* l = find_link(links, r.node);
      spec.ranks.push_back({r.rank, r.node, node_argv(r.process.argv, l->binary, standin), r.process.env});
    }
  };
  fill_ranks();
  std::string key;
  if (const char* k = std::getenv(recipe.api_key_env.c_str()); k && *k) key = k;
  if (key.empty())  // the state dir's key survives down/switch: clients keep working
    if (auto old_key = read_api_key(spec); old_key.ok()) key = *old_key;
  if (key.empty()) key = random_key();
  SPK_TRY(write_deploy_spec(ctx.state_dir, spec));
  SPK_TRY(write_file_atomic(spec.api_key_file, key + "\n", 0600));
  DeployState state;
  state.lane = spec.lane;
  state.fingerprint = fp;
  state.endpoint = spec.endpoint;
  state.api_key_file = spec.api_key_file;
  state.phase = "preflight";
  SPK_TRY(write_deploy_state(ctx.state_dir, state));
  append_event(
      ctx.state_dir, "up",
      "up " + spec.lane + " (fingerprint " + fp + ") on " + std::to_string(links.size()) + " node(s)");
  auto failed = [&](const Error& e) -> Error {
    state.phase = "failed";
    state.message = e.what();
    for (auto& r : state.ranks) r.pid = 0;
    (void)write_deploy_state(ctx.state_dir, state);
    append_event(ctx.state_dir, "failed", e.what());
    return e;
  };

  // --- clean + preflight on every node, one report
  if (opt.clean) {
    Status s = teardown(links, spec, ctx.state_dir, true, progress);
    if (!s.ok()) return failed(s.error());
  }
  json pin = preflight_input(p, opt, {recipe.port, recipe.master_port}, opt.drop_caches && ::geteuid() == 0);
  std::vector<RemoteExec*> execs;
  for (auto& l : links) execs.push_back(l.exec.get());
  PreflightReport rep = run_preflight_all(execs, pin, 120s);
  if (ctx.out) *ctx.out << rep.table();
  if (!rep.ok)
    return failed(make_error("preflight failed (see the report above)",
                             "fix the rows marked fail, or pass --clean for stale runtimes and leaked shm"));
  progress("preflight", "ok on " + std::to_string(links.size()) + " node(s)");

  // --- multi-node: fabric setup (asked), the fabric gate: all before any rank starts
  if (runs_step(plan, StepKind::fabric_setup))
    if (Status s = fabric_setup_all(links, recipe, progress); !s.ok()) return failed(s.error());
  if (runs_step(plan, StepKind::fabric_doctor)) {
    if (Status s = fabric_gate(links, recipe, progress); !s.ok()) return failed(s.error());
    progress("fabric_doctor", "ok on " + std::to_string(links.size()) + " node(s)");
  }
  // --- synthetic checkpoint (every node, or the head when staged), staging, each node's fabric env,
  // then the memory planner's dry run of every rank
  if (Status s = synth_models(p, progress); !s.ok()) return failed(s.error());
  if (runs_step(plan, StepKind::stage_weights)) {
    UpStageOptions so{p.self, ctx.accept_new_host_key, opt.stage_port,
                      ctx.state_dir + "/stage/" + recipe.name};
    if (Status s = stage_for_up(recipe, p.cluster, plan, so, progress); !s.ok()) return failed(s.error());
  }
  if (runs_step(plan, StepKind::fabric_env)) {
    auto envs = fabric_envs(links, recipe);
    if (!envs) return failed(envs.error());
    for (const auto& line : apply_fabric_envs(plan, *envs)) progress("fabric_env", line);
    if (envs->empty()) progress("fabric_env", "no node has a fabric.ip: the ranks get the inventory's env");
    for (const auto& n : plan.notes)
      if (n.rfind("warning: ", 0) == 0) progress("fabric_env", n);
    fill_ranks();
    if (Status s = write_deploy_spec(ctx.state_dir, spec); !s.ok()) return failed(s.error());
  }
  if (Status s = memory_fit(p, progress); !s.ok()) return failed(s.error());

  // --- launch worker-first, wait for a real token, warm up
  state.phase = "launching";
  (void)write_deploy_state(ctx.state_dir, state);
  if (Status s = bring_up(links, spec, key, state, progress); !s.ok()) return failed(s.error());
  state.phase = "ready";
  state.message.clear();
  if (opt.supervise) {
    DeployContext sctx = ctx;
    sctx.cluster_file = spec.cluster_file;
    auto sp = start_supervisor(sctx);
    if (!sp) {
      (void)stop_all(links, spec, 5s);
      return failed(sp.error());
    }
    state.supervisor_pid = *sp;
    progress("supervise", "supervisor pid " + std::to_string(*sp) + " watches every rank");
  }
  SPK_TRY(write_deploy_state(ctx.state_dir, state));
  append_event(ctx.state_dir, "ready", spec.lane + " ready at " + spec.endpoint);
  progress("ready", spec.lane + " serves '" + spec.served_name + "' at " + spec.endpoint + " (API key in " +
                        spec.api_key_file + ", env " + spec.api_key_env + ")");
  return UpOutcome::started;
}

// Ports the deployment's ranks hold: --port and the port of --master in every rank's argv.
std::vector<int> spec_ports(const DeploySpec& spec) {
  std::vector<int> out;
  for (const auto& r : spec.ranks)
    for (size_t i = 0; i + 1 < r.argv.size(); ++i) {
      std::string v;
      if (r.argv[i] == "--port") v = r.argv[i + 1];
      if (r.argv[i] == "--master") v = r.argv[i + 1].substr(r.argv[i + 1].rfind(':') + 1);
      if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() < 6)
        out.push_back(std::stoi(v));
    }
  return out;
}

}  // namespace

Result<UpOutcome> deploy_up(const DeployContext& ctx, const UpOptions& opt) {
  Progress progress(ctx.out);
  SPK_ASSIGN(PreparedUp p, prepare_up(ctx, opt, progress));
  return launch_prepared(ctx, opt, p, progress);
}

Result<UpOutcome> deploy_switch(const DeployContext& ctx, const UpOptions& opt) {
  Progress progress(ctx.out);
  auto old = read_deploy_spec(ctx.state_dir);
  DeployContext nctx = ctx;
  if (old && ctx.cluster_file.empty() && !old->cluster_file.empty()) {
    nctx.cluster_file = old->cluster_file;
    progress("switch", "cluster " + old->cluster_file +
                           ": the deployment's inventory, as restart uses (pass --cluster for another)");
  }
  if (!old) {
    progress("switch", "no deployment in " + ctx.state_dir + ": nothing to stop, switch is up");
    SPK_ASSIGN(PreparedUp p, prepare_up(nctx, opt, progress));
    return launch_prepared(nctx, opt, p, progress);
  }
  auto refuse = [&](const Error& e) -> Error {
    return make_error("switch to " + opt.lane + " refused before anything stopped (" + old->lane +
                          " keeps serving): " + e.message,
                      e.fix);
  };
  // 1. Everything that needs none of the old ranks' resources, before anything stops.
  auto p = prepare_up(nctx, opt, progress);
  if (!p) return refuse(p.error());
  DeployContext octx = ctx;
  octx.cluster_file = old->cluster_file;
  auto olinks = link_spec_nodes(octx, *old, false);
  if (!olinks) return refuse(olinks.error());
  auto live = any_alive(*olinks, *old);
  if (!live) return refuse(live.error());
  std::vector<int> ports;  // the old ranks' ports are theirs until they stop: checked after, by up
  const std::vector<int> held = *live ? spec_ports(*old) : std::vector<int>{};
  for (int port : {p->recipe.port, p->recipe.master_port})
    if (std::find(held.begin(), held.end(), port) == held.end()) ports.push_back(port);
  {
    std::vector<RemoteExec*> execs;
    for (auto& l : p->links) execs.push_back(l.exec.get());
    PreflightReport rep = run_preflight_all(execs, preflight_input(*p, opt, ports, false), 120s);
    std::string bad;
    for (const auto& r : rep.rows) {
      // The old deployment's runtimes are "stale" to preflight, and switch cleans stale runtimes and
      // leaked shm when it stops the old one: those rows are checked again after. Anything else counts.
      if (r.status != "fail" || r.check == "stale_processes" || r.check == "shm") continue;
      bad += (bad.empty() ? "" : "; ") + r.node + " " + r.check + ": " + r.detail;
    }
    if (!bad.empty()) {
      if (ctx.out) *ctx.out << rep.table();
      return refuse(make_error("preflight: " + bad, "fix the rows marked fail above"));
    }
    // The fabric gate needs nothing of the old lane's: a node that would refuse the new lane refuses the
    // switch here (with --fabric-setup the gate runs after setup, once the old lane has stopped).
    if (runs_step(p->plan, StepKind::fabric_doctor) && !runs_step(p->plan, StepKind::fabric_setup))
      if (Status s = fabric_gate(p->links, p->recipe, progress); !s.ok()) return refuse(s.error());
    if (Status s = synth_models(*p, progress); !s.ok()) return refuse(s.error());
    // The dry run loads the new lane's weights onto the device: next to a live old lane that could
    // exhaust it (a GB10 wedges). Then it runs after the old lane stops, and a refusal rolls back.
    if (!*live) {
      if (Status s = memory_fit(*p, progress); !s.ok()) return refuse(s.error());
    } else if (!p->standin) {
      progress("switch", "memory fit runs once " + old->lane +
                             " has stopped (its dry run loads the weights onto the device " + old->lane +
                             " holds); a refusal then brings " + old->lane + " back");
    }
    progress("switch", opt.lane + " passes every check that needs none of " + old->lane +
                           "'s resources; stopping " + old->lane);
  }
  // 2. Stop the old deployment.
  if (Status s = teardown(*olinks, *old, ctx.state_dir, true, progress); !s.ok()) return s.error();
  append_event(ctx.state_dir, "switch", "stopped " + old->lane + " for " + p->recipe.name);
  // 3. The new one, with the full preflight now that the old ranks' ports are free.
  auto r = launch_prepared(nctx, opt, *p, progress);
  if (r || !*live) return r;
  // 4. It failed: bring the previous lane back, or say plainly that nothing serves.
  const Error why = r.error();
  progress("rollback", opt.lane + " failed: bringing " + old->lane + " back");
  DeployState st;
  st.lane = old->lane;
  st.fingerprint = old->fingerprint;
  st.endpoint = old->endpoint;
  st.api_key_file = old->api_key_file;
  st.phase = "launching";
  Status back = write_deploy_spec(ctx.state_dir, *old);
  auto key = read_api_key(*old);
  if (back.ok() && !key) back = key.error();
  if (back.ok()) back = bring_up(*olinks, *old, *key, st, progress);
  if (back.ok()) {
    auto sp = start_supervisor(octx);
    if (sp) st.supervisor_pid = *sp;
    st.phase = "ready";
    st.message = "switch to " + opt.lane + " failed (" + why.message + "); rolled back to " + old->lane;
    (void)write_deploy_state(ctx.state_dir, st);
    append_event(ctx.state_dir, "rollback", st.message);
    progress("rollback", old->lane + " serves again at " + old->endpoint);
    return make_error("switch to " + opt.lane + " failed: " + why.message + "; rolled back: " + old->lane +
                          " serves again at " + old->endpoint,
                      why.fix);
  }
  st.phase = "failed";
  for (auto& rk : st.ranks) rk.pid = 0, rk.phase = "stopped";
  st.message = "nothing is serving: switch to " + opt.lane + " failed (" + why.message + ") and bringing " +
               old->lane + " back failed (" + back.error().message + ")";
  (void)write_deploy_state(ctx.state_dir, st);
  append_event(ctx.state_dir, "failed", st.message);
  return make_error(st.message, "fix the cause, then sparkctl up " + old->lane + " or sparkctl switch " +
                                    opt.lane + " (see sparkctl logs)");
}

Status deploy_down(const DeployContext& ctx, bool clean) {
  Progress progress(ctx.out);
  auto spec = read_deploy_spec(ctx.state_dir);
  if (!spec) {
    if (supervisor_alive(ctx.state_dir)) stop_supervisor(ctx.state_dir);
    progress("down", "no deployment in " + ctx.state_dir + ": nothing to stop");
    return ok_status();
  }
  SPK_ASSIGN(auto links, link_spec_nodes(ctx, *spec, false));
  Status s = teardown(links, *spec, ctx.state_dir, clean, progress);
  auto state = read_deploy_state(ctx.state_dir);
  DeployState st = state.ok() ? *state : DeployState{};
  st.phase = s.ok() ? "stopped" : "failed";
  st.supervisor_pid = 0;
  for (auto& r : st.ranks)
    r.pid = 0, r.phase = "stopped", r.endpoint.clear(), r.kv_tokens = 0, r.kv_bytes = 0;
  (void)write_deploy_state(ctx.state_dir, st);
  append_event(ctx.state_dir, "down", s.ok() ? "every rank stopped" : s.error().what());
  return s;
}

Status deploy_restart(const DeployContext& ctx) {
  Progress progress(ctx.out);
  SPK_ASSIGN(DeploySpec spec, read_deploy_spec(ctx.state_dir));
  DeployContext sctx = ctx;
  sctx.cluster_file = spec.cluster_file;
  SPK_ASSIGN(auto links, link_spec_nodes(sctx, spec, true));
  SPK_TRY(teardown(links, spec, ctx.state_dir, false, progress));
  SPK_ASSIGN(std::string key, read_api_key(spec));
  auto old = read_deploy_state(ctx.state_dir);
  DeployState state = old.ok() ? *old : DeployState{};
  append_event(ctx.state_dir, "restart", "restart requested");
  Status s = bring_up(links, spec, key, state, progress);
  if (!s.ok()) {
    state.phase = "failed";
    state.message = s.error().what();
    (void)write_deploy_state(ctx.state_dir, state);
    append_event(ctx.state_dir, "failed", s.error().what());
    return s;
  }
  if (old.ok())
    for (auto& r : state.ranks)
      r.restarts = [&] {
        for (const auto& o : old->ranks)
          if (o.rank == r.rank) return o.restarts + 1;
        return 1;
      }();
  state.phase = "ready";
  auto sp = start_supervisor(sctx);
  if (sp) state.supervisor_pid = *sp;
  SPK_TRY(write_deploy_state(ctx.state_dir, state));
  append_event(ctx.state_dir, "ready", spec.lane + " ready again at " + spec.endpoint);
  progress("ready", spec.lane + " at " + spec.endpoint);
  return ok_status();
}

}  // namespace spk
