// /v1/messages answers: the message object, the stream's events and the ApiFront (messages_api.h).
#include "runtime/serve/messages_api.h"

#include <ctime>

#include "runtime/serve/completion_handler.h"

namespace spk::rt {

using nlohmann::json;

json anthropic_error_body(int status, const std::string& message) {
  const char* type = "api_error";
  switch (status) {
    case 400:
    case 405:
    case 411:
    case 417:
    case 431:
      type = "invalid_request_error";
      break;
    case 401:
      type = "authentication_error";
      break;
    case 403:
      type = "permission_error";
      break;
    case 404:
      type = "not_found_error";
      break;
    case 408:
      type = "timeout_error";
      break;
    case 413:
      type = "request_too_large";
      break;
    case 429:
      type = "rate_limit_error";
      break;
    case 503:
    case 529:
      type = "overloaded_error";
      break;
    default:
      break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

json anthropic_error_body(const FieldError& e) { return anthropic_error_body(e.status, e.message); }

json anthropic_models_response(const std::string& model, int64_t created) {
  const std::time_t t = static_cast<std::time_t>(created);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char at[32];
  std::strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return {{"data",
           json::array({{{"type", "model"}, {"id", model}, {"display_name", model}, {"created_at", at}}})},
          {"has_more", false},
          {"first_id", model},
          {"last_id", model}};
}

std::string anthropic_context_message(const ContextOverflow& c) {
  if (c.max_tokens <= 0)
    return "prompt is too long: " + std::to_string(c.input_tokens) + " tokens > " + std::to_string(c.limit) +
           " maximum";
  return "input length and `max_tokens` exceed context limit: " + std::to_string(c.input_tokens) + " + " +
         std::to_string(c.max_tokens) + " > " + std::to_string(c.limit) +
         ", decrease input length or `max_tokens` and try again";
}

FieldError from_api_error(const ApiError& e) {
  // Anthropic's own wording: Claude Code parses it (retries with a smaller max_tokens, sizes compaction).
  if (e.context) return FieldError{e.status, e.param, anthropic_context_message(*e.context), e.code};
  // Generation::start names the prompt field of the chat API: on the other APIs it is the messages too.
  std::string msg = e.message;
  if (!e.param.empty() && msg.rfind(e.param, 0) != 0) msg = e.param + ": " + msg;
  return FieldError{e.status, e.param, msg, e.code};
}

std::string anthropic_tool_id(const std::string& call_id) {
  if (call_id.rfind("toolu_", 0) == 0) return call_id;
  if (call_id.empty()) return make_wire_id("toolu_");
  return "toolu_" + (call_id.rfind("call_", 0) == 0 ? call_id.substr(5) : call_id);
}

std::string anthropic_stop_reason(const ChoiceOutput& out) {
  if (out.finish_reason == "length") return "max_tokens";
  if (!out.tool_calls.empty() || out.finish_reason == "tool_calls") return "tool_use";
  if (!out.stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

namespace {

json tool_input(const std::string& arguments) {
  json in = json::parse(arguments, nullptr, false);
  return in.is_object() ? in : json::object();  // the parsers report only complete JSON objects
}

// Anthropic counts cache reads apart: input_tokens + cache_read_input_tokens = the whole prompt.
json usage_json(int input_tokens, int output_tokens, int cached_tokens = 0) {
  return {{"input_tokens", input_tokens - cached_tokens},
          {"output_tokens", output_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached_tokens}};
}

json stop_sequence(const ChoiceOutput& out) {
  return out.stop_sequence.empty() ? json(nullptr) : json(out.stop_sequence);
}

}  // namespace

json messages_response(const std::string& id, const std::string& model, const ChoiceOutput& out,
                       const Usage& usage) {
  json content = json::array();
  if (!out.reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", out.reasoning}, {"signature", ""}});
  if (!out.content.empty() || out.tool_calls.empty())
    content.push_back({{"type", "text"}, {"text", out.content}});
  for (const auto& t : out.tool_calls)
    content.push_back({{"type", "tool_use"},
                       {"id", anthropic_tool_id(t.id)},
                       {"name", t.name},
                       {"input", tool_input(t.arguments)}});
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", content},
          {"stop_reason", anthropic_stop_reason(out)},
          {"stop_sequence", stop_sequence(out)},
          {"usage", usage_json(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)}};
}

MessagesStream::MessagesStream(std::string id, std::string model, int input_tokens)
    : id_(std::move(id)), model_(std::move(model)), input_tokens_(input_tokens) {}

std::string MessagesStream::begin(const Usage& usage) {
  json msg = {{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model_},
              {"content", json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", usage_json(input_tokens_, usage.completion_tokens, usage.cached_tokens)}};
  return sse_named_event("message_start", {{"type", "message_start"}, {"message", msg}});
}

std::string MessagesStream::open(const json& block) {
  std::string ev = close();
  open_index_ = next_index_++;
  open_type_ = block["type"].get<std::string>();
  ev += sse_named_event("content_block_start",
                        {{"type", "content_block_start"}, {"index", open_index_}, {"content_block", block}});
  if (!pinged_) {
    ev += sse_named_event("ping", {{"type", "ping"}});
    pinged_ = true;
  }
  return ev;
}

std::string MessagesStream::close() {
  if (open_index_ < 0) return {};
  std::string ev =
      sse_named_event("content_block_stop", {{"type", "content_block_stop"}, {"index", open_index_}});
  open_index_ = -1;
  open_type_.clear();
  open_tool_ = -1;
  return ev;
}

std::string MessagesStream::push(const OutputDelta& d) {
  auto delta = [](int index, const json& dl) {
    return sse_named_event("content_block_delta",
                           {{"type", "content_block_delta"}, {"index", index}, {"delta", dl}});
  };
  std::string ev;
  switch (d.kind) {
    case OutputDelta::Kind::content:
      if (d.text.empty()) return ev;
      if (open_type_ != "text") ev += open({{"type", "text"}, {"text", ""}});
      return ev + delta(open_index_, {{"type", "text_delta"}, {"text", d.text}});
    case OutputDelta::Kind::reasoning:
      if (d.text.empty()) return ev;
      if (open_type_ != "thinking") ev += open({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      return ev + delta(open_index_, {{"type", "thinking_delta"}, {"thinking", d.text}});
    case OutputDelta::Kind::tool_call_begin:
      ev += open({{"type", "tool_use"},
                  {"id", anthropic_tool_id(d.id)},
                  {"name", d.name},
                  {"input", json::object()}});
      open_tool_ = d.tool_index;
      if (d.tool_index >= 0) {
        if (tool_block_.size() <= static_cast<size_t>(d.tool_index))
          tool_block_.resize(static_cast<size_t>(d.tool_index) + 1, -1);
        tool_block_[static_cast<size_t>(d.tool_index)] = open_index_;
      }
      return ev;
    case OutputDelta::Kind::tool_call_arguments: {
      if (d.text.empty()) return ev;
      int index = open_tool_ == d.tool_index ? open_index_ : -1;
      if (index < 0 && d.tool_index >= 0 && static_cast<size_t>(d.tool_index) < tool_block_.size())
        index = tool_block_[static_cast<size_t>(d.tool_index)];
      if (index < 0) return ev;  // arguments of a call never begun: nothing to attach them to
      return delta(index, {{"type", "input_json_delta"}, {"partial_json", d.text}});
    }
  }
  return ev;
}

std::string MessagesStream::finish(const ChoiceOutput& out, const Usage& usage) {
  // An empty answer still has one (empty) text block, as in the non-streamed message.
  std::string ev = next_index_ == 0 ? open({{"type", "text"}, {"text", ""}}) : std::string();
  ev += close();
  ev += sse_named_event(
      "message_delta",
      {{"type", "message_delta"},
       {"delta", {{"stop_reason", anthropic_stop_reason(out)}, {"stop_sequence", stop_sequence(out)}}},
       // Cumulative, as Anthropic's: the same input split as message_start, the final output count.
       {"usage", usage_json(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)}});
  ev += sse_named_event("message_stop", {{"type", "message_stop"}});
  return ev;
}

std::string MessagesStream::fail(const std::string& message) {
  return sse_named_event("error", anthropic_error_body(500, message));
}

MessagesFront::MessagesFront(std::string model, int input_tokens)
    : id_(make_wire_id("msg_")), model_(model), stream_(id_, std::move(model), input_tokens) {}

std::string MessagesFront::take_events(Generation& gen) {
  std::string ev;
  if (!begun_) {
    // message_start waits for the prompt to be processed (the first token, or the end), so its usage
    // already holds the prefix cache's share, as message_delta's does.
    const Usage u = gen.usage();
    if (u.completion_tokens == 0 && !gen.all_done()) return ev;
    ev += stream_.begin(u);
    begun_ = true;
  }
  for (const auto& d : gen.take_deltas(0)) ev += stream_.push(d);
  if (gen.all_done() && !finished_) {
    if (auto f = gen.failure())
      ev += stream_.fail(f->message);
    else
      ev += stream_.finish(gen.output(0), gen.usage());
    finished_ = true;
  }
  return ev;
}

std::pair<int, json> MessagesFront::response(Generation& gen) {
  if (auto f = gen.failure()) return {f->status, anthropic_error_body(f->status, f->message)};
  return {200, messages_response(id_, model_, gen.output(0), gen.usage())};
}

}  // namespace spk::rt
