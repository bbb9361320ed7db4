// Messages in the form a chat template can render. Clients send what the OpenAI API allows: an assistant
// turn with "content": null beside its tool_calls, content as a list of text parts. Most real templates
// expect a string (Qwen3's calls `.startswith` on it, Llama 3.1's concatenates it), a few iterate over
// parts (Gemma 3), DeepSeek-V3's renders tool calls only when the content is none and concatenates the
// arguments as text. As vLLM does, the template's source says which it expects (detect_template_expectations)
// and every front's messages are normalised to that before rendering (normalise_messages).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace spk::rt {

struct TemplateExpectations {
  bool content_parts = false;   // iterates over a message's content: OpenAI-style parts, not a string
  bool null_content = false;    // tests content against none: a tool-calling assistant turn keeps null
  bool arguments_text = false;  // concatenates tool_call arguments as text (no tojson, no `is string`)
};

// Read from the template's source text (an empty source: the defaults, string content).
TemplateExpectations detect_template_expectations(std::string_view source);

struct MessageProblem {
  std::string param;    // "messages[2].content[0].type"
  std::string message;  // "<param>: what is wrong (what to send)"
};

// In place. String templates: null or absent content -> "" (kept null, and "" made null, for a
// tool-calling assistant turn when the template tests for none); text parts joined with "\n". Parts
// templates: a string -> one text part, null -> []. Tool-call arguments given as an object become JSON
// text where the template concatenates them. Parts other than text (images, audio) are refused: this
// server passes text only.
std::optional<MessageProblem> normalise_messages(nlohmann::ordered_json& messages,
                                                 const TemplateExpectations& t);

}  // namespace spk::rt
