// Parse and validate one recipe. Every problem is collected (errors, warnings, and the settings this
// build cannot honour), each naming file:line:column, the key, the bad value and the fix.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipes/diagnostic.h"
#include "recipes/recipe.h"
#include "recipes/yaml_reader.h"

namespace spk {

struct RecipeLoad {
  std::optional<Recipe> recipe;         // set only when there is no error
  std::vector<Diagnostic> diagnostics;  // in file order of discovery: errors, warnings, not-honoured notes
  [[nodiscard]] bool ok() const { return recipe.has_value(); }
};

// `file` names the document in diagnostics ("lane-a.yaml" or the path given); `source` is recorded in
// the recipe ("embedded" or the path).
RecipeLoad load_recipe(std::string_view text, const std::string& file, const std::string& source,
                       const YamlLimits& limits = {});

// Reads `path` (size-capped) and loads it; a read failure is one error diagnostic.
RecipeLoad load_recipe_file(const std::string& path, const YamlLimits& limits = {});

}  // namespace spk
