// `sparkctl cluster`: placeholder until issue #2 lands.
#include <CLI/CLI.hpp>

#include "cli/verbs.h"

namespace spk::cli {

void setup_cluster(CLI::App& app, Context& ctx) {
  add_not_built(app, ctx, "cluster", "show the cluster inventory", "issue #2");
}

}  // namespace spk::cli
