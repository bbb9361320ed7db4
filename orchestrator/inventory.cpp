#include "orchestrator/inventory.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>

#include "kernels/base/fs.h"
#include "recipes/syntax.h"

namespace spk {

namespace {

constexpr std::string_view kTopKeys[] = {"name", "defaults", "nodes"};
constexpr std::string_view kNodeKeys[] = {"name", "role",      "local",     "ssh",   "fabric",
                                          "gpus", "cache_dir", "state_dir", "binary"};
constexpr std::string_view kDefaultKeys[] = {"ssh", "fabric", "gpus", "cache_dir", "state_dir", "binary"};
constexpr std::string_view kSshKeys[] = {"host", "port", "user", "identity", "known_hosts"};
constexpr std::string_view kFabricKeys[] = {"interface", "hca", "ip"};

bool is_word(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

// Reads the per-node keys shared by `defaults` and each node entry into `n`, overriding what is set.
void read_common(YamlReader& y, const YAML::Node& m, const std::string& path, Node& n) {
  YAML::Node ssh = YamlReader::find(m, "ssh");
  if (ssh.IsDefined() && !ssh.IsNull() && y.map(ssh, path + ".ssh", kSshKeys)) {
    std::string p = path + ".ssh";
    if (auto v = y.str(ssh, "host", p)) {
      if (is_word(*v))
        n.ssh.host = *v;
      else
        y.error(YamlReader::find(ssh, "host"), p + ".host", "'" + *v + "' is not a host name or address",
                "write an IPv4 address or a DNS name");
    }
    if (auto v = y.integer_in(ssh, "port", p, 1, 65535, "set the sshd port, like 22"))
      n.ssh.port = static_cast<int>(*v);
    if (auto v = y.str(ssh, "user", p)) {
      if (is_word(*v))
        n.ssh.user = *v;
      else
        y.error(YamlReader::find(ssh, "user"), p + ".user", "'" + *v + "' is not a user name",
                "write a login name");
    }
    for (auto key : {"identity", "known_hosts"})
      if (auto v = y.str(ssh, key, p)) {
        if (v->empty() || (*v)[0] != '/')
          y.error(YamlReader::find(ssh, key), YamlReader::join(p, key),
                  "'" + *v + "' is not an absolute path", "write /abs/file (no ~: nothing expands it)");
        else
          (std::string_view(key) == "identity" ? n.ssh.identity : n.ssh.known_hosts) = *v;
      }
  }
  YAML::Node fab = YamlReader::find(m, "fabric");
  if (fab.IsDefined() && !fab.IsNull() && y.map(fab, path + ".fabric", kFabricKeys)) {
    std::string p = path + ".fabric";
    if (auto v = y.str(fab, "interface", p)) {
      if (is_word(*v) && v->size() < 16)
        n.fabric.interface = *v;
      else
        y.error(YamlReader::find(fab, "interface"), p + ".interface",
                "'" + *v + "' is not a network interface name", "see `ip -br link`, like enp1s0f0np0");
    }
    if (auto v = y.str_list(fab, "hca", p)) {
      n.fabric.hca.clear();
      for (auto& h : *v) {
        if (is_word(h))
          n.fabric.hca.push_back(h);
        else
          y.error(YamlReader::find(fab, "hca"), p + ".hca", "'" + h + "' is not an RDMA device name",
                  "see /sys/class/infiniband, like rocep1s0f0");
      }
    }
    if (auto v = y.str(fab, "ip", p)) {
      if (is_cidr(*v))
        n.fabric.cidr = *v;
      else
        y.error(YamlReader::find(fab, "ip"), p + ".ip", "'" + *v + "' is not an IPv4 CIDR",
                "write address/prefix, like 10.10.10.1/24");
    }
  }
  if (auto v = y.integer_in(m, "gpus", path, 1, 16, "set the GPUs on the node, like 1"))
    n.gpus = static_cast<int>(*v);
  if (auto v = y.str(m, "binary", path)) {
    if (v->empty() || (*v)[0] != '/' ||
        v->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+/-") !=
            std::string::npos)
      y.error(YamlReader::find(m, "binary"), YamlReader::join(path, "binary"),
              "'" + *v + "' is not an absolute path of [A-Za-z0-9._+/-]",
              "write the node's sparkctl path, like /usr/local/bin/sparkctl");
    else
      n.binary = *v;
  }
  for (auto key : {"cache_dir", "state_dir"}) {
    if (auto v = y.str(m, key, path)) {
      if (v->empty() || (*v)[0] != '/')
        y.error(YamlReader::find(m, key), YamlReader::join(path, key), "'" + *v + "' is not an absolute path",
                "write /abs/dir (no ~: nothing expands it)");
      else
        (std::string_view(key) == "cache_dir" ? n.cache_dir : n.state_dir) = *v;
    }
  }
}

std::string network_of(const std::string& cidr) {
  // a.b.c.d/p -> the network address as a 32-bit value with the prefix, for "same subnet" checks.
  unsigned a = 0, b = 0, c = 0, d = 0, p = 0;
  std::sscanf(cidr.c_str(), "%u.%u.%u.%u/%u", &a, &b, &c, &d, &p);
  uint32_t ip = (a << 24) | (b << 16) | (c << 8) | d;
  uint32_t mask = p == 0 ? 0 : ~uint32_t{0} << (32 - p);
  return std::to_string(ip & mask) + "/" + std::to_string(p);
}

}  // namespace

const char* role_name(NodeRole r) { return r == NodeRole::head ? "head" : "worker"; }

ClusterLoad load_cluster(std::string_view text, const std::string& file, const YamlLimits& limits) {
  ClusterLoad out;
  YamlReader y(file, out.diagnostics);
  auto root_opt = y.parse(text, limits);
  if (!root_opt) return out;
  const YAML::Node& root = *root_opt;
  if (!y.map(root, "", kTopKeys)) return out;
  Cluster c;
  c.source = file;
  c.name = "cluster";
  if (auto v = y.str(root, "name", "")) {
    if (is_name(*v))
      c.name = *v;
    else
      y.error(YamlReader::find(root, "name"), "name", "'" + *v + "' is not a cluster name",
              "use lowercase letters, digits, '.', '_' or '-'");
  }
  Node defaults;
  YAML::Node dn = YamlReader::find(root, "defaults");
  if (dn.IsDefined() && !dn.IsNull() && y.map(dn, "defaults", kDefaultKeys))
    read_common(y, dn, "defaults", defaults);

  YAML::Node nodes = YamlReader::find(root, "nodes");
  if (!nodes.IsDefined() || !nodes.IsSequence() || nodes.size() == 0) {
    y.error(nodes.IsDefined() ? nodes : root, "nodes", "expected a non-empty list of nodes",
            "add `nodes: [{name: spark-a, role: head, ssh: {host: ...}}]`");
    return out;
  }
  std::vector<Node> heads, workers;
  std::map<std::string, SourcePos> names, ips;
  std::set<std::string> subnets;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string p = "nodes[" + std::to_string(i) + "]";
    const YAML::Node& m = nodes[i];
    if (!y.map(m, p, kNodeKeys)) continue;
    Node n = defaults;
    n.pos = YamlReader::pos(m);
    if (auto v = y.str(m, "name", p)) {
      if (!is_name(*v))
        y.error(YamlReader::find(m, "name"), p + ".name", "'" + *v + "' is not a node name",
                "use lowercase letters, digits, '.', '_' or '-', like spark-a");
      else if (auto [it, fresh] = names.emplace(*v, YamlReader::pos(m)); !fresh)
        y.error(YamlReader::find(m, "name"), p + ".name",
                "'" + *v + "' is already the name of the node at line " + std::to_string(it->second.line),
                "give every node its own name");
      n.name = *v;
    } else {
      y.error(m, p + ".name", "missing required key", "add `name: <node>`");
    }
    YAML::Node role = YamlReader::find(m, "role");
    if (auto v = y.str(m, "role", p)) {
      if (*v == "head" || *v == "worker")
        n.role = *v == "head" ? NodeRole::head : NodeRole::worker;
      else
        y.error(role, p + ".role", "'" + *v + "' is not head or worker",
                "set role: head on one node, worker on the rest");
    }
    if (auto v = y.boolean(m, "local", p)) n.local = *v;
    read_common(y, m, p, n);
    if (n.local && n.ssh.host.empty()) n.ssh.host = "127.0.0.1";
    if (!n.local && n.ssh.host.empty())
      y.error(m, p + ".ssh.host", "node '" + n.name + "' has no SSH host",
              "set ssh.host, or local: true for this machine");
    if (n.cache_dir.empty())
      y.error(m, p + ".cache_dir", "node '" + n.name + "' has no cache dir",
              "set defaults.cache_dir or cache_dir");
    if (n.state_dir.empty() && !n.cache_dir.empty()) n.state_dir = n.cache_dir + "/state";
    if (!n.fabric.cidr.empty()) {
      YAML::Node fab = YamlReader::find(m, "fabric");
      auto at = fab.IsDefined() ? YamlReader::find(fab, "ip") : m;
      if (auto [it, fresh] = ips.emplace(n.fabric.address(), YamlReader::pos(m)); !fresh)
        y.error(at.IsDefined() ? at : m, p + ".fabric.ip",
                n.fabric.address() + " is already the fabric IP of the node at line " +
                    std::to_string(it->second.line),
                "give every node its own fabric IP");
      subnets.insert(network_of(n.fabric.cidr));
    }
    (n.role == NodeRole::head ? heads : workers).push_back(n);
  }
  if (heads.size() != 1)
    y.error(nodes, "nodes",
            heads.empty() ? "no node has role head" : std::to_string(heads.size()) + " nodes have role head",
            "set role: head on exactly one node (rank 0 runs there)");
  if (subnets.size() > 1)
    y.add(Severity::warning, YamlReader::pos(nodes), "nodes",
          "fabric IPs are in " + std::to_string(subnets.size()) +
              " different subnets; ranks may not reach each other",
          "put every fabric.ip in one subnet, like 10.10.10.0/24");
  if (has_errors(out.diagnostics)) return out;
  c.nodes = heads;
  c.nodes.insert(c.nodes.end(), workers.begin(), workers.end());
  out.cluster = std::move(c);
  return out;
}

ClusterLoad load_cluster_file(const std::string& path, const YamlLimits& limits) {
  ClusterLoad out;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && static_cast<size_t>(st.st_size) > limits.max_bytes) {
    YamlReader(path, out.diagnostics)
        .add(Severity::error, {}, "",
             "file is " + std::to_string(st.st_size) + " bytes, more than the cap of " +
                 std::to_string(limits.max_bytes),
             "an inventory is a few KiB; check --cluster");
    return out;
  }
  auto text = read_file(path);
  if (!text) {
    YamlReader(path, out.diagnostics)
        .add(Severity::error, {}, "", text.error().message, "check --cluster / SPARKCTL_CLUSTER");
    return out;
  }
  return load_cluster(*text, path, limits);
}

Cluster local_cluster(const std::string& state_dir) {
  Node n;
  n.name = "local";
  n.role = NodeRole::head;
  n.local = true;
  n.ssh.host = "127.0.0.1";
  n.gpus = 1;
  n.cache_dir = state_dir + "/cache";
  n.state_dir = state_dir;
  return Cluster{"local", "implicit", {n}};
}

ClusterLoad load_cluster_or_local(const std::string& cluster_file, const std::string& state_dir) {
  if (!cluster_file.empty()) return load_cluster_file(cluster_file);
  ClusterLoad out;
  out.cluster = local_cluster(state_dir);
  return out;
}

SshTarget ssh_target(const Node& n) {
  SshTarget t;
  t.name = n.name;
  t.host = n.ssh.host;
  t.port = n.ssh.port;
  t.user = n.ssh.user;
  if (!n.ssh.identity.empty()) t.identity_files = {n.ssh.identity};
  t.known_hosts = n.ssh.known_hosts;
  if (!n.binary.empty()) t.remote_binary = n.binary;
  return t;
}

nlohmann::json to_json(const Cluster& c) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : c.nodes) {
    nlohmann::json j = {
        {"name", n.name},
        {"role", role_name(n.role)},
        {"local", n.local},
        {"gpus", n.gpus},
        {"cache_dir", n.cache_dir},
        {"state_dir", n.state_dir},
        {"ssh", n.local ? nlohmann::json()
                        : nlohmann::json{{"host", n.ssh.host},
                                         {"port", n.ssh.port},
                                         {"user", n.ssh.user},
                                         {"identity", n.ssh.identity},
                                         {"known_hosts", n.ssh.known_hosts}}},
        {"binary", n.binary},
        {"fabric", {{"interface", n.fabric.interface}, {"hca", n.fabric.hca}, {"ip", n.fabric.cidr}}}};
    nodes.push_back(j);
  }
  return {{"name", c.name}, {"source", c.source}, {"nodes", nodes}};
}

}  // namespace spk
