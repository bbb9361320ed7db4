// One setup_<verb> per cli/<verb>.cpp. main.cpp calls each once; each registers its subcommand.
#pragma once

#include "cli/context.h"

namespace spk::cli {

void setup_recipe(CLI::App& app, Context& ctx);
void setup_cluster(CLI::App& app, Context& ctx);
void setup_plan(CLI::App& app, Context& ctx);
void setup_dev(CLI::App& app, Context& ctx);
void setup_dev_bench_model(CLI::App& app, Context& ctx);  // after setup_dev: adds `dev bench-model`
void setup_dev_knobs(CLI::App& app, Context& ctx);        // after setup_dev: adds `dev knobs`
void setup_dev_quantize(CLI::App& app, Context& ctx);     // after setup_dev: adds `dev quantize`
void setup_generate(CLI::App& app, Context& ctx);
void setup_fabric(CLI::App& app, Context& ctx);
void setup_node(CLI::App& app, Context& ctx);
void setup_runtime(CLI::App& app, Context& ctx);
void setup_gmu(CLI::App& app, Context& ctx);
void setup_bench(CLI::App& app, Context& ctx);
void setup_up(CLI::App& app, Context& ctx);  // up, switch, restart
void setup_down(CLI::App& app, Context& ctx);
void setup_status(CLI::App& app, Context& ctx);
void setup_logs(CLI::App& app, Context& ctx);
void setup_supervise(CLI::App& app, Context& ctx);  // hidden: the supervisor daemon
void setup_stage(CLI::App& app, Context& ctx);

}  // namespace spk::cli
