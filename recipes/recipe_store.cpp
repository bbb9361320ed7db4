#include "recipes/recipe_store.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <system_error>

#include "recipes/input_text.h"
#include "recipes/yaml_reader.h"

namespace spk {

namespace fs = std::filesystem;

namespace {

bool names_file(const std::string& s) { return s.find('/') != std::string::npos || s.ends_with(".yaml"); }

std::string stem_of(const std::string& file) {
  std::string s = file.substr(file.find_last_of('/') + 1);
  return s.ends_with(".yaml") ? s.substr(0, s.size() - 5) : s;
}

}  // namespace

std::vector<std::string> recipe_dirs(const std::string& state_dir) {
  std::vector<std::string> out;
  if (const char* e = std::getenv("SPARKCTL_RECIPES_DIR"); e && *e) out.emplace_back(e);
  if (!state_dir.empty()) out.push_back(state_dir + "/recipes");
  return out;
}

std::vector<RecipeSource> list_recipe_sources(const std::vector<std::string>& dirs) {
  std::vector<RecipeSource> out;
  std::set<std::string> seen;
  for (const auto& d : dirs) {
    std::error_code ec;
    std::vector<std::string> files;
    for (auto it = fs::directory_iterator(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".yaml") files.push_back(it->path().string());
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      auto text = read_input_file(f, YamlLimits{}.max_bytes);
      if (!text || !seen.insert(stem_of(f)).second) continue;
      out.push_back({stem_of(f), f, f, std::move(*text)});
    }
  }
  for (const auto& e : embedded_recipe_files()) {
    std::string name = stem_of(e.name);
    if (!seen.insert(name).second) continue;
    out.push_back({name, "embedded", e.name, std::string(e.data, e.size)});
  }
  return out;
}

Result<RecipeSource> find_recipe_source(const std::string& name_or_path,
                                        const std::vector<std::string>& dirs) {
  if (names_file(name_or_path)) {
    SPK_ASSIGN(std::string text, read_input_file(name_or_path, YamlLimits{}.max_bytes));
    return RecipeSource{stem_of(name_or_path), name_or_path, name_or_path, std::move(text)};
  }
  for (const auto& d : dirs) {
    std::string f = d + "/" + name_or_path + ".yaml";
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) continue;
    SPK_ASSIGN(std::string text, read_input_file(f, YamlLimits{}.max_bytes));
    return RecipeSource{name_or_path, f, f, std::move(text)};
  }
  for (const auto& e : embedded_recipe_files())
    if (stem_of(e.name) == name_or_path)
      return RecipeSource{name_or_path, "embedded", e.name, std::string(e.data, e.size)};
  std::string known;
  for (auto& s : list_recipe_sources(dirs)) known += (known.empty() ? "" : ", ") + s.name;
  std::string where;
  for (auto& d : dirs) where += d + ", ";
  return make_error(
      "no recipe named '" + name_or_path + "' in " + where + "or the embedded set (known: " + known + ")",
      "run `sparkctl recipe list`, or pass a file path");
}

Result<RecipeLoad> load_named_recipe(const std::string& name_or_path, const std::vector<std::string>& dirs) {
  SPK_ASSIGN(RecipeSource src, find_recipe_source(name_or_path, dirs));
  // Directory overrides and embedded text go through the same caps as user files.
  return load_recipe(src.text, src.file, src.origin);
}

}  // namespace spk
