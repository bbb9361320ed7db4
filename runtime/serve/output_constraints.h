// Request fields that constrain what the model writes (JSON mode, structured outputs, a forced tool call)
// need constrained decoding, which this server does not have yet. Every front refuses them with one
// wording, a 400 naming the field, instead of answering 200 with text that ignores them.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/serve/api_front.h"

namespace spk::rt {

// "<param>: <what> needs constrained decoding, which this server does not support yet (<fix>)".
FieldError needs_constrained_decoding(const std::string& param, const std::string& what,
                                      const std::string& fix);

// An output format's type (chat completions' response_format.type, /v1/responses' text.format.type,
// /v1/messages' output_config.format.type): "text" passes; json_object / json_schema are refused as
// needing constrained decoding; anything else is named as not a format type.
std::optional<FieldError> check_output_format_type(const std::string& type, const std::string& param);

// A whole format object {"type": ...} at `path`: not an object, or no string type, is named too.
template <class Json>
std::optional<FieldError> check_output_format(const Json& format, const std::string& path) {
  if (!format.is_object())
    return FieldError{
        400, path,
        path + ": must be an object like {\"type\": \"text\"}, got " + format.dump().substr(0, 60)};
  auto it = format.find("type");
  if (it == format.end() || !it->is_string())
    return FieldError{400, path + ".type",
                      path + ".type: is required (a string: text, json_object or json_schema)"};
  return check_output_format_type(it->template get<std::string>(), path + ".type");
}

// The refusal of a forced tool call: `sent` says it as the client wrote it ("'required'", "'any'", "a named
// function ('ls')").
FieldError forced_tool_call_refused(const std::string& param, const std::string& sent,
                                    const std::string& fix);

// A tool_choice in the chat form every front maps to ("auto" | "none" | "required" |
// {"type":"function","function":{"name"}}): "required" and a named function force a call, so they are
// refused. `param` and `sent` say it as the client wrote it ("tool_choice", "'required'"; on /v1/messages
// "tool_choice.type", "'any'"); `fix` names the values that work on that route.
std::optional<FieldError> check_tool_choice_enforceable(const nlohmann::ordered_json& chat_choice,
                                                        const std::string& param, const std::string& sent,
                                                        const std::string& fix);

}  // namespace spk::rt
