// `sparkctl generate`: placeholder until issue #3 lands.
#include <CLI/CLI.hpp>

#include "cli/verbs.h"

namespace spk::cli {

void setup_generate(CLI::App& app, Context& ctx) {
  add_not_built(app, ctx, "generate", "generate text with the embedded runtime", "issue #3");
}

}  // namespace spk::cli
