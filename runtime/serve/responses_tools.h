// /v1/responses `tools`: what the chat template is offered and how a parsed call maps back.
//
// - `function` tools pass as they are.
// - `namespace` tools (Codex sends its sub-agent tools so: {"type":"namespace","name","description",
//   "tools":[function...]}) are flattened: each nested function is offered as `<namespace>__<name>`, its
//   description prefixed with the namespace's. A parsed call of that flat name comes back as a
//   function_call item with `name` and `namespace` (OpenAI's shape); a function_call input item that
//   carries a namespace renders under the same flat name. A flat name that collides with another tool's
//   is a 400 naming both, so the way back is never ambiguous.
// - Hosted tools the server cannot run (web_search*, file_search, code_interpreter, image_generation,
//   computer_use*, mcp, local_shell, shell, apply_patch, tool_search) are not offered to the model: the
//   turn goes on without them (vLLM likewise offers a built-in tool only when it has a server for it),
//   one log line says so and the response lists them under `dropped_tools` (index, type, reason).
// - `custom` tools (freeform input, optionally a grammar) are refused by name: their calls are not
//   function calls and a grammar needs constrained decoding, not built yet. Any other type is refused
//   naming it.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/serve/front_fields.h"

namespace spk::rt {

struct ToolOrigin {
  std::string ns;    // "" for a top-level function
  std::string name;  // the name within its namespace
};

struct ResponsesTools {
  nlohmann::ordered_json chat_tools = nlohmann::ordered_json::array();  // OpenAI chat form, flattened
  std::vector<std::string> names;                                       // the flat names offered, in order
  std::map<std::string, ToolOrigin> origins;         // flat name -> where it came from (namespaced ones only)
  nlohmann::json dropped = nlohmann::json::array();  // [{index, type, reason}] hosted tools left out

  // The namespace and name of a parsed call's flat name (no namespace when it is not a namespaced one).
  [[nodiscard]] ToolOrigin origin_of(const std::string& flat) const;
};

// The flat name a namespaced function is offered under.
std::string flat_tool_name(const std::string& ns, const std::string& name);

// Reads `tools` (an array) into `out`; false with c.err set on a refusal.
bool map_responses_tools(FieldChecker& c, const nlohmann::ordered_json& tools, ResponsesTools& out);

}  // namespace spk::rt
