#include "orchestrator/node/node_verbs.h"

#include <unistd.h>

#include <cstdlib>

#include "orchestrator/node/daemons.h"
#include "orchestrator/node/fabric_verbs.h"
#include "orchestrator/node/host_probe.h"
#include "orchestrator/node/node_input.h"
#include "orchestrator/node/preflight.h"
#include "orchestrator/node/runtime_procs.h"
#include "orchestrator/node/shm_segments.h"
#include "orchestrator/node/stage_verbs.h"
#include "orchestrator/transport/file_hash.h"
#include "orchestrator/transport/local_exec.h"

namespace spk {

namespace {

using nlohmann::json;

VerbOutput bad_input(const Error& e) {
  return {kNodeBadInput, json{{"ok", false}, {"error", e.message}, {"fix", e.fix}}};
}

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

VerbOutput version(const NodeEnv& env) {
  auto h = file_xxh3_hex(env.binary);
  if (!h.ok()) return {kNodeCheckFailed, json{{"ok", false}, {"error", h.error().message}}};
  return {kNodeOk, json{{"ok", true}, {"version", env.version}, {"binary", env.binary}, {"binary_xxh3", *h}}};
}

VerbOutput facts(const json& in, const NodeEnv& env) {
  namespace ni = node_input;
  if (auto s = ni::only_keys(in, {"disk_path", "shm_dir", "shm_prefixes"}, "facts"); !s)
    return bad_input(s.error());
  auto disk_path = ni::str(in, "disk_path", env.node_root);
  auto shm_dir = ni::str(in, "shm_dir", "/dev/shm");
  auto prefixes = ni::strings(in, "shm_prefixes", default_shm_prefixes());
  if (!disk_path) return bad_input(disk_path.error());
  if (!shm_dir) return bad_input(shm_dir.error());
  if (!prefixes) return bad_input(prefixes.error());
  json out{{"ok", true},
           {"hostname", hostname()},
           {"version", env.version},
           {"node_root", env.node_root},
           {"uid", ::getuid()}};
  if (auto h = file_xxh3_hex(env.binary)) out["binary_xxh3"] = *h;
  if (auto m = read_meminfo()) {
    out["mem"] = {{"total_bytes", m->total_bytes},
                  {"available_bytes", m->available_bytes},
                  {"free_bytes", m->free_bytes}};
  } else {
    out["ok"] = false;
    out["mem_error"] = m.error().what();
  }
  if (auto d = disk_free_bytes(*disk_path)) {
    out["disk"] = {{"path", *disk_path}, {"free_bytes", *d}};
  } else {
    out["ok"] = false;
    out["disk_error"] = d.error().what();
  }
  json procs = json::array();
  for (const auto& p : find_runtime_processes(env.root_env))
    procs.push_back({{"pid", p.pid}, {"pgid", p.pgid}, {"cmdline", p.cmdline}});
  out["runtime_processes"] = procs;
  json shm = json::array();
  for (const auto& s : find_shm_segments(*shm_dir, *prefixes))
    shm.push_back({{"path", s.path}, {"bytes", s.bytes}, {"in_use", s.in_use}});
  out["shm_segments"] = shm;
  return {out["ok"].get<bool>() ? kNodeOk : kNodeCheckFailed, out};
}

VerbOutput clean(const json& in, const NodeEnv& env) {
  namespace ni = node_input;
  if (auto s = ni::only_keys(in, {"shm_dir", "shm_prefixes", "grace_ms"}, "clean"); !s)
    return bad_input(s.error());
  auto shm_dir = ni::str(in, "shm_dir", "/dev/shm");
  auto prefixes = ni::strings(in, "shm_prefixes", default_shm_prefixes());
  auto grace = ni::u64(in, "grace_ms", 3000);
  if (!shm_dir) return bad_input(shm_dir.error());
  if (!prefixes) return bad_input(prefixes.error());
  if (!grace) return bad_input(grace.error());
  // Processes first: a dead runtime's segments become leaked and are removed in the same call.
  auto procs = find_runtime_processes(env.root_env);
  json killed = json::array();
  for (pid_t p : kill_runtime_processes(procs, static_cast<int>(std::min<uint64_t>(*grace, 60000))))
    killed.push_back(p);
  json remaining = json::array();
  for (const auto& p : find_runtime_processes(env.root_env))
    remaining.push_back({{"pid", p.pid}, {"cmdline", p.cmdline}});
  json removed = json::array();
  for (const auto& path : remove_leaked_shm(find_shm_segments(*shm_dir, *prefixes))) removed.push_back(path);
  json in_use = json::array();
  for (const auto& s : find_shm_segments(*shm_dir, *prefixes))
    if (!s.in_use) in_use.push_back(s.path);  // still leaked = could not unlink
  bool ok = remaining.empty() && in_use.empty();
  return {ok ? kNodeOk : kNodeCheckFailed, json{{"ok", ok},
                                                {"killed", killed},
                                                {"removed_shm", removed},
                                                {"remaining", remaining},
                                                {"unremovable_shm", in_use}}};
}

}  // namespace

NodeEnv node_env_from_process(const std::string& state_dir) {
  NodeEnv env;
  if (const char* r = std::getenv("SPARKCTL_NODE_ROOT")) env.root_env = std::string(r);
  env.node_root = env.root_env && !env.root_env->empty() ? *env.root_env : state_dir;
  auto self = self_executable();
  env.binary = self.ok() ? *self : "/proc/self/exe";
#ifdef SPARKCTL_VERSION
  env.version = SPARKCTL_VERSION;
#endif
  return env;
}

VerbOutput run_node_verb(NodeVerb verb, std::string_view input, const NodeEnv& env) {
  json in = json::object();
  if (input.find_first_not_of(" \t\r\n") != std::string_view::npos) {
    in = json::parse(input, nullptr, /*allow_exceptions=*/false);
    if (in.is_discarded())
      return bad_input(make_error("node " + std::string(node_verb_name(verb)) + ": stdin is not valid JSON",
                                  "send one JSON object on stdin"));
    if (!in.is_object())
      return bad_input(make_error("node " + std::string(node_verb_name(verb)) + ": stdin JSON is a " +
                                      in.type_name() + ", not an object",
                                  "send one JSON object on stdin"));
  }
  switch (verb) {
    case NodeVerb::kVersion:
      return version(env);
    case NodeVerb::kEcho:
      return {kNodeOk, in};
    case NodeVerb::kFacts:
      return facts(in, env);
    case NodeVerb::kPreflight:
      return run_preflight(in, env);
    case NodeVerb::kClean:
      return clean(in, env);
    case NodeVerb::kLaunch:
      return node_launch(in, env);
    case NodeVerb::kStop:
      return node_stop(in, env);
    case NodeVerb::kPs:
      return node_ps(in, env);
    case NodeVerb::kLogTail:
      return node_log_tail(in, env);
    case NodeVerb::kStageRecv:
      return run_stage_recv(in, env);
    case NodeVerb::kStageVerify:
      return run_stage_verify(in, env);
    case NodeVerb::kFabricDoctor:
    case NodeVerb::kFabricSetup:
    case NodeVerb::kFabricEnv:
      return run_fabric_verb(verb, in);
  }
  return bad_input(make_error("unknown verb", "see sparkctl node --help"));
}

}  // namespace spk
