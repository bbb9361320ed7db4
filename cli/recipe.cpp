// `sparkctl recipe list | show NAME | validate FILE`: the lane recipes this binary knows (overrides in
// $SPARKCTL_RECIPES_DIR and <state-dir>/recipes first, then the embedded ones) and their validation.
// validate exits 0 when the file is valid (warnings and "not honoured by this build" notes allowed), 1 on
// any error; one diagnostic per line: file:line:column: key: message (fix).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/json_out.h"
#include "cli/recipe_yaml.h"
#include "cli/verbs.h"
#include "kernels/base/fs.h"
#include "orchestrator/deploy/memory_fit.h"
#include "orchestrator/deploy/stored_gmu.h"
#include "orchestrator/inventory.h"
#include "orchestrator/plan.h"
#include "orchestrator/transport/local_exec.h"
#include "recipes/recipe_store.h"

namespace spk::cli {
namespace {

struct RecipeOptions {
  std::string name;     // show: lane name or file
  std::string file;     // validate: file path or lane name
  bool strict = false;  // validate: exit 1 when `up` would refuse the lane on this build
  std::string to;       // export: target dir (default <state-dir>/recipes)
  bool force = false;   // export: overwrite
};

// Would `up` run this lane on this build? Not honoured settings, a cluster it cannot fit, or a memory
// plan the runtime's planner refuses (checked where the model is on this machine) say no.
struct Runnable {
  bool yes = true;
  std::vector<std::string> why;  // reasons for no
  MemoryFit fit;
  std::string knobs;
  std::vector<std::string> argv0;  // rank 0's runtime argv (the knobs' values)
};

Runnable runnable_here(const Context& ctx, const Recipe& r) {
  Runnable out;
  ClusterLoad cl = load_cluster_or_local(ctx.global.cluster_file, ctx.global.state_dir);
  if (!cl.cluster) {
    out.yes = false;
    out.why.push_back("the inventory " + ctx.global.cluster_file + " is invalid (sparkctl cluster show)");
    return out;
  }
  auto plan = build_plan(r, *cl.cluster);
  if (!plan) {
    out.yes = false;
    out.why.push_back(plan.error().what());
    return out;
  }
  for (const auto& u : plan->unhonoured) {
    out.yes = false;
    out.why.push_back(u.key + ": " + u.value + " is not honoured by this build");
  }
  if (!out.yes) return out;
  if (auto note = apply_stored_gmu(ctx.global.state_dir, r, *plan)) plan->notes.push_back(*note);
  out.argv0 = plan->ranks.front().process.argv;
  if (auto self = self_executable())
    out.fit = check_memory_fit_here(*self, ctx.global.state_dir + "/plan", r, *plan, *cl.cluster);
  if (out.fit.refused()) {
    out.yes = false;
    out.knobs = memory_knobs(out.argv0);
    for (const auto& f : out.fit.ranks)
      if (f.status != "fits" && f.status != "skipped")
        out.why.push_back("rank " + std::to_string(f.rank) + " on " + f.node + " does not fit in memory");
  }
  return out;
}

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
    // YAML that `recipe validate` accepts unchanged (save it, edit it, pass the path to up).
    std::cout << "# " << l.recipe->name << " resolved (defaults filled in) from " << l.recipe->source << "\n";
    std::cout << recipe_yaml(to_json(*l.recipe));
    for (const auto& d : l.diagnostics) std::cout << "# " << d.str() << "\n";
  }
  return kExitOk;
}

// `recipe export NAME [--to DIR] [--force]`: the lane's own text (comments kept) copied to
// <state-dir>/recipes/NAME.yaml, which lookups by name then find before the embedded one.
int run_export(Context& ctx, const RecipeOptions& o) {
  auto src = find_recipe_source(o.name, recipe_dirs(ctx.global.state_dir));
  if (!src) {
    print_error("recipe export", src.error().what());
    return kExitFailed;
  }
  const std::string dir = o.to.empty() ? ctx.global.state_dir + "/recipes" : o.to;
  const std::string path = dir + "/" + src->name + ".yaml";
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !o.force) {
    print_error("recipe export",
                path + " exists (edit it, or pass --force to overwrite it with " + src->origin + "'s text)");
    return kExitFailed;
  }
  std::filesystem::create_directories(dir, ec);
  if (Status s = write_file_atomic(path, src->text); !s.ok()) {
    print_error("recipe export", s.error().what());
    return kExitFailed;
  }
  if (ctx.global.json)
    std::cout << json_text(
                     nlohmann::json{{"ok", true}, {"lane", src->name}, {"from", src->origin}, {"path", path}},
                     -1)
              << "\n";
  else
    std::cout << src->name << ": copied from " << src->origin << " to " << path << "\n"
              << (o.to.empty() ? "edit it there: `sparkctl up " + src->name + "` now uses it"
                               : "edit it, then `sparkctl up " + path + "`")
              << "\n";
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
  Runnable run;
  if (errors == 0 && l.recipe)
    run = runnable_here(ctx, *l.recipe);
  else
    run.yes = false, run.why.push_back("the recipe is invalid");
  if (ctx.global.json) {
    nlohmann::json fit = nlohmann::json::array();
    for (const auto& f : run.fit.ranks)
      fit.push_back({{"rank", f.rank}, {"node", f.node}, {"status", f.status}, {"detail", f.detail}});
    std::cout << json_text(nlohmann::json{{"file", file},
                                          {"valid", errors == 0},
                                          {"errors", errors},
                                          {"warnings", warnings},
                                          {"not_honoured", notes},
                                          {"diagnostics", diags_json(l.diagnostics)},
                                          {"runnable", run.yes},
                                          {"not_runnable_because", run.why},
                                          {"memory_fit", fit}})
              << "\n";
  } else {
    for (const auto& d : l.diagnostics) std::cout << d.str() << "\n";
    if (!run.fit.ranks.empty())
      std::cout << "memory fit (runtime --dry-run-memory):\n" << run.fit.text(run.argv0);
    std::cout << file << ": " << (errors ? "invalid" : "valid") << " (" << errors << " error(s), " << warnings
              << " warning(s), " << notes << " not honoured by this build)\n";
    for (const auto& w : run.why) std::cout << "  not runnable: " << w << "\n";
    std::cout << "runnable by this build: " << (run.yes ? "yes" : "no") << "\n";
  }
  if (errors) return kExitFailed;
  return o.strict && !run.yes ? kExitFailed : kExitOk;
}

}  // namespace

void setup_recipe(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<RecipeOptions>();
  auto* recipe = app.add_subcommand("recipe", "list, show, export and validate lane recipes");
  recipe->require_subcommand(1);
  auto* list =
      recipe->add_subcommand("list", "every known lane: name, description, model, TP, nodes, source");
  list->callback([&ctx] { ctx.exit_code = run_list(ctx); });
  auto* show = recipe->add_subcommand(
      "show", "the resolved recipe as YAML that validate accepts (defaults filled in) and its notes");
  show->add_option("NAME", o->name, "lane name (searched in overrides, then embedded) or a .yaml path")
      ->required();
  show->callback([&ctx, o] { ctx.exit_code = run_show(ctx, *o); });
  auto* exp = recipe->add_subcommand(
      "export", "copy a lane (built-in or not) into <state-dir>/recipes for editing; up NAME then uses it");
  exp->add_option("NAME", o->name, "lane name")->required();
  exp->add_option("--to", o->to, "write into this directory instead");
  exp->add_flag("--force", o->force, "overwrite an existing copy");
  exp->callback([&ctx, o] { ctx.exit_code = run_export(ctx, *o); });
  auto* validate = recipe->add_subcommand(
      "validate", "check a recipe file; ends with `runnable by this build: yes|no`; exit 0 valid, 1 invalid");
  validate->add_option("FILE", o->file, "recipe .yaml path (or a lane name)")->required();
  validate->add_flag("--strict", o->strict,
                     "exit 1 also when the lane is valid but `up` would refuse it on this build (not "
                     "honoured settings, no fit on --cluster, memory planner shortfall)");
  validate->callback([&ctx, o] { ctx.exit_code = run_validate(ctx, *o); });
}

}  // namespace spk::cli
