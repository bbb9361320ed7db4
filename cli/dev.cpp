// `sparkctl dev`: placeholder until issue #3 lands.
#include <CLI/CLI.hpp>

#include "cli/verbs.h"

namespace spk::cli {

void setup_dev(CLI::App& app, Context& ctx) {
  add_not_built(app, ctx, "dev", "developer tools (synth-model)", "issue #3");
}

}  // namespace spk::cli
