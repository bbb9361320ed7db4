#include "orchestrator/deploy/stored_gmu.h"

#include <algorithm>
#include <cstdio>

#include "orchestrator/gmu/gmu_store.h"
#include "orchestrator/gmu/process_probe.h"

namespace spk {

std::string lane_model_revision(const Recipe& r) {
  const auto& m = r.model;
  if (m.source == ModelSource::synthetic)
    return "synthetic:" + m.synthetic.arch + "/" + m.synthetic.preset + "/seed" +
           std::to_string(m.synthetic.seed);
  return m.revision;
}

std::optional<std::string> apply_stored_gmu(const std::string& state_dir, const Recipe& r, Plan& plan) {
  auto g = read_gmu_choice(state_dir, r.name);
  if (!g) return std::nullopt;
  std::vector<std::string> nodes;  // the plan's node set, head first (rank order)
  for (const auto& rs : plan.ranks)
    if (std::find(nodes.begin(), nodes.end(), rs.node) == nodes.end()) nodes.push_back(rs.node);
  const std::string path = gmu_choice_path(state_dir, r.name);
  if (g->model_revision != lane_model_revision(r) || g->nodes != nodes)
    return "ignoring " + path + ": measured for another model revision or node set";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", g->gmu);
  auto apply = [&](ProcessSpec& p) {
    if (p.argv.size() >= 3 && p.argv[1] == "runtime" && p.argv[2] == "serve")
      p.argv = with_flag(p.argv, "--gpu-memory-utilization", buf);
  };
  for (auto& rs : plan.ranks) apply(rs.process);
  for (auto& st : plan.steps)
    if (st.kind == StepKind::launch_worker || st.kind == StepKind::launch_rank0)
      for (auto& c : st.commands) apply(c);
  return std::string("gpu_memory_utilization ") + buf + " from " + path;
}

}  // namespace spk
