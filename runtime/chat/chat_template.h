// Chat templates from `tokenizer_config.json`: a Jinja interpreter sufficient for the real templates
// of Qwen3, Llama 3.1, DeepSeek-V3 and gpt-oss (tools, thinking kwargs). Target: byte-exact parity with
// @huggingface/jinja. Errors name the line and the construct.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/base/status.h"
#include "runtime/chat/chat_messages.h"

namespace spk::rt {

class ChatTemplate {
 public:
  // `name` (e.g. the file path) is used in error messages: "tokenizer_config.json:12: unknown filter 'foo'".
  static Result<std::shared_ptr<ChatTemplate>> parse(const std::string& source, const std::string& name);
  virtual ~ChatTemplate() = default;
  // `context` holds messages, tools, add_generation_prompt, bos_token, eos_token and any
  // chat_template_kwargs (e.g. enable_thinking) as top-level variables.
  [[nodiscard]] virtual Result<std::string> render(const nlohmann::json& context) const = 0;
  // Same, keeping the caller's key order. nlohmann::json sorts object keys, so `tools | tojson` prints
  // them alphabetically; parse requests with nlohmann::ordered_json for byte parity with HF.
  [[nodiscard]] virtual Result<std::string> render(const nlohmann::ordered_json& context) const = 0;
};

// What tokenizer_config.json says about chat: the template (a string, or the "default" of a named list),
// bos/eos token strings.
struct ChatConfig {
  std::shared_ptr<ChatTemplate> chat_template;  // null when the file has none
  std::string bos_token;
  std::string eos_token;
  std::string template_source;   // the template's text (parser defaults look for the families' markers)
  TemplateExpectations expects;  // what its messages must look like (normalise_messages before render)
};
Result<ChatConfig> load_chat_config(const std::string& model_dir);

}  // namespace spk::rt
