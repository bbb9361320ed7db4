// `sparkctl plan`: placeholder until issue #2 lands.
#include <CLI/CLI.hpp>

#include "cli/verbs.h"

namespace spk::cli {

void setup_plan(CLI::App& app, Context& ctx) {
  add_not_built(app, ctx, "plan", "print the steps and per-node argv/env that up would run", "issue #2");
}

}  // namespace spk::cli
