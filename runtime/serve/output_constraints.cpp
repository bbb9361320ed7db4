#include "runtime/serve/output_constraints.h"

namespace spk::rt {

FieldError needs_constrained_decoding(const std::string& param, const std::string& what,
                                      const std::string& fix) {
  return FieldError{400, param,
                    param + ": " + what +
                        " needs constrained decoding, which this server does not support yet (" + fix + ")"};
}

std::optional<FieldError> check_output_format_type(const std::string& type, const std::string& param) {
  if (type == "text") return std::nullopt;
  if (type == "json_object" || type == "json_schema")
    return needs_constrained_decoding(param, "'" + type + "'", "send 'text' or omit it");
  return FieldError{
      400, param,
      param + ": '" + type.substr(0, 64) + "' is not a format type (text, json_object or json_schema)"};
}

std::optional<FieldError> check_tool_choice_enforceable(const nlohmann::ordered_json& chat_choice,
                                                        const std::string& param, const std::string& sent,
                                                        const std::string& fix) {
  const bool forced =
      (chat_choice.is_string() && chat_choice.get<std::string>() == "required") || chat_choice.is_object();
  if (!forced) return std::nullopt;
  return forced_tool_call_refused(param, sent, fix);
}

FieldError forced_tool_call_refused(const std::string& param, const std::string& sent,
                                    const std::string& fix) {
  return needs_constrained_decoding(param, sent + " (a forced tool call)", fix);
}

}  // namespace spk::rt
