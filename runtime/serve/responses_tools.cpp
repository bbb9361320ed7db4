// /v1/responses tools -> the chat template's tools (responses_tools.h).
#include "runtime/serve/responses_tools.h"

#include <array>
#include <string_view>

namespace spk::rt {

namespace {

using ojson = nlohmann::ordered_json;

std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// Built-in tools of the Responses API that OpenAI's servers run (or whose calls are not function calls).
bool is_hosted(const std::string& type) {
  static constexpr std::array<std::string_view, 10> kHosted = {
      "file_search", "code_interpreter", "image_generation", "mcp",          "local_shell",
      "shell",       "apply_patch",      "tool_search",      "computer_use", "computer_use_preview"};
  for (auto h : kHosted)
    if (type == h) return true;
  return type.rfind("web_search", 0) == 0;  // web_search, web_search_preview and their dated variants
}

// One function tool (top level or nested in a namespace) in chat form.
bool map_function(FieldChecker& c, const ojson& t, const std::string& tp, const std::string& ns,
                  const std::string& ns_description, ResponsesTools& out) {
  std::string name, description;
  if (!c.string(t, "name", tp + ".name", name) || name.empty()) return c.fail(tp + ".name", "is required");
  c.string(t, "description", tp + ".description", description);
  bool strict = false;
  c.boolean(t, "strict", tp + ".strict", strict);
  const ojson* params = c.object(t, "parameters", tp + ".parameters");
  if (c.err) return false;
  const std::string flat = ns.empty() ? name : flat_tool_name(ns, name);
  for (size_t i = 0; i < out.names.size(); ++i)
    if (out.names[i] == flat) {
      const ToolOrigin o = out.origin_of(flat);
      return c.fail(tp + ".name",
                    "'" + flat + "' is offered twice (" +
                        (o.ns.empty() ? "a function" : "namespace '" + o.ns + "', '" + o.name + "'") +
                        " has that name already; namespaced tools are offered as "
                        "<namespace>__<name>): rename one");
    }
  if (!ns_description.empty()) description = ns_description + (description.empty() ? "" : "\n" + description);
  ojson fn = {{"name", flat}};
  if (!description.empty()) fn["description"] = description;
  fn["parameters"] = params ? *params : ojson{{"type", "object"}, {"properties", ojson::object()}};
  out.chat_tools.push_back({{"type", "function"}, {"function", fn}});
  out.names.push_back(flat);
  if (!ns.empty()) out.origins[flat] = ToolOrigin{ns, name};
  return true;
}

bool refuse_custom(FieldChecker& c, const std::string& tp) {
  return c.fail(tp + ".type",
                "tool type 'custom' (freeform input) is not supported by this server: its calls are not "
                "function calls and a grammar needs constrained decoding, not built yet (send it as a "
                "'function' tool)");
}

}  // namespace

ToolOrigin ResponsesTools::origin_of(const std::string& flat) const {
  auto it = origins.find(flat);
  return it == origins.end() ? ToolOrigin{"", flat} : it->second;
}

std::string flat_tool_name(const std::string& ns, const std::string& name) { return ns + "__" + name; }

bool map_responses_tools(FieldChecker& c, const ojson& tools, ResponsesTools& out) {
  if (!tools.is_array()) return c.fail("tools", "must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string tp = at("tools", i);
    std::string type;
    if (!t.is_object() || !c.string(t, "type", tp + ".type", type))
      return c.fail(tp + ".type", "is required ('function' or 'namespace')");
    if (type == "function") {
      if (!map_function(c, t, tp, "", "", out)) return false;
    } else if (type == "namespace") {
      std::string ns, description;
      if (!c.string(t, "name", tp + ".name", ns) || ns.empty()) return c.fail(tp + ".name", "is required");
      c.string(t, "description", tp + ".description", description);
      const ojson* nested = FieldChecker::get(t, "tools");
      if (!nested || !nested->is_array()) return c.fail(tp + ".tools", "is required (an array of tools)");
      for (size_t k = 0; k < nested->size(); ++k) {
        const ojson& n = (*nested)[k];
        const std::string np = at(tp + ".tools", k);
        std::string ntype;
        if (!n.is_object() || !c.string(n, "type", np + ".type", ntype))
          return c.fail(np + ".type", "is required ('function')");
        if (ntype == "custom") return refuse_custom(c, np);
        if (ntype != "function")
          return c.fail(np + ".type", "tool type '" + ntype +
                                          "' is not supported inside a namespace by this server (only "
                                          "'function')");
        if (!map_function(c, n, np, ns, description, out)) return false;
      }
    } else if (type == "custom") {
      return refuse_custom(c, tp);
    } else if (is_hosted(type)) {
      out.dropped.push_back({{"index", i},
                             {"type", type},
                             {"reason", "a hosted tool this server cannot run; not offered to the model"}});
    } else {
      return c.fail(tp + ".type", "tool type '" + type +
                                      "' is not supported by this server (function, namespace; hosted "
                                      "tools are dropped)");
    }
  }
  return true;
}

}  // namespace spk::rt
