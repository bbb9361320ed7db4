#include "orchestrator/deploy/rank_ops.h"

#include <xxhash.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace spk {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string answer_error(const NodeAnswer& a) {
  std::string e = a.body.value("error", std::string("exit ") + std::to_string(a.exit_code));
  std::string fix = a.body.value("fix", std::string());
  return fix.empty() ? e : e + " (" + fix + ")";
}

std::string prefix_lines(const std::string& text, const std::string& prefix) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += prefix + line + "\n";
  return out;
}

}  // namespace

std::string rendezvous_token(const std::string& api_key) {
  const std::string seed = "sparkctl-rendezvous:" + api_key;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(seed.data(), seed.size())));
  return hex;
}

Result<int> launch_rank(NodeLink& link, const DeploySpec& spec, const RankLaunch& r,
                        const std::string& api_key) {
  json env = json::object();
  for (const auto& [k, v] : r.env) env[k] = v;
  env[spec.api_key_env] = api_key;
  // TP > 1: every rank of the group presents the same rendezvous token (runtime/dist/process_group.h).
  // Derived from the deployment's API key, so a relaunch by the supervisor gets the same one.
  env["SPARKCTL_RDZV_TOKEN"] = rendezvous_token(api_key);
  json in{{"dir", spec.run_dir(r.node)}, {"name", r.daemon_name()}, {"argv", r.argv}, {"env", env}};
  SPK_ASSIGN(NodeAnswer a, call_node(*link.exec, NodeVerb::kLaunch, in, 30s));
  if (a.exit_code != 0 || !a.body.value("ok", false))
    return make_error(r.node + ": launch of rank " + std::to_string(r.rank) + " failed: " + answer_error(a));
  return a.body.value("pid", 0);
}

Status run_on_node(NodeLink& link, const std::string& run_dir, const std::string& name,
                   const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  json in{
      {"dir", run_dir}, {"name", name}, {"argv", argv}, {"wait_ms", static_cast<uint64_t>(timeout.count())}};
  SPK_ASSIGN(NodeAnswer a, call_node(*link.exec, NodeVerb::kLaunch, in, timeout + 30s));
  if (a.exit_code != 0 || !a.body.value("ok", false))
    return make_error(link.node.name + ": " + name + " failed: " + answer_error(a) + " (log " +
                          a.body.value("log", run_dir + "/" + name + ".log") + ")",
                      "run `sparkctl logs --node " + link.node.name + "` to see why");
  return ok_status();
}

Status stop_all(std::vector<NodeLink>& links, const DeploySpec& spec, std::chrono::milliseconds grace) {
  std::string problems;
  for (auto& l : links) {
    const std::string dir = spec.run_dir(l.node.name);
    if (dir.empty()) continue;
    json in{{"dir", dir}, {"grace_ms", static_cast<uint64_t>(grace.count())}};
    auto a = call_node(*l.exec, NodeVerb::kStop, in, grace + 30s);
    if (!a)
      problems += (problems.empty() ? "" : "; ") + a.error().message;
    else if (a->exit_code != 0)
      problems += (problems.empty() ? "" : "; ") + l.node.name +
                  ": still alive: " + a->body.value("remaining", json::array()).dump();
  }
  if (!problems.empty())
    return make_error("could not stop every rank: " + problems,
                      "run `sparkctl down` again, or `sparkctl node clean` on the node");
  return ok_status();
}

Result<std::vector<DaemonInfo>> ps_all(std::vector<NodeLink>& links, const DeploySpec& spec) {
  std::vector<DaemonInfo> out;
  for (auto& l : links) {
    const std::string dir = spec.run_dir(l.node.name);
    if (dir.empty()) continue;
    SPK_ASSIGN(NodeAnswer a, call_node(*l.exec, NodeVerb::kPs, json{{"dir", dir}}, 20s));
    if (a.exit_code != 0) return make_error(l.node.name + ": node ps failed: " + answer_error(a));
    for (const auto& d : a.body.value("daemons", json::array())) {
      DaemonInfo info{l.node.name,
                      d.value("name", ""),
                      d.value("pid", 0),
                      d.value("alive", false),
                      d.value("started_ms", int64_t{0}),
                      d.value("uptime_s", 0.0)};
      if (auto n = d.find("exit_note"); n != d.end() && n->is_object()) {
        info.exit_reason = n->value("reason", "");
        info.exit_message = n->value("message", "");
      }
      out.push_back(std::move(info));
    }
  }
  return out;
}

std::string log_tails(std::vector<NodeLink>& links, const DeploySpec& spec, size_t bytes) {
  std::string out;
  for (auto& l : links) {
    const std::string dir = spec.run_dir(l.node.name);
    if (dir.empty()) continue;
    auto a = call_node(*l.exec, NodeVerb::kLogTail, json{{"dir", dir}, {"max_bytes", bytes}}, 20s);
    if (!a) {
      out += "[" + l.node.name + "] (logs unreadable: " + a.error().message + ")\n";
      continue;
    }
    for (const auto& lg : a->body.value("logs", json::array()))
      out += prefix_lines(lg.value("text", ""), "[" + l.node.name + "/" + lg.value("name", "") + "] ");
  }
  return out;
}

Result<std::string> read_new_log_lines(NodeLink& link, const std::string& run_dir,
                                       std::map<std::string, uint64_t>& offsets, bool from_tail,
                                       size_t tail_bytes) {
  json in{{"dir", run_dir}, {"max_bytes", from_tail ? tail_bytes : size_t{1} << 20}};
  if (!from_tail) {
    json off = json::object();
    for (const auto& [n, o] : offsets) off[n] = o;
    in["offsets"] = off;
  }
  SPK_ASSIGN(NodeAnswer a, call_node(*link.exec, NodeVerb::kLogTail, in, 20s));
  if (a.exit_code != 0) return make_error(link.node.name + ": node log-tail failed: " + answer_error(a));
  std::string out;
  for (const auto& lg : a.body.value("logs", json::array())) {
    const std::string name = lg.value("name", "");
    std::string text = lg.value("text", "");
    uint64_t from = lg.value("from", uint64_t{0});
    size_t keep = text.rfind('\n');
    keep = keep == std::string::npos ? 0 : keep + 1;
    if (from_tail && from > 0) {  // the tail starts mid-line: drop the fragment
      size_t first = text.find('\n');
      text = first == std::string::npos ? std::string() : text.substr(first + 1);
      keep = text.rfind('\n');
      keep = keep == std::string::npos ? 0 : keep + 1;
      from = lg.value("size", uint64_t{0}) - text.size();
    }
    out += prefix_lines(text.substr(0, keep), "[" + link.node.name + "/" + name + "] ");
    offsets[name] = from + keep;
  }
  return out;
}

}  // namespace spk
