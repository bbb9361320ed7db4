// sparkctl entry point: global options, verb wiring, logging. Verbs live in cli/<verb>.cpp.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/build_info.h"
#include "cli/verb_suggest.h"
#include "cli/verbs.h"

namespace {

std::string default_state_dir() {
  if (const char* e = std::getenv("SPARKCTL_STATE_DIR"); e && *e) return e;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) return std::string(xdg) + "/sparkctl";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/state/sparkctl";
}

}  // namespace

int main(int argc, char** argv) {
  spk::cli::Context ctx;
  ctx.global.state_dir = default_state_dir();

  CLI::App app{"sparkctl: bring a large language model up across a few GPU nodes and keep it serving"};
  app.set_version_flag("--version",
                       std::string("sparkctl ") + SPARKCTL_VERSION + " (build " + SPARKCTL_BUILD_HASH + ")");
  app.require_subcommand(1);
  app.fallthrough();
  app.option_defaults()->always_capture_default();

  app.add_option("--cluster", ctx.global.cluster_file,
                 "cluster inventory YAML (default: the implicit one-node `local` cluster)")
      ->envname("SPARKCTL_CLUSTER");
  app.add_option("--state-dir", ctx.global.state_dir, "where pidfiles, logs and stored choices live")
      ->envname("SPARKCTL_STATE_DIR");
  app.add_option("-v,--log-level", ctx.global.log_level, "trace|debug|info|warn|error|off")
      ->envname("SPARKCTL_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_flag("--json", ctx.global.json, "machine-readable output on stdout");

  app.parse_complete_callback([&ctx] {
    spk::cli::set_json_errors(ctx.global.json);
    spdlog::set_level(spdlog::level::from_str(ctx.global.log_level));
    spdlog::set_pattern("%^[%H:%M:%S.%e] [%l]%$ %v");
  });

  using namespace spk::cli;
  setup_recipe(app, ctx);
  setup_cluster(app, ctx);
  setup_plan(app, ctx);
  setup_dev(app, ctx);
  setup_dev_bench_model(app, ctx);
  setup_dev_knobs(app, ctx);
  setup_dev_quantize(app, ctx);
  setup_generate(app, ctx);
  setup_fabric(app, ctx);
  setup_node(app, ctx);
  setup_runtime(app, ctx);
  setup_gmu(app, ctx);
  setup_bench(app, ctx);
  setup_up(app, ctx);
  setup_down(app, ctx);
  setup_status(app, ctx);
  setup_logs(app, ctx);
  setup_supervise(app, ctx);
  setup_stage(app, ctx);

  const bool json_asked = wants_json(argc, argv);
  set_json_errors(json_asked);
  std::vector<std::string> verbs;
  for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; }))
    verbs.push_back(sub->get_name());
  // An unknown verb: say which one was meant (`ps` -> status, `run` -> up, typos by edit distance).
  if (auto word = first_verb_word(argc, argv); word && !is_known(*word, verbs)) {
    print_error_plain("unknown verb '" + *word + "'" + suggest_verb(*word, verbs), json_asked);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    if (json_asked) {
      std::cout << nlohmann::json{{"version", SPARKCTL_VERSION}, {"build", SPARKCTL_BUILD_HASH}}.dump()
                << "\n";
      return 0;
    }
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A bare group (`sparkctl recipe`) prints its help: what it can do is the answer.
    for (auto* sub : app.get_subcommands([](CLI::App*) { return true; }))
      if (sub->parsed() && !sub->get_subcommands([](CLI::App*) { return true; }).empty() &&
          sub->get_subcommands().empty() && dynamic_cast<const CLI::RequiredError*>(&e)) {
        std::cout << sub->help();
        return kExitUsage;  // it printed what to type; nothing ran
      }
    if (json_asked) {
      print_error_plain(e.what(), true);
      return kExitUsage;
    }
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  return ctx.exit_code;
}
