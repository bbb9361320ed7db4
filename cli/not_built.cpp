// Verbs that exist by name but are not built yet. They say so and exit 2: never pretend.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <vector>

#include "cli/verbs.h"

namespace spk::cli {

void print_error(const std::string& verb, const std::string& what) {
  std::cerr << "sparkctl " << verb << ": " << what << "\n";
}

void add_not_built(CLI::App& app, Context& ctx, const std::string& name, const std::string& description,
                   const std::string& issue) {
  auto* sub = app.add_subcommand(name, description + " [not built yet]");
  // Swallow whatever arguments follow so that the answer is always "not built yet", never a usage error.
  auto args = std::make_shared<std::vector<std::string>>();
  sub->add_option("args", *args, "ignored until the verb is built");
  sub->allow_extras();
  sub->fallthrough(false);
  sub->callback([&ctx, name, issue, args] {
    print_error(name, "not built yet (tracked in " + issue + ")");
    ctx.exit_code = kExitUsage;
  });
}

void setup_not_built_verbs(CLI::App& app, Context& ctx) {
  add_not_built(app, ctx, "up", "preflight, fabric, stage weights, launch workers first, warm, ready",
                "issue #7");
  add_not_built(app, ctx, "down", "stop every rank of the deployment", "issue #7");
  add_not_built(app, ctx, "status", "per node and rank: pid, phase, uptime, restarts, endpoint", "issue #7");
  add_not_built(app, ctx, "logs", "interleaved logs of every node", "issue #7");
  add_not_built(app, ctx, "restart", "stop and relaunch the deployment worker-first", "issue #7");
  add_not_built(app, ctx, "switch", "stop every rank, clean, relaunch another lane fresh", "issue #7");
  add_not_built(app, ctx, "bench", "benchmark a warmed lane", "issue #10");
}

}  // namespace spk::cli
