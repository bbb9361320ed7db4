#include "orchestrator/deploy/fabric_gate.h"

#include <chrono>

#include "fabric/doctor.h"
#include "fabric/link_setup.h"

namespace spk {

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string join(const std::vector<std::string>& xs, const std::string& sep) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : sep) + x;
  return out;
}

std::string recipe_env(const Recipe& r, const std::string& k) {
  for (const auto& [name, v] : r.env)
    if (name == k) return v;
  return {};
}

// The node's answer, or an error naming the node (transport failure, or the verb's own error/fix).
Result<json> ask(NodeLink& l, NodeVerb verb, const json& in, std::chrono::milliseconds timeout) {
  auto a = call_node(*l.exec, verb, in, timeout);
  if (!a.ok())
    return make_error(l.node.name + ": " + std::string(node_verb_name(verb)) + ": " + a.error().message,
                      a.error().fix, a.error().retryable);
  if (a->body.contains("error"))
    return make_error(
        l.node.name + ": " + std::string(node_verb_name(verb)) + ": " + a->body.value("error", std::string()),
        a->body.value("fix", std::string("see `sparkctl fabric doctor` on ") + l.node.name));
  return a->body;
}

json doctor_request(const Recipe& r, const NodeLink& l, const std::vector<NodeLink>& all) {
  const Node& n = l.node;
  json skip = json::array({"bw"});  // the TCP bandwidth test needs a bw-serve peer: `fabric doctor`
  if (r.backend == Backend::cpu) skip.push_back("nccl");  // cpu ranks talk Gloo: NCCL is not loaded
  json peers = json::array();
  for (const auto& o : all)
    if (o.node.name != n.name && !o.node.fabric.cidr.empty()) peers.push_back(o.node.fabric.address());
  json req{{"node", n.name}, {"mtu", r.fabric_mtu}, {"peers", peers}, {"skip", skip}};
  if (!n.fabric.interface.empty()) req["iface"] = n.fabric.interface;
  if (!n.fabric.cidr.empty()) req["fabric_cidr"] = n.fabric.cidr;
  std::string hca = recipe_env(r, "NCCL_IB_HCA");
  if (hca.empty()) hca = join(n.fabric.hca, ",");
  if (!hca.empty()) req["nccl_ib_hca"] = hca;
  return req;
}

}  // namespace

Status fabric_setup_all(std::vector<NodeLink>& links, const Recipe& r, const Progress& progress) {
  for (auto& l : links) {
    const Node& n = l.node;
    if (n.fabric.interface.empty()) {
      progress("fabric_setup", n.name + ": no fabric.interface in the inventory: nothing to set up");
      continue;
    }
    fabric::SetupRequest req{n.name, {{n.fabric.interface, n.fabric.cidr, r.fabric_mtu}}, false};
    SPK_ASSIGN(json body, ask(l, NodeVerb::kFabricSetup, json(req), 60s));
    auto res = body.get<fabric::SetupResult>();
    if (res.changes.empty())
      progress("fabric_setup", n.name + ": no change: " + n.fabric.interface + " already as requested");
    for (const auto& c : res.changes) progress("fabric_setup", n.name + ": changed " + fabric::describe(c));
  }
  return ok_status();
}

Status fabric_gate(std::vector<NodeLink>& links, const Recipe& r, const Progress& progress) {
  std::vector<std::string> fails, fixes;
  bool setup_helps = false;
  for (auto& l : links) {
    const std::string& name = l.node.name;
    auto a = call_node(*l.exec, NodeVerb::kFabricDoctor, doctor_request(r, l, links), 120s);
    if (!a.ok()) {
      fails.push_back(name + " reach: " + a.error().message);
      fixes.push_back(a.error().fix);
      continue;
    }
    if (a->body.contains("error")) {  // a request the node could not run (bad CIDR, unreadable sysfs)
      fails.push_back(name + " doctor: " + a->body.value("error", std::string()));
      fixes.push_back(a->body.value("fix", std::string()));
      continue;
    }
    auto res = a->body.get<fabric::DoctorResult>();
    for (const auto& f : res.findings)
      progress("fabric_doctor", name + " [" + (f.ok ? "ok" : "FAIL") + "] " + f.check + ": " + f.message);
    for (const auto& f : res.findings) {
      if (f.ok) continue;
      fails.push_back(name + " " + f.check + ": " + f.message);
      if (!f.fix.empty()) fixes.push_back(name + ": " + f.fix);
      setup_helps = setup_helps || f.check == "ip" || f.check == "mtu" || f.check == "link";
    }
    if (!res.verdict.empty()) {
      progress("fabric_doctor", name + ": " + res.verdict);
      if (r.backend == Backend::cuda) {
        fails.push_back(name + " rdma: " + res.verdict + ", but " + r.name + " runs backend cuda (NCCL)");
        fixes.push_back(name + ": give it a RoCE NIC, or run the lane with backend: cpu");
      }
    } else if (res.ok) {
      progress("fabric_doctor", name + ": every check passed");
    }
  }
  if (fails.empty()) return ok_status();
  std::string fix = join(fixes, "; ");
  if (setup_helps)
    fix += "; or `sparkctl up " + r.name + " --fabric-setup` as root (runs fabric setup on every node first)";
  fix += "; --skip-fabric launches without the gate";
  return make_error("fabric gate refused " + r.name + " before any rank started: " + join(fails, "; "), fix);
}

Result<std::vector<NodeFabricEnv>> fabric_envs(std::vector<NodeLink>& links, const Recipe& r) {
  std::vector<NodeFabricEnv> out;
  for (auto& l : links) {
    const Node& n = l.node;
    if (n.fabric.cidr.empty()) continue;  // no fabric IP: the ranks get the inventory's env only
    fabric::EnvRequest er;
    er.gid = {n.fabric.cidr, n.fabric.hca};
    for (const auto& [k, v] : r.env) er.overrides[k] = v;
    json in{{"discover", {{"node", n.name}}}, {"env", json(er)}};
    SPK_ASSIGN(json body, ask(l, NodeVerb::kFabricEnv, in, 60s));
    NodeFabricEnv e;
    e.node = n.name;
    if (body.contains("verdict")) {
      e.rdma = false;
      e.verdict = body.value("verdict", std::string());
    } else {
      e.env = body.get<fabric::FabricEnv>();
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> apply_fabric_envs(Plan& plan, const std::vector<NodeFabricEnv>& envs) {
  std::vector<std::string> lines;
  for (const auto& e : envs) {
    if (!e.rdma) {
      lines.push_back(e.node + ": " + e.verdict + " (no NCCL fabric env)");
      continue;
    }
    for (auto& rs : plan.ranks) {
      if (rs.node != e.node) continue;
      auto& env = rs.process.env;
      for (const auto& [k, v] : e.env.vars) {
        bool found = false;
        for (auto& kv : env)
          if (kv.first == k) kv.second = v.value, found = true;
        if (!found) env.emplace_back(k, v.value);
      }
    }
    std::vector<std::string> kv;
    for (const auto& [k, v] : e.env.vars) kv.push_back(k + "=" + v.value);
    lines.push_back(e.node + ": " + join(kv, " "));
    for (const auto& w : e.env.warnings) plan.notes.push_back("warning: " + w);
  }
  for (auto& st : plan.steps) {
    if ((st.kind == StepKind::launch_worker || st.kind == StepKind::launch_rank0) && st.rank >= 0)
      for (auto& c : st.commands)
        for (const auto& rs : plan.ranks)
          if (rs.rank == st.rank) c = rs.process;
    if (st.kind == StepKind::fabric_env && !st.skipped)
      st.summary = "per node, read from its own GID table: " + join(lines, "; ");
  }
  return lines;
}

}  // namespace spk
