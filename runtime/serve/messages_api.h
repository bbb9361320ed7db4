// Anthropic Messages API (/v1/messages, /v1/messages/count_tokens: what Claude Code speaks) on the engine
// and chat templates of /v1/chat/completions. A request is mapped to the template's OpenAI-form messages
// and tools (system first; tool_result blocks become role "tool" messages, tool_use blocks assistant
// tool_calls, thinking blocks reasoning_content); the answer is built from the choice's structured output
// (chat_output.h), so tool calls and reasoning appear as tool_use and thinking blocks once the parsers
// produce them. Errors: {"type":"error","error":{"type","message"}} with the field's path in the message.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "runtime/serve/api_front.h"
#include "runtime/serve/chat_output.h"
#include "runtime/serve/openai_protocol.h"

namespace spk::rt {

struct MessagesRequest {
  ApiRequest api;  // chat = true; messages and tools in the chat template's form; n = 1
  // tool_choice in OpenAI form: "auto" | "required" | {"type":"function","function":{"name"}}; null when
  // absent; copied to api.tool_choice. "none" drops the tools from the prompt (no call parsing). "any" and
  // "tool" are refused (no constrained decoding yet: output_constraints.h).
  nlohmann::ordered_json tool_choice;
};

// `count_tokens`: the /v1/messages/count_tokens schema (no max_tokens, no sampling fields).
std::variant<MessagesRequest, FieldError> parse_messages_request(std::string_view body,
                                                                 const std::string& served_model,
                                                                 bool count_tokens = false);

// Anthropic's error body, the error type chosen by status (400 invalid_request_error, 401
// authentication_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 503
// overloaded_error, else api_error).
nlohmann::json anthropic_error_body(int status, const std::string& message);
nlohmann::json anthropic_error_body(const FieldError& e);
// GET /v1/models for an Anthropic client (the request carries `anthropic-version`): the Models API's page,
// {data: [{type: "model", id, display_name, created_at (RFC 3339)}], has_more, first_id, last_id}.
nlohmann::json anthropic_models_response(const std::string& model, int64_t created);
// An ApiError of Generation::start for /v1/messages; a context overflow in Anthropic's words
// (anthropic_context_message).
FieldError from_api_error(const ApiError& e);
// "prompt is too long: {n} tokens > {limit} maximum", or "input length and `max_tokens` exceed context
// limit: {input} + {max_tokens} > {limit}, decrease input length or `max_tokens` and try again" — the
// texts Anthropic's API sends and Claude Code parses.
std::string anthropic_context_message(const ContextOverflow& c);

// "toolu_..." for a parser's call id (kept when it already is one).
std::string anthropic_tool_id(const std::string& call_id);
// end_turn | max_tokens | stop_sequence | tool_use
std::string anthropic_stop_reason(const ChoiceOutput& out);

// The whole (non-streamed) message.
nlohmann::json messages_response(const std::string& id, const std::string& model, const ChoiceOutput& out,
                                 const Usage& usage);

// The stream's events from the structured deltas: message_start, then per block content_block_start
// (the first one followed by ping), content_block_delta (text_delta / thinking_delta / input_json_delta),
// content_block_stop; at the end message_delta (stop_reason, stop_sequence, usage) and message_stop, or an
// error event. Both usages have Anthropic's four fields with the same input split (input_tokens the
// uncached part, cache_read_input_tokens the cached part): message_start's from `usage` at the first
// token, message_delta's the final counts (cumulative).
class MessagesStream {
 public:
  MessagesStream(std::string id, std::string model, int input_tokens);
  std::string begin(const Usage& usage);
  std::string push(const OutputDelta& d);
  std::string finish(const ChoiceOutput& out, const Usage& usage);
  std::string fail(const std::string& message);

 private:
  std::string open(const nlohmann::json& block);
  std::string close();

  std::string id_, model_;
  int input_tokens_ = 0;
  int next_index_ = 0;
  int open_index_ = -1;          // the block now open, -1 when none
  std::string open_type_;        // "text" | "thinking" | "tool_use"
  int open_tool_ = -1;           // tool_index of the open tool_use block
  std::vector<int> tool_block_;  // tool_index -> block index
  bool pinged_ = false;
};

// The ApiFront of /v1/messages over one Generation (choice 0).
class MessagesFront : public ApiFront {
 public:
  MessagesFront(std::string model, int input_tokens);
  std::string take_events(Generation& gen) override;
  [[nodiscard]] bool finished() const override { return finished_; }
  std::pair<int, nlohmann::json> response(Generation& gen) override;

 private:
  std::string id_, model_;
  MessagesStream stream_;
  bool begun_ = false, finished_ = false;
};

}  // namespace spk::rt
