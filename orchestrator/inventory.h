// The cluster inventory: which nodes exist, how to reach them, and their fabric. YAML:
//   name: sparks
//   defaults: {ssh: {user, port, identity, known_hosts}, fabric: {interface, hca: [..]}, gpus, cache_dir,
//              state_dir, binary}
//   nodes:
//     - {name: spark-a, role: head, ssh: {host: 192.168.1.10}, fabric: {ip: 10.10.10.1/24}}
//     - {name: spark-b, role: worker, ssh: {host: 192.168.1.11}, fabric: {ip: 10.10.10.2/24}}
// Node keys override defaults key by key. Without --cluster the implicit `local` cluster is used: one
// node `local`, 127.0.0.1, head, no SSH, 1 GPU, cache under the state dir.
// Checks: exactly one head, unique names, unique fabric IPs (CIDR syntax), ports 1..65535.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "orchestrator/transport/ssh_target.h"
#include "recipes/diagnostic.h"
#include "recipes/yaml_reader.h"

namespace spk {

enum class NodeRole { head, worker };

struct SshEndpoint {
  std::string host;
  int port = 22;
  std::string user;         // empty = the current user
  std::string identity;     // private key file; empty = ssh-agent, then ~/.ssh/id_*
  std::string known_hosts;  // empty = ~/.ssh/known_hosts
};

struct FabricSpec {
  std::string interface;         // netdev of the fabric port: "enp1s0f0np0"; empty = no fabric
  std::vector<std::string> hca;  // RoCE devices for NCCL_IB_HCA; empty = discovered at preflight
  std::string cidr;              // "10.10.10.1/24"; empty = none

  [[nodiscard]] std::string address() const { return cidr.substr(0, cidr.find('/')); }
};

struct Node {
  std::string name;
  NodeRole role = NodeRole::worker;
  bool local = false;  // runs on this machine, no SSH
  SshEndpoint ssh;
  FabricSpec fabric;
  int gpus = 1;
  std::string cache_dir;  // weights and synthetic models live here
  std::string state_dir;  // pidfiles and logs of the runtime on that node
  std::string binary;     // sparkctl on the node (remote; pushed when its hash differs); empty = default
  SourcePos pos;

  // The address other ranks use to reach this node: the fabric IP when set, else the SSH host.
  [[nodiscard]] std::string reach_address() const {
    return fabric.cidr.empty() ? ssh.host : fabric.address();
  }
};

struct Cluster {
  std::string name;
  std::string source;       // "implicit" or the file path
  std::vector<Node> nodes;  // head first, then workers in file order

  [[nodiscard]] const Node& head() const { return nodes.front(); }
  [[nodiscard]] bool is_local() const { return nodes.size() == 1 && nodes.front().local; }
};

struct ClusterLoad {
  std::optional<Cluster> cluster;  // set only when there is no error
  std::vector<Diagnostic> diagnostics;
};

ClusterLoad load_cluster(std::string_view text, const std::string& file, const YamlLimits& limits = {});
ClusterLoad load_cluster_file(const std::string& path, const YamlLimits& limits = {});

// The implicit one-node cluster used when no --cluster is given.
Cluster local_cluster(const std::string& state_dir);

// The cluster a verb runs against: `cluster_file` when set (--cluster), else local_cluster(state_dir).
ClusterLoad load_cluster_or_local(const std::string& cluster_file, const std::string& state_dir);

// How the transport reaches `n` (remote nodes only).
SshTarget ssh_target(const Node& n);

const char* role_name(NodeRole r);
[[nodiscard]] nlohmann::json to_json(const Cluster& c);

}  // namespace spk
