#include "orchestrator/deploy/up.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "kernels/base/fs.h"
#include "orchestrator/deploy/events.h"
#include "orchestrator/deploy/fingerprint.h"
#include "orchestrator/deploy/rank_ops.h"
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

std::string model_revision(const Recipe& r) {
  const auto& m = r.model;
  if (m.source == ModelSource::synthetic)
    return "synthetic:" + m.synthetic.arch + "/" + m.synthetic.preset + "/seed" +
           std::to_string(m.synthetic.seed);
  return m.revision;
}

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

}  // namespace

Result<UpOutcome> deploy_up(const DeployContext& ctx, const UpOptions& opt) {
  Progress progress(ctx.out);
  // --- plan
  SPK_ASSIGN(RecipeSource src, find_recipe_source(opt.lane, recipe_dirs(ctx.state_dir)));
  RecipeLoad loaded = load_recipe(src.text, src.file, src.origin);
  if (!loaded.ok()) {
    std::string why;
    for (const auto& d : loaded.diagnostics)
      if (d.severity == Severity::error) why += (why.empty() ? "" : "; ") + d.str();
    return make_error(opt.lane + " is invalid: " + why, "sparkctl recipe validate " + opt.lane);
  }
  Recipe recipe = *loaded.recipe;
  ClusterLoad cl = load_cluster_or_local(ctx.cluster_file, ctx.state_dir);
  if (!cl.cluster) {
    std::string why;
    for (const auto& d : cl.diagnostics) why += (why.empty() ? "" : "; ") + d.str();
    return make_error("inventory " + ctx.cluster_file + " is invalid: " + why, "sparkctl cluster show");
  }
  SPK_ASSIGN(std::string self, self_executable());
  PlanOptions po;
  po.binary = self;
  SPK_ASSIGN(Plan plan, build_plan(recipe, *cl.cluster, po));
  const char* standin = std::getenv("SPARKCTL_RUNTIME_STANDIN");
  const bool use_standin = standin && *standin;
  if (!plan.runnable() && !use_standin) {
    std::string what;
    for (const auto& u : plan.unhonoured)
      what += (what.empty() ? "" : "; ") + u.key + ": " + u.value + " (" + u.detail + ")";
    return make_error(opt.lane + " asks for what this build cannot honour: " + what,
                      "see `sparkctl plan " + opt.lane + "`; pick a lane this build runs, like lane-demo");
  }
  if (use_standin)
    progress("plan",
             std::string("runtime stand-in ") + standin + " replaces `sparkctl runtime serve` (test hook)");
  progress("plan", opt.lane + ": TP " + std::to_string(plan.tensor_parallel) + " on " +
                       std::to_string(plan.nodes) + " node(s) of cluster " + plan.cluster + ", serves '" +
                       plan.served_name + "' at " + plan.endpoint);

  SPK_ASSIGN(std::string self_hash, file_xxh3_hex(self));
  const std::string fp = deployment_fingerprint({recipe.name, src.text, self_hash, model_revision(recipe)});

  // --- link nodes (host keys, binary push)
  std::vector<std::string> names;
  for (int i = 0; i < plan.nodes; ++i) names.push_back(cl.cluster->nodes[i].name);
  SPK_ASSIGN(auto links,
             link_nodes(*cl.cluster, names, LinkOptions{ctx.accept_new_host_key, true}, progress.fn("link")));
  progress("link", std::to_string(links.size()) + " node(s) reachable, sparkctl " + self_hash + " on each");

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

  // --- GMU choice measured by `gmu bisect --write`
  if (auto g = read_gmu_choice(ctx.state_dir, recipe.name); g.ok()) {
    if (g->model_revision == model_revision(recipe) && g->nodes == names) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", g->gmu);
      for (auto& r : plan.ranks) r.process.argv = with_flag(r.process.argv, "--gpu-memory-utilization", buf);
      progress("gmu", std::string("gpu_memory_utilization ") + buf + " from " +
                          gmu_choice_path(ctx.state_dir, recipe.name));
    } else {
      progress("gmu", "ignoring " + gmu_choice_path(ctx.state_dir, recipe.name) +
                          ": measured for another model revision or node set");
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
  for (const auto& r : plan.ranks) {
    NodeLink* l = find_link(links, r.node);
    spec.ranks.push_back({r.rank, r.node, node_argv(r.process.argv, l->binary, standin), r.process.env});
  }
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
  json pin{{"ports", {recipe.port, recipe.master_port}},
           {"shm_dir", opt.shm_dir},
           {"drop_caches", opt.drop_caches && ::geteuid() == 0},
           {"expect_binary_xxh3", self_hash},
           {"model_dirs", json::object()},
           {"model_required", recipe.model.source != ModelSource::synthetic}};
  if (!use_standin)  // a stand-in runtime reads no weights
    for (const auto& l : links) pin["model_dirs"][l.node.name] = model_dir(recipe, l.node);
  std::vector<RemoteExec*> execs;
  for (auto& l : links) execs.push_back(l.exec.get());
  PreflightReport rep = run_preflight_all(execs, pin, 120s);
  if (ctx.out) *ctx.out << rep.table();
  if (!rep.ok)
    return failed(make_error("preflight failed (see the report above)",
                             "fix the rows marked fail, or pass --clean for stale runtimes and leaked shm"));
  progress("preflight", "ok on " + std::to_string(links.size()) + " node(s)");

  // --- synthetic checkpoint on every node (deterministic: same files everywhere)
  for (const auto& st : plan.steps) {
    if (st.kind != StepKind::synth_model) continue;
    for (const auto& c : st.commands) {
      NodeLink* l = find_link(links, c.node);
      auto out = std::find(c.argv.begin(), c.argv.end(), "--out");
      if (l->node.local && out != c.argv.end() && out + 1 != c.argv.end() &&
          std::filesystem::exists(*(out + 1) + "/config.json")) {
        progress("synth_model", c.node + ": " + *(out + 1) + " exists");
        continue;
      }
      Status s =
          run_on_node(*l, spec.run_dir(c.node), "synth-model", node_argv(c.argv, l->binary, nullptr), 600s);
      if (!s.ok()) return failed(s.error());
      progress("synth_model", c.node + ": generated " + (out != c.argv.end() ? *(out + 1) : std::string()));
    }
  }

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
  for (auto& r : st.ranks) r.pid = 0, r.phase = "stopped";
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
