// Recipes YAML through the loader, then the `--json recipe validate` output (diagnostics and the
// resolved recipe) serialized as the CLI does.
#include <nlohmann/json.hpp>
#include <string_view>

#include "recipes/recipe_loader.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  spk::RecipeLoad l = spk::load_recipe(text, "fuzz.yaml", "fuzz");
  nlohmann::json j = nlohmann::json::array();
  for (const auto& d : l.diagnostics)
    j.push_back({{"severity", spk::severity_name(d.severity)},
                 {"file", d.file},
                 {"line", d.pos.line},
                 {"column", d.pos.column},
                 {"key", d.key},
                 {"message", d.message},
                 {"fix", d.fix},
                 {"text", d.str()}});
  if (l.recipe) j.push_back(spk::to_json(*l.recipe));
  (void)j.dump();  // throws (and so aborts the run) on ill-formed UTF-8
  return 0;
}
