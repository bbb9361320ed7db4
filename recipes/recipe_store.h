// Where recipes come from. Lookup by name searches, in order: $SPARKCTL_RECIPES_DIR, the state dir's
// recipes/, then the files embedded in the binary at build time (so a pushed binary is self-contained).
// An argument that names a file (contains '/' or ends in .yaml) is loaded from that path directly.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "recipes/recipe_loader.h"

namespace spk {

struct EmbeddedFile {
  const char* name;  // "lane-a.yaml"
  const char* data;
  size_t size;
};

// Generated from recipes/*.yaml (recipes/embed_recipes.cmake).
std::span<const EmbeddedFile> embedded_recipe_files();

struct RecipeSource {
  std::string name;    // lane name = file stem
  std::string origin;  // "embedded" or the file path
  std::string file;    // the name diagnostics use: "lane-a.yaml" or the path
  std::string text;
};

// Override directories in search order (only those that are set; they need not exist).
std::vector<std::string> recipe_dirs(const std::string& state_dir);

// Every recipe by name, overrides first; a name found twice keeps the first (the override).
std::vector<RecipeSource> list_recipe_sources(const std::vector<std::string>& dirs);

// One recipe by name or path. Error names what was searched and how to fix it.
Result<RecipeSource> find_recipe_source(const std::string& name_or_path,
                                        const std::vector<std::string>& dirs);

// find_recipe_source + load_recipe.
Result<RecipeLoad> load_named_recipe(const std::string& name_or_path, const std::vector<std::string>& dirs);

}  // namespace spk
