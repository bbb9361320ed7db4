// `sparkctl cluster show`: the cluster inventory in use (--cluster FILE, or the implicit one-node
// `local` cluster), validated. Exit 1 with one diagnostic per line when the inventory is invalid.
#include <CLI/CLI.hpp>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "orchestrator/inventory.h"

namespace spk::cli {
namespace {

int run_cluster_show(Context& ctx) {
  ClusterLoad l = load_cluster_or_local(ctx.global.cluster_file, ctx.global.state_dir);
  for (const auto& d : l.diagnostics) std::cerr << d.str() << "\n";
  if (!l.cluster) {
    print_error("cluster show", ctx.global.cluster_file + " is invalid (fix the lines above)");
    return kExitFailed;
  }
  const Cluster& c = *l.cluster;
  if (ctx.global.json) {
    std::cout << json_text(to_json(c)) << "\n";
    return kExitOk;
  }
  std::cout << "cluster " << c.name << " (" << c.source << "), " << c.nodes.size() << " node(s)\n";
  std::cout << std::left << std::setw(12) << "NODE" << std::setw(8) << "ROLE" << std::setw(26) << "SSH"
            << std::setw(5) << "GPUS" << std::setw(34) << "FABRIC"
            << " CACHE\n";
  for (const auto& n : c.nodes) {
    std::string ssh = n.local ? "(local, no ssh)"
                              : (n.ssh.user.empty() ? "" : n.ssh.user + "@") + n.ssh.host + ":" +
                                    std::to_string(n.ssh.port);
    std::string fabric =
        n.fabric.interface.empty() && n.fabric.cidr.empty() ? "-" : n.fabric.interface + " " + n.fabric.cidr;
    if (!n.fabric.hca.empty()) {
      fabric += " [";
      for (size_t i = 0; i < n.fabric.hca.size(); ++i) fabric += (i ? "," : "") + n.fabric.hca[i];
      fabric += "]";
    }
    std::cout << std::setw(12) << n.name << std::setw(8) << role_name(n.role) << std::setw(26) << ssh
              << std::setw(5) << n.gpus << std::setw(34) << fabric << " " << n.cache_dir << "\n";
  }
  return kExitOk;
}

}  // namespace

void setup_cluster(CLI::App& app, Context& ctx) {
  auto* cluster = app.add_subcommand("cluster", "show the cluster inventory");
  cluster->require_subcommand(1);
  auto* show =
      cluster->add_subcommand("show", "the nodes of --cluster FILE (default: the implicit `local` cluster)");
  show->callback([&ctx] { ctx.exit_code = run_cluster_show(ctx); });
}

}  // namespace spk::cli
