// `sparkctl recipe list | show NAME | validate FILE`: the lane recipes this binary knows (overrides in
// $SPARKCTL_RECIPES_DIR and <state-dir>/recipes first, then the embedded ones) and their validation.
// validate exits 0 when the file is valid (warnings and "not honoured by this build" notes allowed), 1 on
// any error; one diagnostic per line: file:line:column: key: message (fix).
#include <CLI/CLI.hpp>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "recipes/recipe_store.h"

namespace spk::cli {
namespace {

struct RecipeOptions {
  std::string name;  // show: lane name or file
  std::string file;  // validate: file path or lane name
};

nlohmann::json diag_json(const Diagnostic& d) {
  return {{"severity", severity_name(d.severity)},
          {"file", d.file},
          {"line", d.pos.line},
          {"column", d.pos.column},
          {"key", d.key},
          {"message", d.message},
          {"fix", d.fix},
          {"text", d.str()}};
}

nlohmann::json diags_json(const std::vector<Diagnostic>& ds) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& d : ds) a.push_back(diag_json(d));
  return a;
}

std::string model_label(const Recipe& r) {
  if (r.model.source == ModelSource::synthetic)
    return "synthetic " + r.model.synthetic.arch + "/" + r.model.synthetic.preset;
  return r.model.id;
}

int run_list(Context& ctx) {
  auto sources = list_recipe_sources(recipe_dirs(ctx.global.state_dir));
  nlohmann::json out = nlohmann::json::array();
  std::ostringstream table;
  table << std::left << std::setw(12) << "NAME" << std::setw(52) << "DESCRIPTION" << std::setw(30) << "MODEL"
        << std::setw(4) << "TP" << std::setw(7) << "NODES"
        << "SOURCE\n";
  int bad = 0;
  for (const auto& s : sources) {
    RecipeLoad l = load_recipe(s.text, s.file, s.origin);
    if (!l.ok()) {
      ++bad;
      out.push_back({{"name", s.name},
                     {"source", s.origin},
                     {"valid", false},
                     {"diagnostics", diags_json(l.diagnostics)}});
      table << std::setw(12) << s.name << std::setw(52)
            << "(invalid: run `sparkctl recipe validate " + s.file + "`)" << std::setw(30) << "-"
            << std::setw(4) << "-" << std::setw(7) << "-" << s.origin << "\n";
      continue;
    }
    const Recipe& r = *l.recipe;
    out.push_back({{"name", r.name},
                   {"description", r.description},
                   {"model", model_label(r)},
                   {"tensor_parallel", r.tensor_parallel},
                   {"nodes", r.nodes},
                   {"source", s.origin},
                   {"valid", true}});
    table << std::setw(12) << s.name << std::setw(52) << r.description << std::setw(30) << model_label(r)
          << std::setw(4) << r.tensor_parallel << std::setw(7) << r.nodes << s.origin << "\n";
  }
  if (ctx.global.json)
    std::cout << json_text(out) << "\n";
  else
    std::cout << table.str();
  return bad ? kExitFailed : kExitOk;
}

// Prints dotted `key: value` lines of a JSON object, in the order to_json() wrote them.
void print_flat(std::ostream& os, const nlohmann::json& j, const std::string& prefix) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object() && !it->empty())
      print_flat(os, *it, key);
    else
      os << key << ": " << (it->is_string() ? it->get<std::string>() : json_text(*it, -1)) << "\n";
  }
}

int run_show(Context& ctx, const RecipeOptions& o) {
  auto loaded = load_named_recipe(o.name, recipe_dirs(ctx.global.state_dir));
  if (!loaded) {
    print_error("recipe show", loaded.error().what());
    return kExitFailed;
  }
  const RecipeLoad& l = *loaded;
  if (!l.ok()) {
    for (const auto& d : l.diagnostics) std::cerr << d.str() << "\n";
    print_error("recipe show", o.name + " is invalid (run `sparkctl recipe validate`)");
    return kExitFailed;
  }
  if (ctx.global.json) {
    nlohmann::json j = to_json(*l.recipe);
    j["diagnostics"] = diags_json(l.diagnostics);
    std::cout << json_text(j) << "\n";
  } else {
    print_flat(std::cout, to_json(*l.recipe), "");
    for (const auto& d : l.diagnostics) std::cout << "# " << d.str() << "\n";
  }
  return kExitOk;
}

int run_validate(Context& ctx, const RecipeOptions& o) {
  auto src = find_recipe_source(o.file, recipe_dirs(ctx.global.state_dir));
  RecipeLoad l;
  if (src) {
    l = load_recipe(src->text, src->file, src->origin);
  } else {
    l.diagnostics.push_back(
        Diagnostic{Severity::error, o.file, {}, "", src.error().message, src.error().fix});
  }
  int errors = count(l.diagnostics, Severity::error);
  int warnings = count(l.diagnostics, Severity::warning);
  int notes = count(l.diagnostics, Severity::not_honoured);
  std::string file = src ? src->file : o.file;
  if (ctx.global.json) {
    std::cout << json_text(nlohmann::json{{"file", file},
                                          {"valid", errors == 0},
                                          {"errors", errors},
                                          {"warnings", warnings},
                                          {"not_honoured", notes},
                                          {"diagnostics", diags_json(l.diagnostics)}})
              << "\n";
  } else {
    for (const auto& d : l.diagnostics) std::cout << d.str() << "\n";
    std::cout << file << ": " << (errors ? "invalid" : "valid") << " (" << errors << " error(s), " << warnings
              << " warning(s), " << notes << " not honoured by this build)\n";
  }
  return errors ? kExitFailed : kExitOk;
}

}  // namespace

void setup_recipe(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<RecipeOptions>();
  auto* recipe = app.add_subcommand("recipe", "list, show and validate lane recipes");
  recipe->require_subcommand(1);
  auto* list =
      recipe->add_subcommand("list", "every known lane: name, description, model, TP, nodes, source");
  list->callback([&ctx] { ctx.exit_code = run_list(ctx); });
  auto* show = recipe->add_subcommand("show", "the resolved recipe (defaults filled in) and its notes");
  show->add_option("NAME", o->name, "lane name (searched in overrides, then embedded) or a .yaml path")
      ->required();
  show->callback([&ctx, o] { ctx.exit_code = run_show(ctx, *o); });
  auto* validate = recipe->add_subcommand("validate", "check a recipe file; exit 0 valid, 1 invalid");
  validate->add_option("FILE", o->file, "recipe .yaml path (or a lane name)")->required();
  validate->callback([&ctx, o] { ctx.exit_code = run_validate(ctx, *o); });
}

}  // namespace spk::cli
