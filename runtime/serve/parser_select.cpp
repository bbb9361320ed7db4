// Parser selection by flag, model_type and chat template (parser_select.h).
#include "runtime/serve/parser_select.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"

namespace spk::rt {

namespace {

bool has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string deepseek_format(std::string_view tpl) {
  // V3 writes tool['type'] + '<｜tool▁sep｜>' + name; V3.1 writes name + '<｜tool▁sep｜>'.
  if (has(tpl, "tool▁sep") && !has(tpl, "tool['type'] + '<｜tool▁sep｜>'") &&
      !has(tpl, "function<｜tool▁sep｜>"))
    return "deepseek_v31";
  return "deepseek_v3";
}

}  // namespace

OutputParsing default_parsers(std::string_view model_type, std::string_view tpl) {
  OutputParsing p;
  const bool think = has(tpl, "<think>");
  if (model_type == "qwen3" || model_type == "qwen3_moe" || model_type == "qwen3_next") {
    p.tool_call_parser = has(tpl, "<function=") ? "qwen3_coder" : "hermes";
    if (think || tpl.empty()) p.reasoning_parser = "qwen3";
  } else if (model_type == "qwen2" || model_type == "qwen2_moe") {
    p.tool_call_parser = "hermes";
  } else if (model_type == "minimax_m2" || model_type == "minimax") {
    p.tool_call_parser = "minimax_m2";
    p.reasoning_parser = "minimax";
  } else if (model_type == "deepseek_v3" || model_type == "deepseek_v32") {
    p.tool_call_parser = deepseek_format(tpl);
    p.reasoning_parser = "deepseek_r1";
  } else {
    if (has(tpl, "<minimax:tool_call>"))
      p.tool_call_parser = "minimax_m2";
    else if (has(tpl, "tool▁calls▁begin"))
      p.tool_call_parser = deepseek_format(tpl);
    else if (has(tpl, "<tool_call>"))
      p.tool_call_parser = has(tpl, "<function=") ? "qwen3_coder" : "hermes";
    if (think) p.reasoning_parser = p.tool_call_parser == "minimax_m2" ? "minimax" : "qwen3";
  }
  return p;
}

Result<OutputParsing> select_parsers(const std::string& tool_flag, const std::string& reasoning_flag,
                                     std::string_view model_type, std::string_view tpl) {
  OutputParsing d = default_parsers(model_type, tpl);
  OutputParsing p;
  if (tool_flag == "auto") {
    p.tool_call_parser = d.tool_call_parser;
  } else if (tool_flag != "none") {
    const auto& names = tool_parser_names();
    if (std::find(names.begin(), names.end(), tool_flag) == names.end())
      return make_error("--tool-call-parser " + tool_flag + " is not a tool-call parser",
                        "use one of: " + join_names(names) + ", auto (by model), none");
    p.tool_call_parser = tool_flag;
  }
  if (reasoning_flag == "auto") {
    p.reasoning_parser = d.reasoning_parser;
  } else if (reasoning_flag != "none") {
    if (!is_reasoning_parser(reasoning_flag))
      return make_error("--reasoning-parser " + reasoning_flag + " is not a reasoning parser",
                        "use one of: " + join_names(reasoning_parser_names()) + ", auto (by model), none");
    p.reasoning_parser = reasoning_flag;
  }
  return p;
}

std::string read_model_type(const std::string& model_dir) {
  auto text = read_file(model_dir + "/config.json");
  if (!text.ok()) return {};
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};
  if (j.contains("text_config") && j["text_config"].is_object() && j["text_config"].contains("model_type") &&
      j["text_config"]["model_type"].is_string())
    return j["text_config"]["model_type"].get<std::string>();
  return j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>()
                                                                 : std::string();
}

}  // namespace spk::rt
