// `sparkctl dev knobs`: the kernel knobs (kernels/knobs.h), their defaults, ranges and the values this
// process sees. Knobs are for measuring; none changes results.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "kernels/knobs.h"

namespace spk::cli {

void setup_dev_knobs(CLI::App& app, Context& ctx) {
  CLI::App* dev = app.get_subcommand("dev");
  auto* sub = dev->add_subcommand("knobs", "the SPARKCTL_* kernel knobs: default, range, value now, help");
  sub->callback([&ctx] {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < knobs().size(); ++i) {
      const KnobInfo& k = knobs()[i];
      const char* env = std::getenv(k.name);
      rows.push_back({{"name", k.name},
                      {"default", std::to_string(k.def)},
                      {"range", std::to_string(k.lo) + ".." + std::to_string(k.hi)},
                      {"value", std::to_string(knob(static_cast<Knob>(i)))},
                      {"set", env != nullptr},
                      {"help", k.help}});
    }
    for (const WordKnobInfo& k : word_knobs()) {
      const std::string v = word_knob(k.name);
      const std::string choices = k.choices;
      const std::string def = choices.substr(0, choices.find('|'));
      rows.push_back({{"name", k.name},
                      {"default", def},
                      {"range", choices},
                      {"value", v.empty() ? def : v},
                      {"set", !v.empty()},
                      {"help", k.help}});
    }
    if (ctx.global.json) {
      std::cout << json_text(rows) << "\n";
      return;
    }
    std::printf("%-30s %-8s %-16s %-8s %s\n", "knob", "default", "range", "value", "help");
    for (const auto& r : rows)
      std::printf("%-30s %-8s %-16s %-8s %s\n", r["name"].get<std::string>().c_str(),
                  r["default"].get<std::string>().c_str(), r["range"].get<std::string>().c_str(),
                  (r["value"].get<std::string>() + (r["set"].get<bool>() ? "*" : "")).c_str(),
                  r["help"].get<std::string>().c_str());
    std::printf("(* set in the environment)\n");
  });
}

}  // namespace spk::cli
