// One /v1/completions or /v1/chat/completions request from parsed body to response: prompt rendering
// and tokenization, length checks against max_model_len, n sequences submitted to the engine,
// detokenization (IncrementalDecoder) and stop strings (StopChecker) per choice. Internal to serve/.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/chat/chat_template.h"
#include "runtime/serve/chat_output.h"
#include "runtime/serve/engine.h"
#include "runtime/serve/metrics.h"
#include "runtime/serve/openai_protocol.h"
#include "runtime/serve/output_parser.h"
#include "runtime/tokenizer/tokenizer.h"

namespace spk::rt {

struct ChoiceState {
  int index = 0;
  Submitted sub;
  std::unique_ptr<IncrementalDecoder> dec;
  std::unique_ptr<OutputParser> parser;  // reasoning -> stop strings -> tool calls
  Choice pending;                        // content text (and logprobs) not yet sent
  std::vector<OutputDelta> deltas;       // structured output not yet taken (take_deltas / chat stream)
  int completion_tokens = 0;
  int consumed = 0;          // tokens taken from the channel
  int reasoning_tokens = 0;  // of those, decoded while the reasoning section was open before and after
                             // (its markers not counted: a token that opens or closes it is not reasoning)
  int cached_tokens = 0;     // prompt tokens the prefix cache supplied (the engine says with the first token)
  bool done = false;
  bool role_sent = false;    // chat streams: the first chunk carries the assistant role
  bool finish_sent = false;  // streams: the chunk with finish_reason went out
  FinishReason finish = FinishReason::none;
  std::string error;
};

// A chat request's prompt as token ids: chat_template_kwargs, messages, tools rendered by the model's
// template, then tokenized (what Generation::start submits; /v1/messages/count_tokens counts it). Errors
// name the field the template choked on (never a server path).
// `prompt_text`, when given, receives the rendered text (the reasoning parser looks for an open <think>).
std::variant<std::vector<int32_t>, ApiError> chat_prompt_ids(const ChatConfig& chat, const Tokenizer& tok,
                                                             const ApiRequest& req,
                                                             std::string* prompt_text = nullptr);

// The server's --default-chat-template-kwargs under the request's own (the request wins key by key).
void apply_default_kwargs(ApiRequest& req, const nlohmann::ordered_json& defaults);

// Whether a chat request's output goes through the tool-call parser: a parser is set, the request has
// tools and tool_choice is not "none".
bool parses_tool_calls(const ApiRequest& req, const OutputParsing& parsing);

// A live request: its choices and the bookkeeping to answer it.
class Generation {
 public:
  Generation(Engine& engine, std::shared_ptr<const Tokenizer> tok, Metrics& metrics, ApiRequest req,
             std::string model_name);
  ~Generation();  // aborts whatever still runs

  // Tokenizes and submits. An ApiError means nothing was submitted. `parsing` applies to chat requests.
  std::optional<ApiError> start(const ChatConfig& chat, const OutputParsing& parsing = {});

  // Waits up to `timeout` for news on any choice; updates pending text. True when something changed.
  bool poll(std::chrono::milliseconds timeout);
  [[nodiscard]] bool all_done() const;
  void abort_all();

  // Streaming: the SSE events for whatever is pending (clears it); the final events when all done.
  std::string take_stream_events();
  // Non-streaming: the full response body (call when all_done()), or an error.
  std::variant<nlohmann::json, ApiError> response() const;

  // The structured view for front-ends (runtime/serve/chat_output.h): the deltas of choice `i` produced
  // since the last call, the whole output of a finished choice, the usage so far, and the first choice's
  // engine failure in client form (nullopt when none).
  std::vector<OutputDelta> take_deltas(int i);
  [[nodiscard]] ChoiceOutput output(int i) const;
  [[nodiscard]] Usage usage() const;
  [[nodiscard]] std::optional<ApiError> failure() const;
  [[nodiscard]] int num_choices() const { return static_cast<int>(choices_.size()); }
  [[nodiscard]] bool choice_done(int i) const { return choices_.at(static_cast<size_t>(i)).done; }
  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] int64_t created() const { return created_; }

  [[nodiscard]] const ApiRequest& request() const { return req_; }
  [[nodiscard]] bool stream_finished() const { return final_sent_; }

 private:
  void consume(ChoiceState& c, SeqUpdate& u);
  void keep_text(ChoiceState& c, size_t from);
  [[nodiscard]] std::string finish_of(const ChoiceState& c) const;
  std::string chat_stream_events(ChoiceState& c, bool finishing);
  [[nodiscard]] int cached_tokens() const { return choices_.empty() ? 0 : choices_[0].cached_tokens; }

  Engine& engine_;
  std::shared_ptr<const Tokenizer> tok_;
  Metrics& metrics_;
  ApiRequest req_;
  std::string model_;
  std::string id_;
  int64_t created_ = 0;
  int prompt_tokens_ = 0;
  std::vector<ChoiceState> choices_;
  bool final_sent_ = false;
};

}  // namespace spk::rt
