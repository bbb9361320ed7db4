// `recipe show`'s YAML: the resolved recipe (defaults filled in) written so that `recipe validate`
// accepts it unchanged — only recipe keys (no "source", no model.source, no nulls), block mappings,
// plain scalars where YAML reads them back as the same string, JSON-quoted otherwise.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace spk::cli {

// `j` is to_json(Recipe); returns the YAML document.
std::string recipe_yaml(const nlohmann::json& j);

}  // namespace spk::cli
