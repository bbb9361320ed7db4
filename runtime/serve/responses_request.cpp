// /v1/responses request -> the chat template's messages and tools (responses_api.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/serve/front_fields.h"
#include "runtime/serve/output_constraints.h"
#include "runtime/serve/response_store.h"
#include "runtime/serve/responses_api.h"
#include "runtime/serve/responses_tools.h"

namespace spk::rt {

namespace {

using ojson = nlohmann::ordered_json;

std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// A message's text: a string or input_text / output_text (/ refusal) parts joined by newlines.
bool parts_text(FieldChecker& c, const ojson& v, const std::string& path, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return true;
  }
  if (!v.is_array()) return c.fail(path, "must be a string or an array of content parts");
  for (size_t i = 0; i < v.size(); ++i) {
    const ojson& p = v[i];
    std::string type, t;
    if (!p.is_object() || !c.string(p, "type", at(path, i) + ".type", type))
      return c.fail(at(path, i), "must be a content part object with a string 'type'");
    const char* key = type == "refusal" ? "refusal" : "text";
    if (type != "input_text" && type != "output_text" && type != "text" && type != "refusal")
      return c.fail(at(path, i) + ".type",
                    "'" + type + "' content is not supported by this server (send input_text)");
    if (!c.string(p, key, at(path, i) + "." + key, t)) return c.fail(at(path, i) + "." + key, "is required");
    if (!out.empty()) out += "\n";
    out += t;
  }
  return true;
}

// The last message when it is an assistant turn that can still take tool calls / text, else a new one.
ojson& assistant_turn(ojson& msgs) {
  if (msgs.empty() || msgs.back()["role"] != "assistant")
    msgs.push_back({{"role", "assistant"}, {"content", ""}});
  return msgs.back();
}

bool map_item(FieldChecker& c, const ojson& it, const std::string& path, ojson& msgs,
              std::string& reasoning) {
  if (!it.is_object()) return c.fail(path, "must be an input item object");
  std::string type = "message";
  c.string(it, "type", path + ".type", type);
  if (c.err) return false;
  if (type == "message") {
    std::string role, text;
    if (!c.string(it, "role", path + ".role", role)) return c.fail(path + ".role", "is required");
    if (role != "user" && role != "system" && role != "developer" && role != "assistant")
      return c.fail(path + ".role", "is '" + role + "', must be user, system, developer or assistant");
    const ojson* content = FieldChecker::get(it, "content");
    if (!content) return c.fail(path + ".content", "is required");
    if (!parts_text(c, *content, path + ".content", text)) return false;
    if (role == "assistant") {
      ojson& a = assistant_turn(msgs);
      if (a.contains("tool_calls") || !a["content"].get<std::string>().empty())
        msgs.push_back({{"role", "assistant"}, {"content", text}});
      else
        a["content"] = text;
      if (!reasoning.empty()) msgs.back()["reasoning_content"] = reasoning;
      reasoning.clear();
    } else {
      msgs.push_back({{"role", role == "developer" ? "system" : role}, {"content", text}});
    }
    return true;
  }
  if (type == "function_call") {
    std::string call_id, name, ns, args;
    if (!c.string(it, "call_id", path + ".call_id", call_id) || call_id.empty())
      return c.fail(path + ".call_id", "is required");
    if (!c.string(it, "name", path + ".name", name) || name.empty())
      return c.fail(path + ".name", "is required");
    if (c.string(it, "namespace", path + ".namespace", ns) && !ns.empty())
      name = flat_tool_name(ns, name);  // as its namespace's tools are offered (responses_tools.h)
    if (c.err) return false;
    if (!c.string(it, "arguments", path + ".arguments", args))
      return c.fail(path + ".arguments", "is required");
    // Templates expect the arguments as an object (transformers' convention); text that is not one stays
    // text.
    ojson parsed = json_shape_problem(args) ? ojson() : ojson::parse(args, nullptr, false);
    ojson& a = assistant_turn(msgs);
    if (!reasoning.empty()) a["reasoning_content"] = reasoning;
    reasoning.clear();
    if (!a.contains("tool_calls")) a["tool_calls"] = ojson::array();
    a["tool_calls"].push_back(
        {{"id", call_id},
         {"type", "function"},
         {"function", {{"name", name}, {"arguments", parsed.is_object() ? parsed : ojson(args)}}}});
    return true;
  }
  if (type == "function_call_output") {
    std::string call_id, output;
    if (!c.string(it, "call_id", path + ".call_id", call_id) || call_id.empty())
      return c.fail(path + ".call_id", "is required");
    const ojson* o = FieldChecker::get(it, "output");
    if (!o) return c.fail(path + ".output", "is required");
    if (!parts_text(c, *o, path + ".output", output)) return false;
    msgs.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", output}});
    return true;
  }
  if (type == "reasoning") {  // summary or content text; encrypted_content is opaque to this server
    for (const char* key : {"content", "summary"}) {
      const ojson* parts = FieldChecker::get(it, key);
      if (!parts) continue;
      if (!parts->is_array()) return c.fail(path + "." + key, "must be an array");
      for (size_t i = 0; i < parts->size(); ++i) {
        std::string t;
        if (!(*parts)[i].is_object() || !c.string((*parts)[i], "text", at(path + "." + key, i) + ".text", t))
          return c.fail(at(path + "." + key, i), "must be an object with a string 'text'");
        if (!reasoning.empty()) reasoning += "\n";
        reasoning += t;
      }
      if (std::string(key) == "content" && !parts->empty()) break;  // raw text wins over its summary
    }
    return true;
  }
  return c.fail(path + ".type", "input item type '" + type +
                                    "' is not supported by this server (message, function_call, "
                                    "function_call_output, reasoning)");
}

bool map_tool_choice(FieldChecker& c, const ojson& tc, const std::vector<std::string>& names, ojson& out) {
  if (tc.is_string()) {
    const std::string s = tc.get<std::string>();
    if (s != "auto" && s != "none" && s != "required")
      return c.fail("tool_choice", "is '" + s + "', must be auto, none, required or {type: function, name}");
    out = s;
    return true;
  }
  std::string type, name;
  if (!tc.is_object() || !c.string(tc, "type", "tool_choice.type", type))
    return c.fail("tool_choice", "must be auto, none, required or {type: function, name}");
  if (type != "function")
    return c.fail("tool_choice.type", "'" + type + "' is not supported by this server (only 'function')");
  if (!c.string(tc, "name", "tool_choice.name", name) || name.empty())
    return c.fail("tool_choice.name", "is required");
  if (std::find(names.begin(), names.end(), name) == names.end())
    return c.fail("tool_choice.name", "'" + name + "' is not one of the request's tools");
  out = {{"type", "function"}, {"function", {{"name", name}}}};
  return true;
}

}  // namespace

std::variant<ResponsesRequest, FieldError> parse_responses_request(std::string_view body,
                                                                   const std::string& served_model) {
  if (auto why = json_shape_problem(body)) return FieldError{400, {}, *why};
  ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return FieldError{400, {}, "request body is not valid JSON"};
  if (!j.is_object()) return FieldError{400, {}, "request body must be a JSON object"};

  FieldChecker c;
  ResponsesRequest r;
  ApiRequest& q = r.api;
  q.chat = true;
  q.n = 1;
  q.max_tokens_param = "max_output_tokens";
  if (!c.string(j, "model", "model", q.model) || q.model.empty()) c.fail("model", "is required");
  if (c.err) return *c.err;
  if (q.model != served_model)
    return FieldError{
        404, "model",
        "The model `" + q.model + "` does not exist (this server serves `" + served_model + "`)",
        "model_not_found"};
  q.max_tokens_given =
      c.integer(j, "max_output_tokens", "max_output_tokens", q.gen.max_tokens, 1, "an integer >= 1");
  c.boolean(j, "stream", "stream", q.stream);
  c.number(j, "temperature", "temperature", q.gen.temperature, 0.0, 2.0, "[0, 2]");
  c.number(j, "top_p", "top_p", q.gen.top_p, 1e-9, 1.0, "(0, 1]");
  c.boolean(j, "store", "store", r.store);
  c.string(j, "instructions", "instructions", r.instructions);
  c.string(j, "previous_response_id", "previous_response_id", r.previous_response_id);
  bool background = false, parallel = true;
  if (c.boolean(j, "background", "background", background) && background)
    c.fail("background", "background responses are not supported by this server (omit it or send false)");
  c.boolean(j, "parallel_tool_calls", "parallel_tool_calls", parallel);
  c.object(j, "metadata", "metadata");
  if (const ojson* re = c.object(j, "reasoning", "reasoning")) {
    std::string effort;  // accepted; the templates have no effort knob
    c.string(*re, "effort", "reasoning.effort", effort);
    r.echo["reasoning"] = {{"effort", effort.empty() ? nlohmann::json(nullptr) : nlohmann::json(effort)},
                           {"summary", nullptr}};
  }
  if (const ojson* tx = c.object(j, "text", "text"))
    if (const ojson* f = FieldChecker::get(*tx, "format"))
      if (auto e = check_output_format(*f, "text.format"); e && !c.err) c.err = *e;
  // Logprobs are not built on this route: only 0 alternatives is honoured.
  int64_t top_logprobs = 0;
  if (c.integer(j, "top_logprobs", "top_logprobs", top_logprobs, 0, "an integer in [0, 20]") &&
      top_logprobs > 0)
    c.fail("top_logprobs",
           "is " + std::to_string(top_logprobs) +
               ", but logprobs are not supported on /v1/responses by this server (send 0 or omit it)");
  // Bounds calls of built-in (hosted) tools; this server runs none, so any valid value holds.
  int64_t max_tool_calls = 0;
  if (c.integer(j, "max_tool_calls", "max_tool_calls", max_tool_calls, 1, "an integer >= 1"))
    r.echo["max_tool_calls"] = max_tool_calls;
  if (c.err) return *c.err;

  const ojson* input = FieldChecker::get(j, "input");
  if (!input) return FieldError{400, "input", "input: is required (a string or an array of input items)"};
  std::string reasoning;
  if (input->is_string()) {
    r.input_messages.push_back({{"role", "user"}, {"content", input->get<std::string>()}});
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i)
      if (!map_item(c, (*input)[i], at("input", i), r.input_messages, reasoning)) return *c.err;
  } else {
    return FieldError{400, "input", "input: must be a string or a non-empty array of input items"};
  }

  if (const ojson* t = FieldChecker::get(j, "tools"); t && !map_responses_tools(c, *t, r.tools))
    return *c.err;
  if (!r.tools.dropped.empty()) {
    std::string types;
    for (const auto& d : r.tools.dropped)
      types += (types.empty() ? "" : ", ") + d["type"].get<std::string>() + " (tools[" +
               std::to_string(d["index"].get<size_t>()) + "])";
    spdlog::info("/v1/responses: hosted tools this server cannot run are not offered to the model: {}",
                 types);
  }
  if (const ojson* tc = FieldChecker::get(j, "tool_choice");
      tc && !map_tool_choice(c, *tc, r.tools.names, r.tool_choice))
    return *c.err;
  if (auto e = check_tool_choice_enforceable(
          r.tool_choice, "tool_choice",
          r.tool_choice.is_object()
              ? "a named function ('" + r.tool_choice["function"]["name"].get<std::string>() + "')"
              : "'required'",
          "send 'auto' or 'none', or omit it"))
    return *e;
  if (!r.tools.chat_tools.empty() && r.tool_choice != "none") q.tools = r.tools.chat_tools;
  q.tool_choice = r.tool_choice;

  r.echo["tools"] = j.contains("tools") && j["tools"].is_array() ? nlohmann::json::parse(j["tools"].dump())
                                                                 : nlohmann::json::array();
  if (j.contains("tool_choice") && !j["tool_choice"].is_null())
    r.echo["tool_choice"] = nlohmann::json::parse(j["tool_choice"].dump());
  else
    r.echo["tool_choice"] = "auto";
  r.echo["parallel_tool_calls"] = parallel;
  if (!j.contains("reasoning")) r.echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  return r;
}

std::optional<FieldError> resolve_history(ResponsesRequest& r, const ResponseStore& store) {
  ojson msgs = ojson::array();  // the conversation: instructions are not carried to the next turn
  if (!r.previous_response_id.empty()) {
    auto prev = store.get(r.previous_response_id);
    if (!prev)
      return FieldError{400, "previous_response_id",
                        "Previous response with id '" + r.previous_response_id.substr(0, 100) +
                            "' not found (responses are kept in memory, the latest " +
                            std::to_string(store.capacity()) + ", and only with store: true)",
                        "previous_response_not_found"};
    for (const auto& m : prev->conversation) msgs.push_back(m);
  }
  for (const auto& m : r.input_messages) msgs.push_back(m);
  r.conversation = msgs;
  if (!r.instructions.empty())
    msgs.insert(msgs.begin(), ojson{{"role", "system"}, {"content", r.instructions}});
  r.api.messages = std::move(msgs);
  return std::nullopt;
}

}  // namespace spk::rt
