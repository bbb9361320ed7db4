// /v1/messages request -> the chat template's messages and tools (messages_api.h).
#include <algorithm>

#include "runtime/serve/front_fields.h"
#include "runtime/serve/messages_api.h"
#include "runtime/serve/output_constraints.h"

namespace spk::rt {

namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t kMaxStopSequences = 64;

std::string at(const std::string& path, size_t i) { return path + "." + std::to_string(i); }

// Text of a string or of an array of text blocks; other block types refused by name.
bool text_of(FieldChecker& c, const ojson& v, const std::string& path, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return true;
  }
  if (!v.is_array()) return c.fail(path, "must be a string or an array of text blocks");
  for (size_t i = 0; i < v.size(); ++i) {
    const ojson& b = v[i];
    std::string type;
    if (!b.is_object() || !c.string(b, "type", at(path, i) + ".type", type))
      return c.fail(at(path, i), "must be a content block object with a string 'type'");
    if (type != "text")
      return c.fail(at(path, i) + ".type",
                    "'" + type + "' blocks are not supported here by this server (send text blocks)");
    std::string t;
    if (!c.string(b, "text", at(path, i) + ".text", t)) return c.fail(at(path, i) + ".text", "is required");
    if (!out.empty()) out += "\n";
    out += t;
  }
  return true;
}

// One message's content blocks appended to `out` in chat form: user text -> a user message, tool_result
// -> a "tool" message, assistant text / thinking / tool_use -> one assistant message.
bool map_message(FieldChecker& c, const ojson& m, const std::string& path, ojson& out) {
  if (!m.is_object()) return c.fail(path, "must be an object with 'role' and 'content'");
  std::string role;
  if (!c.string(m, "role", path + ".role", role)) return c.fail(path + ".role", "is required");
  if (role != "user" && role != "assistant" && role != "system")
    return c.fail(path + ".role", "is '" + role + "', must be 'user' or 'assistant'");
  const ojson* content = FieldChecker::get(m, "content");
  if (!content) return c.fail(path + ".content", "is required");
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", content->get<std::string>()}});
    return true;
  }
  if (!content->is_array())
    return c.fail(path + ".content", "must be a string or an array of content blocks");
  if (role == "system") {
    std::string t;
    if (!text_of(c, *content, path + ".content", t)) return false;
    out.push_back({{"role", "system"}, {"content", t}});
    return true;
  }
  std::string text, thinking;
  ojson tool_calls = ojson::array();
  auto flush_user = [&] {
    if (!text.empty()) out.push_back({{"role", "user"}, {"content", text}});
    text.clear();
  };
  for (size_t i = 0; i < content->size(); ++i) {
    const ojson& b = (*content)[i];
    const std::string bp = at(path + ".content", i);
    std::string type;
    if (!b.is_object() || !c.string(b, "type", bp + ".type", type))
      return c.fail(bp, "must be a content block object with a string 'type'");
    if (type == "text") {
      std::string t;
      if (!c.string(b, "text", bp + ".text", t)) return c.fail(bp + ".text", "is required");
      if (!text.empty()) text += "\n";
      text += t;
    } else if (type == "image" || type == "document" || type == "search_result") {
      return c.fail(bp + ".type", "'" + type + "' content is not supported by this server (send text)");
    } else if (type == "tool_result" && role == "user") {
      std::string id, result;
      if (!c.string(b, "tool_use_id", bp + ".tool_use_id", id) || id.empty())
        return c.fail(bp + ".tool_use_id", "is required (the id of the tool_use block it answers)");
      if (const ojson* rc = FieldChecker::get(b, "content"); rc && !text_of(c, *rc, bp + ".content", result))
        return false;
      bool is_error = false;
      c.boolean(b, "is_error", bp + ".is_error", is_error);
      if (c.err) return false;
      flush_user();
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      std::string t;
      if (type == "thinking" && !c.string(b, "thinking", bp + ".thinking", t))
        return c.fail(bp + ".thinking", "is required");
      thinking += t;  // redacted_thinking is opaque: nothing of it reaches the template
    } else if (type == "tool_use" && role == "assistant") {
      std::string id, name;
      if (!c.string(b, "id", bp + ".id", id) || id.empty()) return c.fail(bp + ".id", "is required");
      if (!c.string(b, "name", bp + ".name", name) || name.empty())
        return c.fail(bp + ".name", "is required");
      const ojson* input = FieldChecker::get(b, "input");
      if (input && !input->is_object()) return c.fail(bp + ".input", "must be an object");
      tool_calls.push_back({{"id", id},
                            {"type", "function"},
                            {"function", {{"name", name}, {"arguments", input ? *input : ojson::object()}}}});
    } else {
      return c.fail(bp + ".type", "'" + type + "' blocks are not supported in a " + role +
                                      " message by this server (user: text, tool_result; assistant: "
                                      "text, thinking, tool_use)");
    }
  }
  if (role == "user") {
    flush_user();
    return true;
  }
  ojson msg = {{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) msg["reasoning_content"] = thinking;
  if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
  out.push_back(std::move(msg));
  return true;
}

bool map_tools(FieldChecker& c, const ojson& tools, ojson& out, std::vector<std::string>& names) {
  if (!tools.is_array()) return c.fail("tools", "must be an array");
  out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string tp = at("tools", i);
    if (!t.is_object()) return c.fail(tp, "must be an object with 'name' and 'input_schema'");
    std::string type = "custom", name, description;
    c.string(t, "type", tp + ".type", type);
    if (type != "custom")
      return c.fail(tp + ".type", "tool type '" + type +
                                      "' is not supported by this server (only custom tools: name, "
                                      "description, input_schema)");
    if (!c.string(t, "name", tp + ".name", name) || name.empty()) return c.fail(tp + ".name", "is required");
    c.string(t, "description", tp + ".description", description);
    const ojson* schema = FieldChecker::get(t, "input_schema");
    if (!schema || !schema->is_object())
      return c.fail(tp + ".input_schema", "is required and must be a JSON schema object");
    if (c.err) return false;
    ojson fn = {{"name", name}};
    if (!description.empty()) fn["description"] = description;
    fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", fn}});
    names.push_back(name);
  }
  return true;
}

bool map_tool_choice(FieldChecker& c, const ojson& tc, const std::vector<std::string>& names, ojson& out) {
  std::string type;
  if (!tc.is_object() || !c.string(tc, "type", "tool_choice.type", type))
    return c.fail("tool_choice", "must be an object with 'type' auto, any, tool or none");
  bool dp = false;
  c.boolean(tc, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use", dp);
  if (type == "auto") {
    out = "auto";
  } else if (type == "any") {
    out = "required";
  } else if (type == "none") {
    out = "none";
  } else if (type == "tool") {
    std::string name;
    if (!c.string(tc, "name", "tool_choice.name", name) || name.empty())
      return c.fail("tool_choice.name", "is required when type is 'tool'");
    if (std::find(names.begin(), names.end(), name) == names.end())
      return c.fail("tool_choice.name", "'" + name + "' is not one of the request's tools");
    out = {{"type", "function"}, {"function", {{"name", name}}}};
  } else {
    return c.fail("tool_choice.type", "is '" + type + "', must be auto, any, tool or none");
  }
  return !c.err;
}

}  // namespace

std::variant<MessagesRequest, FieldError> parse_messages_request(std::string_view body,
                                                                 const std::string& served_model,
                                                                 bool count_tokens) {
  if (auto why = json_shape_problem(body)) return FieldError{400, {}, *why};
  ojson j = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return FieldError{400, {}, "request body is not valid JSON"};
  if (!j.is_object()) return FieldError{400, {}, "request body must be a JSON object"};

  FieldChecker c;
  MessagesRequest r;
  ApiRequest& q = r.api;
  q.chat = true;
  q.n = 1;
  if (!c.string(j, "model", "model", q.model) || q.model.empty()) c.fail("model", "is required");
  if (c.err) return *c.err;
  if (q.model != served_model)
    return FieldError{
        404, "model",
        "model: '" + q.model + "' is not served here (this server serves '" + served_model + "')"};

  if (!count_tokens) {
    if (!c.integer(j, "max_tokens", "max_tokens", q.gen.max_tokens, 1, "an integer >= 1"))
      c.fail("max_tokens", "is required (an integer >= 1)");
    q.max_tokens_given = true;
    q.max_tokens_param = "max_tokens";
    c.boolean(j, "stream", "stream", q.stream);
    c.number(j, "temperature", "temperature", q.gen.temperature, 0.0, 1.0, "[0, 1]");
    c.number(j, "top_p", "top_p", q.gen.top_p, 1e-9, 1.0, "(0, 1]");
    int64_t top_k = 0;
    if (c.integer(j, "top_k", "top_k", top_k, 0, "an integer >= 0 (0 = off)"))
      q.gen.top_k = static_cast<int>(std::min<int64_t>(top_k, INT32_MAX));
    if (const ojson* s = FieldChecker::get(j, "stop_sequences")) {
      if (!s->is_array() || s->size() > kMaxStopSequences)
        c.fail("stop_sequences",
               "must be an array of at most " + std::to_string(kMaxStopSequences) + " strings");
      else
        for (size_t i = 0; i < s->size() && !c.err; ++i) {
          if (!(*s)[i].is_string() || (*s)[i].get<std::string>().empty())
            c.fail(at("stop_sequences", i), "must be a non-empty string");
          else
            q.gen.stop.push_back((*s)[i].get<std::string>());
        }
    }
    c.object(j, "metadata", "metadata");  // user_id: nothing here uses it
  }
  if (c.err) return *c.err;

  q.messages = ojson::array();
  std::string system;
  if (const ojson* s = FieldChecker::get(j, "system")) {
    if (!text_of(c, *s, "system", system)) return *c.err;
    q.messages.push_back({{"role", "system"}, {"content", system}});
  }
  const ojson* msgs = FieldChecker::get(j, "messages");
  if (!msgs || !msgs->is_array() || msgs->empty())
    return FieldError{400, "messages", "messages: is required (a non-empty array of messages)"};
  for (size_t i = 0; i < msgs->size(); ++i)
    if (!map_message(c, (*msgs)[i], at("messages", i), q.messages)) return *c.err;

  std::vector<std::string> names;
  ojson tools;
  if (const ojson* t = FieldChecker::get(j, "tools"); t && !map_tools(c, *t, tools, names)) return *c.err;
  if (const ojson* tc = FieldChecker::get(j, "tool_choice");
      tc && !map_tool_choice(c, *tc, names, r.tool_choice))
    return *c.err;
  if (auto e = check_tool_choice_enforceable(
          r.tool_choice, "tool_choice.type",
          r.tool_choice.is_object()
              ? "'tool' ('" + r.tool_choice["function"]["name"].get<std::string>() + "')"
              : "'any'",
          "send 'auto' or 'none', or omit tool_choice"))
    return *e;
  if (!tools.empty() && r.tool_choice != "none") q.tools = tools;
  q.tool_choice = r.tool_choice;

  if (const ojson* th = c.object(j, "thinking", "thinking")) {
    std::string type;
    if (!c.string(*th, "type", "thinking.type", type))
      c.fail("thinking.type", "is required (enabled, adaptive or disabled)");
    else if (type == "enabled" || type == "adaptive")
      q.chat_template_kwargs["enable_thinking"] = true;
    else if (type == "disabled")
      q.chat_template_kwargs["enable_thinking"] = false;
    else
      c.fail("thinking.type", "is '" + type + "', must be enabled, adaptive or disabled");
    int64_t budget = 0;
    if (type == "enabled" &&
        !c.integer(*th, "budget_tokens", "thinking.budget_tokens", budget, 1, "an integer >= 1"))
      c.fail("thinking.budget_tokens", "is required when type is 'enabled'");
  }
  if (const ojson* oc = c.object(j, "output_config", "output_config"))
    if (const ojson* f = FieldChecker::get(*oc, "format"))
      if (auto e = check_output_format(*f, "output_config.format"); e && !c.err) c.err = *e;
  if (c.err) return *c.err;
  return r;
}

}  // namespace spk::rt
