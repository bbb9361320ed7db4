// `sparkctl fabric`: placeholder until issue #9 lands.
#include <CLI/CLI.hpp>

#include "cli/verbs.h"

namespace spk::cli {

void setup_fabric(CLI::App& app, Context& ctx) {
  add_not_built(app, ctx, "fabric", "RoCE fabric show/setup/doctor", "issue #9");
}

}  // namespace spk::cli
