// `sparkctl fabric show|setup|doctor|env|bw-serve`: the fabric verbs on the local node. The orchestrator
// runs the same library calls on every node through `sparkctl node <verb>` (typed request in, JSON out);
// here the request comes from flags. --json prints the result object instead of the table.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "fabric/doctor.h"
#include "fabric/fabric_env.h"
#include "fabric/ipv4.h"
#include "fabric/link_setup.h"
#include "fabric/tcp_bandwidth.h"
#include "kernels/base/fs.h"
#include "orchestrator/inventory.h"

namespace spk::cli {
namespace {

using namespace spk::fabric;

struct FabricOptions {
  std::string node;
  std::string sysfs_root = "/sys";
  std::string addrs_file;  // StaticNetView JSON instead of the kernel (fake sysfs trees)
  std::string cidr;
  std::vector<std::string> ifaces;
  std::vector<std::string> ips;
  int mtu = 9000;
  bool dry_run = false;
  bool addr_range = false;
  std::vector<std::string> hcas;
  std::vector<std::string> sets;
  DoctorRequest doctor;
  std::string bind = "0.0.0.0";
  int bw_port = kDefaultBwPort;
  int count = 1;
  int timeout_s = 60;
};

// Each shared option is declared here once and attached to the subcommands that take it.
void opt_node(CLI::App* s, FabricOptions& o) {
  s->add_option("--node", o.node, "node name used in messages (default: hostname)");
}
void opt_sysfs(CLI::App* s, FabricOptions& o) {
  s->add_option("--sysfs-root", o.sysfs_root, "sysfs mount to read RDMA devices from")
      ->envname("SPARKCTL_SYSFS_ROOT");
  s->add_option("--addrs", o.addrs_file,
                "JSON file {\"addresses\":[{\"ifname\":..,\"cidr\":..}],\"links\":[..]} used instead of the "
                "kernel's addresses (for fake sysfs trees)");
}
CLI::Option* opt_ip(CLI::App* s, FabricOptions& o, bool many) {
  if (many)
    return s->add_option("--ip", o.ips, "fabric IPv4/CIDR for the matching --iface, e.g. 192.168.100.1/24");
  return s->add_option("--ip", o.cidr, "this node's fabric IPv4/CIDR, e.g. 192.168.100.1/24")
      ->envname("SPARKCTL_FABRIC_IP");
}
void opt_mtu(CLI::App* s, FabricOptions& o) {
  s->add_option("--mtu", o.mtu, "fabric MTU")->envname("SPARKCTL_FABRIC_MTU")->check(CLI::Range(68, 65535));
}
void opt_port(CLI::App* s, FabricOptions& o) {
  s->add_option("--bw-port", o.bw_port, "TCP port of the bandwidth test")->check(CLI::Range(1, 65535));
}

void print_json(const nlohmann::json& j) { std::cout << json_text(j) << "\n"; }

Result<std::unique_ptr<NetView>> net_view(const FabricOptions& o) {
  if (o.addrs_file.empty()) return kernel_net_view();
  SPK_ASSIGN(auto text, read_file(o.addrs_file));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    return make_error("--addrs " + o.addrs_file + " is not JSON",
                      "write {\"addresses\": [...]} (see --help)");
  SPK_ASSIGN(auto v, StaticNetView::from_json(j));
  return std::unique_ptr<NetView>(std::make_unique<StaticNetView>(std::move(v)));
}

int fail(const std::string& verb, const Error& e) {
  print_error(verb, e.what());
  return kExitFailed;
}

void print_table(const NodeFabric& nf) {
  std::printf("node %s (sysfs %s): %zu RDMA device(s)\n", nf.node.c_str(), nf.sysfs_root.c_str(),
              nf.devices.size());
  std::printf("%-14s %-4s %-10s %-22s %-9s %-16s %-5s %-5s %s\n", "DEVICE", "PORT", "STATE", "RATE", "LINK",
              "NETDEV", "MTU", "OPER", "ADDRS");
  for (auto& d : nf.devices)
    for (auto& p : d.ports) {
      const std::string nd = d.netdevs.empty() ? "-" : d.netdevs.front();
      const Netdev* n = nf.netdev(nd);
      std::string addrs;
      if (n)
        for (auto& a : n->addrs) addrs += (addrs.empty() ? "" : ",") + a;
      std::printf("%-14s %-4d %-10s %-22s %-9s %-16s %-5d %-5s %s\n", d.name.c_str(), p.port, p.state.c_str(),
                  p.rate.c_str(), p.link_layer.c_str(), nd.c_str(), n ? n->mtu : 0,
                  n ? n->operstate.c_str() : "-", addrs.empty() ? "-" : addrs.c_str());
      for (auto& g : p.gids)
        std::printf("    gid %-3d %-40s %-11s %s\n", g.index, gid_short(g.gid).c_str(), g.type.c_str(),
                    g.ndev.c_str());
    }
}

void print_env(const FabricEnv& env) {
  for (auto& w : env.warnings) std::printf("# warning: %s\n", w.c_str());
  for (auto& s : env.plan.skipped)
    std::printf("# %s left out: %s (%s)\n", s.device.c_str(), s.reason.c_str(), s.fix.c_str());
  for (auto& [k, v] : env.vars) std::printf("%s=%s  # %s\n", k.c_str(), v.value.c_str(), v.source.c_str());
}

Result<EnvRequest> env_request(const FabricOptions& o) {
  EnvRequest r;
  r.gid = {o.cidr, o.hcas};
  r.use_addr_range = o.addr_range;
  for (auto& s : o.sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      return make_error("--set '" + s + "' is not VAR=VALUE", "write e.g. --set NCCL_DEBUG=INFO");
    r.overrides[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return r;
}

// --cluster FILE: this node's fabric IP and interface from the inventory when --ip / --iface are not
// given (the node is --node, else the hostname). Returns a note for the user, empty when nothing applied.
Result<std::string> from_inventory(const Context& ctx, FabricOptions& o, std::string* iface) {
  if (ctx.global.cluster_file.empty()) return std::string();
  spk::ClusterLoad cl = spk::load_cluster_file(ctx.global.cluster_file);
  if (!cl.cluster) {
    std::string why;
    for (const auto& d : cl.diagnostics) why += (why.empty() ? "" : "; ") + d.str();
    return make_error("inventory " + ctx.global.cluster_file + " is invalid: " + why,
                      "sparkctl cluster show");
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = o.node.empty() ? host : o.node;
  const spk::Node* n = nullptr;
  for (const auto& x : cl.cluster->nodes)
    if (x.name == me) n = &x;
  if (!n) {
    std::string names;
    for (const auto& x : cl.cluster->nodes) names += (names.empty() ? "" : ", ") + x.name;
    return make_error("node '" + me + "' is not in " + ctx.global.cluster_file + " (nodes: " + names + ")",
                      "pass --node NAME of the inventory");
  }
  if (o.node.empty()) o.node = n->name;
  std::string note;
  if (o.cidr.empty() && !n->fabric.cidr.empty()) {
    o.cidr = n->fabric.cidr;
    note += "fabric IP " + o.cidr;
  }
  if (iface && iface->empty() && !n->fabric.interface.empty()) {
    *iface = n->fabric.interface;
    note += std::string(note.empty() ? "" : ", ") + "interface " + *iface;
  }
  return note.empty() ? note : note + " from " + ctx.global.cluster_file + " (node " + n->name + ")";
}

int run_show(const Context& ctx, FabricOptions& o) {
  auto inv = from_inventory(ctx, o, nullptr);
  if (!inv.ok()) return fail("fabric show", inv.error());
  if (!inv->empty() && !ctx.global.json) std::printf("%s\n", inv->c_str());
  auto net = net_view(o);
  if (!net.ok()) return fail("fabric show", net.error());
  auto nf = discover({o.node, o.sysfs_root}, **net);
  if (!nf.ok()) return fail("fabric show", nf.error());
  nlohmann::json j = {{"fabric", *nf}};
  if (nf->devices.empty()) {  // one line, not an empty table and an error about GIDs
    j["verdict"] = kNoRdmaVerdict;
    if (ctx.global.json)
      print_json(j);
    else
      std::printf("%s: %s\n", nf->node.c_str(), kNoRdmaVerdict);
    return kExitOk;
  }
  int code = kExitOk;
  if (!o.cidr.empty()) {
    auto req = env_request(o);
    if (!req.ok()) return fail("fabric show", req.error());
    auto env = fabric_env(*nf, *req);
    if (env.ok()) {
      j["env"] = *env;
    } else {
      j["error"] = env.error().what();
      code = kExitFailed;
    }
    if (!ctx.global.json) {
      print_table(*nf);
      if (env.ok()) {
        std::printf("\nchosen for %s:\n", o.cidr.c_str());
        print_env(*env);
      } else {
        print_error("fabric show", env.error().what());
      }
    }
  } else if (!ctx.global.json) {
    print_table(*nf);
  }
  if (ctx.global.json) print_json(j);
  return code;
}

int run_env(const Context& ctx, const FabricOptions& o) {
  auto net = net_view(o);
  if (!net.ok()) return fail("fabric env", net.error());
  auto nf = discover({o.node, o.sysfs_root}, **net);
  if (!nf.ok()) return fail("fabric env", nf.error());
  auto req = env_request(o);
  if (!req.ok()) return fail("fabric env", req.error());
  auto env = fabric_env(*nf, *req);
  if (!env.ok()) return fail("fabric env", env.error());
  if (ctx.global.json)
    print_json(*env);
  else
    print_env(*env);
  return kExitOk;
}

int run_setup(const Context& ctx, const FabricOptions& o) {
  if (!o.ips.empty() && o.ips.size() != o.ifaces.size())
    return fail("fabric setup", make_error(std::to_string(o.ifaces.size()) + " --iface but " +
                                               std::to_string(o.ips.size()) + " --ip",
                                           "give one --ip per --iface, in the same order (or none)"));
  SetupRequest req;
  req.node = o.node;
  req.dry_run = o.dry_run;
  for (size_t i = 0; i < o.ifaces.size(); ++i)
    req.links.push_back({o.ifaces[i], o.ips.empty() ? "" : o.ips[i], o.mtu});
  auto res = setup_links(req);
  if (!res.ok()) return fail("fabric setup", res.error());
  if (ctx.global.json) {
    print_json(*res);
  } else {
    for (auto& c : res->changes)
      std::printf("%s%s\n", o.dry_run ? "would change: " : "changed: ", describe(c).c_str());
    if (res->changes.empty()) std::printf("no change: fabric links already as requested\n");
  }
  return kExitOk;
}

int run_doctor_verb(const Context& ctx, FabricOptions& o) {
  auto inv = from_inventory(ctx, o, &o.doctor.iface);
  if (!inv.ok()) return fail("fabric doctor", inv.error());
  if (!inv->empty() && !ctx.global.json) std::printf("%s\n", inv->c_str());
  auto net = net_view(o);
  if (!net.ok()) return fail("fabric doctor", net.error());
  DoctorRequest& r = o.doctor;
  r.node = o.node;
  r.sysfs_root = o.sysfs_root;
  r.fabric_cidr = o.cidr;
  r.mtu = o.mtu;
  r.bw_port = o.bw_port;
  auto res = run_doctor(r, **net);
  if (!res.ok()) return fail("fabric doctor", res.error());
  if (ctx.global.json) {
    print_json(*res);
  } else {
    for (auto& f : res->findings) {
      std::printf("[%s] %-11s %s\n", f.ok ? " ok " : "FAIL", f.check.c_str(), f.message.c_str());
      if (!f.ok && !f.fix.empty()) std::printf("       fix: %s\n", f.fix.c_str());
    }
    if (!res->verdict.empty())
      std::printf("%s\n", res->findings.empty() || res->ok
                              ? res->verdict.c_str()
                              : (res->verdict + "; and some checks failed (above)").c_str());
    else
      std::printf("%s\n", res->ok ? "fabric doctor: all checks passed" : "fabric doctor: some checks failed");
  }
  return res->ok ? kExitOk : kExitFailed;
}

int run_bw_serve(const Context& ctx, const FabricOptions& o) {
  auto srv = BwServer::listen(o.bind, o.bw_port);
  if (!srv.ok()) return fail("fabric bw-serve", srv.error());
  std::fprintf(stderr, "fabric bw-serve: listening on %s:%d for %d client(s)\n", o.bind.c_str(), srv->port(),
               o.count);
  auto got = srv->serve(o.count, o.timeout_s);
  if (!got.ok()) return fail("fabric bw-serve", got.error());
  if (ctx.global.json)
    print_json({{"bytes", *got}, {"port", srv->port()}});
  else
    std::printf("received %llu bytes\n", static_cast<unsigned long long>(*got));
  return kExitOk;
}

}  // namespace

void setup_fabric(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<FabricOptions>();
  auto* fab = app.add_subcommand("fabric", "RoCE fabric: show, setup (root), doctor, env, bw-serve");
  fab->require_subcommand(1);

  auto* show = fab->add_subcommand("show", "RDMA devices, ports, GID tables and netdevs of this node");
  opt_node(show, *o);
  opt_sysfs(show, *o);
  opt_ip(show, *o, false);
  show->callback([&ctx, o] { ctx.exit_code = run_show(ctx, *o); });

  auto* env = fab->add_subcommand("env", "NCCL/Gloo/rendezvous environment for this node");
  opt_node(env, *o);
  opt_sysfs(env, *o);
  opt_ip(env, *o, false)->required();
  env->add_flag("--addr-range", o->addr_range, "use NCCL_IB_ADDR_RANGE instead of NCCL_IB_GID_INDEX");
  env->add_option("--hca", o->hcas,
                  "explicit RDMA devices (default: the fabric IP's device and its other half)");
  env->add_option("--set", o->sets, "override VAR=VALUE (applied last; VAR= removes it)");
  env->callback([&ctx, o] { ctx.exit_code = run_env(ctx, *o); });

  auto* setup = fab->add_subcommand("setup", "assign fabric IP, set MTU, bring links up (root; idempotent)");
  opt_node(setup, *o);
  setup->add_option("--iface", o->ifaces, "fabric netdev (repeat for the second CX7 half)")->required();
  opt_ip(setup, *o, true);
  opt_mtu(setup, *o);
  setup->add_flag("--dry-run", o->dry_run, "print what would change, change nothing");
  setup->callback([&ctx, o] { ctx.exit_code = run_setup(ctx, *o); });

  auto* doc =
      fab->add_subcommand("doctor", "check IP, MTU (DF ping), rate, GIDs, NCCL_IB_HCA, NCCL, TCP bandwidth");
  opt_node(doc, *o);
  opt_sysfs(doc, *o);
  opt_ip(doc, *o, false);
  opt_mtu(doc, *o);
  opt_port(doc, *o);
  doc->add_option("--iface", o->doctor.iface, "fabric netdev (default: the fabric IP's RDMA netdev)");
  doc->add_option("--peer", o->doctor.peers, "another node's fabric IPv4 (repeatable)");
  doc->add_option("--bw-seconds", o->doctor.bw_seconds, "bandwidth test time limit (and 1 GiB at most)");
  doc->add_option("--min-rate-gbps", o->doctor.min_rate_gbps, "lowest acceptable port rate per RDMA device");
  doc->add_option("--expect-gid-index", o->doctor.expected_gid_index,
                  "GID index from the plan (drift check)");
  doc->add_option("--nccl-ib-hca", o->doctor.nccl_ib_hca,
                  "NCCL_IB_HCA value to check (default: $NCCL_IB_HCA)");
  doc->add_option("--skip", o->doctor.skip, "checks to leave out: ip, mtu, rdma, nccl, ping, bw")
      ->check(CLI::IsMember({"ip", "mtu", "rdma", "nccl", "ping", "bw"}));
  doc->callback([&ctx, o] { ctx.exit_code = run_doctor_verb(ctx, *o); });

  auto* bw = fab->add_subcommand("bw-serve", "receive the doctor's TCP bandwidth test from a peer");
  bw->add_option("--bind", o->bind, "IPv4 to listen on (the fabric IP)");
  opt_port(bw, *o);
  bw->add_option("--count", o->count, "clients to serve before exiting")->check(CLI::Range(1, 1000));
  bw->add_option("--timeout", o->timeout_s, "seconds to wait for each client")->check(CLI::Range(1, 3600));
  bw->callback([&ctx, o] { ctx.exit_code = run_bw_serve(ctx, *o); });
}

}  // namespace spk::cli
