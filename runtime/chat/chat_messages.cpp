#include "runtime/chat/chat_messages.h"

#include <regex>

namespace spk::rt {

using ojson = nlohmann::ordered_json;

TemplateExpectations detect_template_expectations(std::string_view source) {
  // Access to a message's content: `message['content']`, `message.content`, or a variable set from it.
  static const std::regex iterates_content(
      R"(for\s+\w+\s+in\s+(\w+(\[\s*['"]content['"]\s*\]|\.content)|content)(?![\w.\[]))");
  static const std::regex tests_none(R"([^\w]content['"]?\s*\]?\s+is\s+(not\s+)?none\b)");
  static const std::regex concatenates_arguments(
      R"(\+\s*\w+(\[\s*['"]function['"]\s*\]|\.function)?(\[\s*['"]arguments['"]\s*\]|\.arguments))");
  static const std::regex arguments_as_json(
      R"((\[\s*['"]arguments['"]\s*\]|\.arguments)\s*(\|\s*tojson|is\s+(not\s+)?(string|mapping)))");
  const std::string s(source);
  TemplateExpectations t;
  t.content_parts = std::regex_search(s, iterates_content);
  t.null_content = std::regex_search(s, tests_none);
  t.arguments_text = std::regex_search(s, concatenates_arguments) && !std::regex_search(s, arguments_as_json);
  return t;
}

namespace {

std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// The text parts of `parts` joined with "\n" into `out`; anything but text is a problem.
std::optional<MessageProblem> join_text_parts(const ojson& parts, const std::string& path, std::string* out) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const ojson& p = parts[i];
    const std::string pp = at(path, i);
    if (p.is_string()) {  // some clients send bare strings in the list
      if (out) *out += (i ? "\n" : "") + p.get<std::string>();
      continue;
    }
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
      return MessageProblem{pp, pp + ": must be a content part object with a string 'type'"};
    const std::string type = p["type"].get<std::string>();
    const char* key = type == "refusal" ? "refusal" : "text";
    if (type != "text" && type != "input_text" && type != "output_text" && type != "refusal")
      return MessageProblem{pp + ".type", pp + ".type: '" + type.substr(0, 64) +
                                              "' content is not supported by this server (send text)"};
    if (!p.contains(key) || !p[key].is_string())
      return MessageProblem{pp + "." + key, pp + "." + key + ": is required (a string)"};
    if (out) *out += (i ? "\n" : "") + p[key].get<std::string>();
  }
  return std::nullopt;
}

bool calls_tools(const ojson& m) {
  auto it = m.find("tool_calls");
  return it != m.end() && it->is_array() && !it->empty();
}

}  // namespace

std::optional<MessageProblem> normalise_messages(ojson& messages, const TemplateExpectations& t) {
  if (!messages.is_array()) return std::nullopt;
  for (size_t i = 0; i < messages.size(); ++i) {
    ojson& m = messages[i];
    if (!m.is_object()) continue;
    const std::string path = at("messages", i) + ".content";
    const bool keep_null = t.null_content && m.value("role", "") == "assistant" && calls_tools(m);
    auto it = m.find("content");
    const ojson content = it == m.end() ? ojson() : *it;
    if (content.is_null()) {
      m["content"] = keep_null ? ojson() : t.content_parts ? ojson::array() : ojson("");
    } else if (content.is_string()) {
      if (t.content_parts)
        m["content"] = ojson::array({{{"type", "text"}, {"text", content}}});
      else if (keep_null && content.get<std::string>().empty())
        m["content"] = nullptr;
    } else if (content.is_array()) {
      std::string text;
      if (auto p = join_text_parts(content, path, t.content_parts ? nullptr : &text)) return p;
      if (!t.content_parts) m["content"] = keep_null && text.empty() ? ojson() : ojson(text);
    } else {
      return MessageProblem{path, path + ": must be a string, an array of content parts or null"};
    }
    if (t.arguments_text && calls_tools(m))
      for (auto& call : m["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
        ojson& fn = call["function"];
        if (fn.contains("arguments") && !fn["arguments"].is_string())
          fn["arguments"] = fn["arguments"].dump();
      }
  }
  return std::nullopt;
}

}  // namespace spk::rt
