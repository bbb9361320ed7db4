// `sparkctl recipe`: placeholder until issue #2 lands.
#include <CLI/CLI.hpp>

#include "cli/verbs.h"

namespace spk::cli {

void setup_recipe(CLI::App& app, Context& ctx) {
  add_not_built(app, ctx, "recipe", "list, show and validate lane recipes", "issue #2");
}

}  // namespace spk::cli
