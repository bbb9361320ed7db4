// OpenAI Responses API (/v1/responses: what Codex CLI speaks) on the engine and chat templates of
// /v1/chat/completions. Input items map to the template's messages (instructions first as the system
// message; function_call items become assistant tool_calls, function_call_output items role "tool"
// messages, reasoning items reasoning_content); the answer's output items come from the choice's
// structured output (chat_output.h): a reasoning item, a message with output_text, function_call items.
// previous_response_id continues a stored conversation (response_store.h). Errors are OpenAI's
// {"error":{"message","type","param","code"}} naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/serve/api_front.h"
#include "runtime/serve/chat_output.h"
#include "runtime/serve/openai_protocol.h"
#include "runtime/serve/responses_tools.h"

namespace spk::rt {

class ResponseStore;

struct ResponsesRequest {
  ApiRequest api;  // chat = true, n = 1; api.messages is filled by resolve_history()
  std::string instructions;
  nlohmann::ordered_json input_messages = nlohmann::ordered_json::array();  // this turn's, chat form
  nlohmann::ordered_json conversation;  // resolve_history(): the previous turns + this input, no instructions
  std::string previous_response_id;
  bool store = true;
  // The request's settings echoed in the response object (tools as sent, tool_choice, reasoning, ...).
  nlohmann::json echo = nlohmann::json::object();
  // "auto" | "none" | "required" | {"type":"function","function":{"name"}} (OpenAI chat form); null when
  // absent; copied to api.tool_choice. "none" drops the tools from the prompt (no call parsing). "required"
  // and a named function are refused (no constrained decoding yet: output_constraints.h).
  nlohmann::ordered_json tool_choice;
  // The tools as offered to the template (namespaces flattened), the way back from a flat name, and the
  // hosted tools left out (echoed as `dropped_tools`).
  ResponsesTools tools;
};

std::variant<ResponsesRequest, FieldError> parse_responses_request(std::string_view body,
                                                                   const std::string& served_model);

// api.messages = [system: instructions] + the previous response's conversation + this turn's input.
// An unknown (or evicted, or store=false) previous_response_id is a 400 naming previous_response_id.
std::optional<FieldError> resolve_history(ResponsesRequest& r, const ResponseStore& store);

// OpenAI's error body for a FieldError.
nlohmann::json openai_error_body(const FieldError& e);

// The response object around `output` items; status "in_progress" | "completed" | "incomplete" | "failed".
nlohmann::json response_object(const std::string& id, int64_t created_at, const std::string& model,
                               const ResponsesRequest& r, const std::string& status,
                               const nlohmann::json& output, const Usage* usage);

// The output items of a finished choice (non-streamed): reasoning?, message?, function_call* (a call of a
// namespaced tool with its `namespace` and the name within it).
nlohmann::json response_output(const ChoiceOutput& out, const ResponsesTools& tools);

// The stream's events from the structured deltas, each with its sequence_number: response.created,
// response.in_progress; per item response.output_item.added ... response.output_item.done (a message:
// content_part.added, output_text.delta*, output_text.done, content_part.done; a function call:
// function_call_arguments.delta*, .done; reasoning: reasoning_summary_part.added,
// reasoning_summary_text.delta*, .done, reasoning_summary_part.done); then response.completed or
// response.incomplete (max_output_tokens), or response.failed.
class ResponsesStream {
 public:
  ResponsesStream(std::string id, int64_t created_at, std::string model, const ResponsesRequest& r);
  std::string begin();
  std::string push(const OutputDelta& d);
  std::string finish(const ChoiceOutput& out, const Usage& usage);
  std::string fail(const std::string& message);
  // The final response object (after finish / fail).
  [[nodiscard]] const nlohmann::json& final_response() const { return final_; }

 private:
  std::string event(const char* type, nlohmann::json body);
  std::string open(nlohmann::json item);
  std::string close(const char* status);

  std::string id_;
  int64_t created_at_;
  std::string model_;
  const ResponsesRequest& req_;
  int seq_ = 0;
  nlohmann::json output_ = nlohmann::json::array();  // items done so far
  nlohmann::json item_;                              // the open item (null when none)
  std::string text_;                                 // the open item's text / arguments so far
  int open_tool_ = -1;
  nlohmann::json final_;
};

// The chat-form messages of a finished answer (what a follow-up turn's history holds; a namespaced call
// under its flat name).
nlohmann::ordered_json output_as_messages(const nlohmann::json& output);

// The ApiFront of /v1/responses over one Generation (choice 0); stores the answer when store is on.
class ResponsesFront : public ApiFront {
 public:
  ResponsesFront(ResponsesRequest req, std::string model, ResponseStore* store);
  std::string take_events(Generation& gen) override;
  [[nodiscard]] bool finished() const override { return finished_; }
  std::pair<int, nlohmann::json> response(Generation& gen) override;

 private:
  void remember(const nlohmann::json& response);

  ResponsesRequest req_;
  std::string id_, model_;
  int64_t created_at_;
  ResponseStore* store_;
  ResponsesStream stream_;
  bool begun_ = false, finished_ = false;
};

}  // namespace spk::rt
