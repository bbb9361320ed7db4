// `sparkctl down`: stop the supervisor and every rank on every node, then `node clean` (stale runtimes,
// leaked shm) unless --no-clean. Exit 0 when nothing of the deployment is left running.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "orchestrator/deploy/up.h"

namespace spk::cli {

void setup_down(CLI::App& app, Context& ctx) {
  auto no_clean = std::make_shared<bool>(false);
  auto* down = app.add_subcommand("down", "stop every rank of the deployment on every node");
  down->add_flag("--no-clean", *no_clean,
                 "only stop the ranks; skip `node clean` (stale runtimes, leaked shm)");
  down->callback([&ctx, no_clean] {
    DeployContext dc{ctx.global.state_dir, ctx.global.cluster_file, false,
                     ctx.global.json ? &std::cerr : &std::cout};  // --json: stdout is one object
    if (Status s = deploy_down(dc, !*no_clean); !s.ok()) {
      print_error("down", s.error().what());
      ctx.exit_code = kExitFailed;
      return;
    }
    if (ctx.global.json) std::cout << json_text(nlohmann::json{{"ok", true}, {"verb", "down"}}, -1) << "\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace spk::cli
