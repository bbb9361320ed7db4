// OpenAI wire format: request parsing + validation for /v1/completions and /v1/chat/completions, and
// the JSON of responses, stream chunks and errors. Pure functions, no I/O: every malformed or out-of-range
// field becomes an ApiError (status + OpenAI-style body) naming the field, never an exception.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/serve/chat_output.h"

namespace spk::rt {

// A prompt (plus the completion asked for) longer than the model's window, in numbers, so that each front
// can word it as its clients parse it (Anthropic's clients read theirs to retry with a smaller max_tokens).
struct ContextOverflow {
  int64_t input_tokens = 0;
  int64_t max_tokens = 0;  // 0: the prompt alone does not fit
  int64_t limit = 0;       // max_model_len
};

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field; empty when none
  std::string code;
  std::optional<ContextOverflow> context;  // set when the request does not fit the context window
  // {"error": {"message", "type", "param", "code"}} (param/code null when empty).
  [[nodiscard]] nlohmann::json body() const;
};

ApiError api_error(int status, std::string message, std::string param = {}, std::string type = {},
                   std::string code = {});

// The sampling knobs of a request; mirrors rt::SamplingParams (runtime/sampler/sampler.h) field by field
// so that this file does not depend on the sampler's build.
struct GenerationParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off (-1 accepted as off, like vLLM)
  float top_p = 1.0f;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int64_t max_tokens = 16;  // as sent (up to 2^63-1): checked against the context in 64-bit arithmetic
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
};

struct ApiRequest {
  bool chat = false;
  std::string model;
  // /v1/completions: text prompt, or token ids when prompt_is_ids.
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  // /v1/chat/completions. Key order kept as sent (ordered_json): templates print `tools | tojson`
  // and must match what HF renders byte for byte.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null when absent
  // "auto" | "none" | "required" | {"type":"function","function":{"name"}}; null when absent (= auto).
  // Validated (a named function must be one of `tools`); "none" turns tool-call parsing off. "required"
  // and a named function are then refused with a 400 (output_constraints.h): no constrained decoding yet.
  nlohmann::ordered_json tool_choice;
  nlohmann::ordered_json chat_template_kwargs =
      nlohmann::ordered_json::object();  // {"enable_thinking": false}
  bool add_generation_prompt = true;

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a final chunk with usage
  int n = 1;
  bool logprobs = false;  // chat: logprobs=true; completions: logprobs=<int> (0 = chosen token only)
  int top_logprobs = 0;
  bool echo = false;
  bool max_tokens_given = false;  // else chat runs up to max_model_len, completions default to 16
  std::string max_tokens_param = "max_tokens";  // the key it came in (max_completion_tokens wins)
  // logit_bias as sent: token id -> bias in [-100, 100]. Ids are checked against the vocabulary when
  // the request starts; a non-empty map is then refused (the sampler does not apply biases).
  std::vector<std::pair<int64_t, float>> logit_bias;
  GenerationParams gen;
};

struct ProtocolLimits {
  std::string served_model_name;
  int max_n = 16;
  int max_top_logprobs = 0;  // top-k alternatives are not built: only the chosen token's logprob
};

inline constexpr int kMaxJsonDepth = 64;         // real requests nest ~6 deep
inline constexpr int kMaxJsonObjectKeys = 4096;  // a tool schema has tens; ordered_json inserts in O(keys)
inline constexpr int64_t kMaxJsonKeyWork = 32'000'000;  // sum over inserts of the keys already there
// Why a request body's shape is refused before it is parsed (bracket nesting outside strings too deep:
// bounds parser and destructor work; an object with too many keys), nullopt when it is not. Every API
// front checks it first.
std::optional<std::string> json_shape_problem(std::string_view s);

// Parses and validates a request body. `chat` selects the route's schema. Every count (n, max_tokens,
// max_completion_tokens, top_logprobs, logprobs, best_of, seed, token ids, logit_bias ids) is read as a
// 64-bit integer and range-checked there: a value past 2^31 or 2^63 gets the same 400 as any other
// out-of-range value, never a wrapped one.
std::variant<ApiRequest, ApiError> parse_request(std::string_view body, bool chat, const ProtocolLimits& lim);

// One finished (or streamed) choice.
struct Choice {
  int index = 0;
  std::string text;                      // content
  std::string reasoning;                 // chat: reasoning_content
  std::vector<ToolCall> tool_calls;      // chat: message.tool_calls
  std::vector<std::string> token_texts;  // logprobs: one entry per generated token
  std::vector<float> token_logprobs;
  std::string finish_reason;  // "stop" | "length" | "tool_calls" | "" (still running, streams only)
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;     // of prompt_tokens, how many the prefix cache supplied
  int reasoning_tokens = 0;  // of completion_tokens, how many the reasoning parser kept as reasoning
  [[nodiscard]] nlohmann::json to_json() const;
};

// Full responses. `id` like "cmpl-…"/"chatcmpl-…", `created` unix seconds.
nlohmann::json completion_response(const std::string& id, int64_t created, const std::string& model,
                                   const std::vector<Choice>& choices, const Usage& usage, bool logprobs);
nlohmann::json chat_response(const std::string& id, int64_t created, const std::string& model,
                             const std::vector<Choice>& choices, const Usage& usage, bool logprobs);
// Stream chunks: one choice delta; `first` adds the assistant role (chat). usage chunk has no choices.
nlohmann::json completion_chunk(const std::string& id, int64_t created, const std::string& model,
                                const Choice& delta, bool logprobs);
nlohmann::json chat_chunk(const std::string& id, int64_t created, const std::string& model,
                          const Choice& delta, bool first, bool logprobs);
// One structured delta as a chat chunk's `delta`: {"content"}, {"reasoning_content"}, or {"tool_calls":
// [{"index", "id", "type", "function": {"name", "arguments": ""}}]} / [{"index", "function": {"arguments"}}].
nlohmann::json chat_delta_json(const OutputDelta& d);
// A chat chunk around one `delta` object; `finish_reason` "" = null; logprobs from `lp` when `logprobs`.
nlohmann::json chat_delta_chunk(const std::string& id, int64_t created, const std::string& model, int index,
                                const nlohmann::json& delta, const std::string& finish_reason, bool logprobs,
                                const Choice& lp);
nlohmann::json usage_chunk(const std::string& id, int64_t created, const std::string& model, bool chat,
                           const Usage& usage);
nlohmann::json models_response(const std::string& model, int64_t created, int max_model_len);

// "data: <json>\n\n"
std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace spk::rt
