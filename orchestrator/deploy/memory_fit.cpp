#include "orchestrator/deploy/memory_fit.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "orchestrator/gmu/process_probe.h"
#include "orchestrator/node/node_verbs.h"

namespace spk {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kHereMaxBytes = 4ull << 30;  // plan / validate: CPU checkpoints up to 4 GiB

std::string flag_value(const std::vector<std::string>& argv, const std::string& flag,
                       const std::string& dflt) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag) return argv[i + 1];
  return dflt;
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", bytes / double(1ull << 30));
  return b;
}

// The last top-level JSON object of a log (the dry run prints it pretty: its "{" starts a line).
json last_json_object(const std::string& text) {
  for (size_t p = text.rfind('{'); p != std::string::npos;
       p = p ? text.rfind('{', p - 1) : std::string::npos) {
    if (p != 0 && text[p - 1] != '\n') continue;
    auto j = json::parse(text.substr(p), nullptr, false);
    if (j.is_object()) return j;
    if (p == 0) break;
  }
  return nullptr;
}

std::vector<std::string> dry_argv(std::vector<std::string> argv, const std::string& binary) {
  if (!argv.empty()) argv[0] = binary;
  argv.push_back("--dry-run-memory");
  return argv;
}

}  // namespace

bool MemoryFit::refused() const {
  for (const auto& r : ranks)
    if (r.status == "short" || r.status == "error") return true;
  return false;
}

bool MemoryFit::checked() const {
  for (const auto& r : ranks)
    if (r.status != "skipped") return true;
  return false;
}

std::string memory_knobs(const std::vector<std::string>& argv) {
  return "gpu_memory_utilization " + flag_value(argv, "--gpu-memory-utilization", "0.9") +
         ", max_model_len " + flag_value(argv, "--max-model-len", "model's") + ", max_num_batched_tokens " +
         flag_value(argv, "--max-num-batched-tokens", "?") + ", kv_cache_dtype " +
         flag_value(argv, "--kv-cache-dtype", "auto") + ", tensor_parallel " +
         flag_value(argv, "--tensor-parallel-size", "1") +
         (flag_value(argv, "--device-memory-gib", "").empty()
              ? std::string()
              : ", device_memory_gib " + flag_value(argv, "--device-memory-gib", "")) +
         " (recipe keys; `sparkctl gmu bisect LANE` finds the GMU)";
}

std::string MemoryFit::text(const std::vector<std::string>& argv) const {
  std::string out;
  for (const auto& r : ranks)
    out += "  rank " + std::to_string(r.rank) + " on " + r.node + ": " + r.status + ": " + r.detail + "\n";
  if (refused()) out += "  knobs: " + memory_knobs(argv) + "\n";
  return out;
}

RankFit parse_dry_run(int rank, const std::string& node, int exit_code, const std::string& out) {
  RankFit f{rank, node, "error", "", 0};
  json j = last_json_object(out);
  if (!j.is_object()) {
    std::string tail = out.size() > 400 ? out.substr(out.size() - 400) : out;
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    f.detail = "the dry run (exit " + std::to_string(exit_code) + ") printed no memory plan: " + tail;
    return f;
  }
  if (j.contains("error")) {
    f.status = "short";
    f.detail = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
    return f;
  }
  f.status = "fits";
  f.kv_tokens = j.value("kv_tokens", int64_t{0});
  f.detail = "KV cache " + std::to_string(f.kv_tokens) + " tokens (" +
             gib(double(j.value("available_kv_bytes", int64_t{0}))) + " of " +
             gib(double(j.value("device_bytes", uint64_t{0}))) + " device memory)";
  return f;
}

MemoryFit check_memory_fit(std::vector<NodeLink>& links, const Plan& plan,
                           std::chrono::milliseconds timeout) {
  MemoryFit fit;
  for (const auto& rs : plan.ranks) {
    NodeLink* l = find_link(links, rs.node);
    if (!l) {
      fit.ranks.push_back({rs.rank, rs.node, "error", "no link to the node", 0});
      continue;
    }
    const std::string dir = l->node.state_dir + "/deploy/memfit", name = "rank-" + std::to_string(rs.rank);
    // Run it through the node: the model is where the rank will read it.
    json in{{"dir", dir},
            {"name", name},
            {"argv", dry_argv(rs.process.argv, l->binary)},
            {"wait_ms", static_cast<uint64_t>(timeout.count())}};
    json env = json::object();
    for (const auto& [k, v] : rs.process.env) env[k] = v;
    in["env"] = env;
    auto a = call_node(*l->exec, NodeVerb::kLaunch, in, timeout + 30s);
    if (!a) {
      fit.ranks.push_back({rs.rank, rs.node, "error", a.error().message, 0});
      continue;
    }
    auto t = call_node(*l->exec, NodeVerb::kLogTail,
                       json{{"dir", dir}, {"names", {name}}, {"max_bytes", 16384}}, 20s);
    std::string text;
    if (t)
      for (const auto& lg : t->body.value("logs", json::array())) text += lg.value("text", "");
    fit.ranks.push_back(parse_dry_run(rs.rank, rs.node, a->body.value("exit_code", a->exit_code), text));
  }
  return fit;
}

MemoryFit check_memory_fit_here(const std::string& binary, const std::string& scratch_dir, const Recipe& r,
                                const Plan& plan, const Cluster& c) {
  MemoryFit fit;
  for (const auto& rs : plan.ranks) {
    const Node* n = nullptr;
    for (const auto& x : c.nodes)
      if (x.name == rs.node) n = &x;
    const std::string mdir = n ? model_dir(r, *n) : std::string();
    if (mdir.empty() || !std::filesystem::exists(mdir + "/config.json")) {
      fit.ranks.push_back({rs.rank, rs.node, "skipped",
                           "not checked: " + (mdir.empty() ? std::string("no model dir") : mdir) +
                               " is not on this machine (up measures it on the node after staging)",
                           0});
      continue;
    }
    // The dry run loads this rank's weights: here, next to whatever this machine serves, only a small
    // CPU checkpoint is fair game. Bigger ones and GPU lanes are measured by `up` on the node itself.
    std::error_code ec;
    uint64_t bytes = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(mdir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) bytes += it->file_size(ec);
    if (r.backend != Backend::cpu || bytes > kHereMaxBytes) {
      fit.ranks.push_back({rs.rank, rs.node, "skipped",
                           "not checked here: the dry run loads the weights (" + gib(double(bytes)) + ", " +
                               backend_name(r.backend) + "); up measures it on the node before launch",
                           0});
      continue;
    }
    std::filesystem::create_directories(scratch_dir, ec);
    const std::string log = scratch_dir + "/dry-rank-" + std::to_string(rs.rank) + ".log";
    std::filesystem::remove(log, ec);
    Status s = run_logged(dry_argv(rs.process.argv, binary), log);
    auto out = read_file(log);
    fit.ranks.push_back(parse_dry_run(rs.rank, rs.node, s.ok() ? 0 : 1, out ? *out : std::string()));
  }
  return fit;
}

}  // namespace spk
