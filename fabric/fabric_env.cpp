#include "fabric/fabric_env.h"

#include "fabric/ipv4.h"

namespace spk::fabric {

std::map<std::string, std::string> FabricEnv::values() const {
  std::map<std::string, std::string> out;
  for (auto& [k, v] : vars) out[k] = v.value;
  return out;
}

FabricEnv fabric_env(const GidPlan& plan, const EnvRequest& req) {
  FabricEnv env;
  env.node = plan.node;
  env.plan = plan;
  auto& v = env.vars;
  const HcaChoice& primary = plan.hcas.front();

  std::string hca_src = "chosen on " + plan.node + ": " + primary.device + " holds " + primary.gid;
  if (plan.hcas.size() > 1) hca_src += "; both CX7 halves usable";
  for (auto& s : plan.skipped) hca_src += "; " + s.device + " left out: " + s.reason;
  v["NCCL_IB_HCA"] = {plan.hca_list(), hca_src};

  const bool range = req.use_addr_range || !plan.indices_agree;
  if (range) {
    auto cidr = parse_cidr(plan.fabric_cidr);
    const std::string net = cidr.ok() ? cidr->network() : plan.fabric_cidr;
    std::string why =
        req.use_addr_range ? "recipe asks for NCCL_IB_ADDR_RANGE" : "GID index differs between halves (";
    if (!req.use_addr_range) {
      for (size_t i = 0; i < plan.hcas.size(); ++i)
        why += (i ? ", " : "") + plan.hcas[i].device + "=" + std::to_string(plan.hcas[i].gid_index);
      why += "), so NCCL matches the subnet per device";
    }
    v["NCCL_IB_ADDR_RANGE"] = {net, why};
    v["NCCL_IB_ADDR_FAMILY"] = {"AF_INET", why};
  } else {
    v["NCCL_IB_GID_INDEX"] = {std::to_string(primary.gid_index),
                              "gid table " + primary.device + " port " + std::to_string(primary.port) +
                                  " index " + std::to_string(primary.gid_index) + " (" + primary.gid +
                                  " RoCE v2) on " + plan.node};
  }
  const std::string if_src = "netdev of " + primary.device + " on " + plan.node;
  v["NCCL_SOCKET_IFNAME"] = {plan.netdev, if_src};
  v["GLOO_SOCKET_IFNAME"] = {plan.netdev, if_src};
  const std::string ip = primary.ip;
  v["SPARKCTL_HOST_IP"] = {ip, "fabric IP of " + plan.node};
  v["VLLM_HOST_IP"] = {ip, "fabric IP of " + plan.node};

  for (auto& [k, val] : req.overrides) {
    if (val.empty())
      v.erase(k);
    else
      v[k] = {val, "recipe override"};
  }
  if (auto it = v.find("NCCL_IB_GID_INDEX"); it != v.end() && it->second.source == "recipe override") {
    for (auto& h : plan.hcas)
      if (it->second.value != std::to_string(h.gid_index))
        env.warnings.push_back(
            plan.node + ": recipe sets NCCL_IB_GID_INDEX=" + it->second.value + " but " + h.device +
            "'s RoCE v2 GID for " + h.ip + " is at index " + std::to_string(h.gid_index) +
            " (drop NCCL_IB_GID_INDEX from the recipe env: sparkctl resolves it per node)");
  }
  return env;
}

Result<FabricEnv> fabric_env(const NodeFabric& node, const EnvRequest& req) {
  SPK_ASSIGN(auto plan, choose_gids(node, req.gid));
  return fabric_env(plan, req);
}

}  // namespace spk::fabric
