// /v1/responses answers: the response object, its output items, the stream's events and the ApiFront
// (responses_api.h).
#include "runtime/serve/responses_api.h"

#include <chrono>

#include "runtime/serve/completion_handler.h"
#include "runtime/serve/response_store.h"

namespace spk::rt {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

json openai_error_body(const FieldError& e) {
  const char* type = e.status >= 500 ? "server_error" : "invalid_request_error";
  if (e.status == 429) type = "rate_limit_error";
  return api_error(e.status, e.message, e.param, type, e.code).body();
}

namespace {

json usage_json(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json text_part(const std::string& text) {
  return {
      {"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}
json summary_part(const std::string& text) { return {{"type", "summary_text"}, {"text", text}}; }

json message_item(const std::string& text, const char* status, bool with_part) {
  return {{"type", "message"},
          {"id", make_wire_id("msg_")},
          {"status", status},
          {"role", "assistant"},
          {"content", with_part ? json::array({text_part(text)}) : json::array()}};
}
json reasoning_item(const std::string& text, bool with_part) {
  return {{"type", "reasoning"},
          {"id", make_wire_id("rs_")},
          {"summary", with_part ? json::array({summary_part(text)}) : json::array()},
          {"encrypted_content", nullptr}};
}
// A parsed call of `flat` (the name the template was offered): a namespaced one carries its namespace.
json function_item(const std::string& call_id, const ResponsesTools& tools, const std::string& flat,
                   const std::string& args, const char* status) {
  const ToolOrigin o = tools.origin_of(flat);
  json item = {{"type", "function_call"},
               {"id", make_wire_id("fc_")},
               {"call_id", call_id.empty() ? make_wire_id("call_") : call_id},
               {"name", o.name}};
  if (!o.ns.empty()) item["namespace"] = o.ns;
  item["arguments"] = args;
  item["status"] = status;
  return item;
}

}  // namespace

json response_object(const std::string& id, int64_t created_at, const std::string& model,
                     const ResponsesRequest& r, const std::string& status, const json& output,
                     const Usage* usage) {
  const ApiRequest& q = r.api;
  json o = {
      {"id", id},
      {"object", "response"},
      {"created_at", created_at},
      {"status", status},
      {"background", false},
      {"error", nullptr},
      {"incomplete_details", nullptr},
      {"instructions", r.instructions.empty() ? json(nullptr) : json(r.instructions)},
      {"max_output_tokens", q.max_tokens_given ? json(q.gen.max_tokens) : json(nullptr)},
      {"max_tool_calls", r.echo.value("max_tool_calls", json(nullptr))},
      {"metadata", json::object()},
      {"model", model},
      {"output", output},
      {"parallel_tool_calls", r.echo.value("parallel_tool_calls", true)},
      {"previous_response_id", r.previous_response_id.empty() ? json(nullptr) : json(r.previous_response_id)},
      {"reasoning", r.echo.value("reasoning", json::object())},
      {"store", r.store},
      {"temperature", q.gen.temperature},
      {"text", {{"format", {{"type", "text"}}}}},
      {"tool_choice", r.echo.value("tool_choice", json("auto"))},
      {"tools", r.echo.value("tools", json::array())},
      {"top_p", q.gen.top_p},
      {"truncation", "disabled"},
      {"usage", usage ? usage_json(*usage) : json(nullptr)},
      {"user", nullptr}};
  if (status == "incomplete") o["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (!r.tools.dropped.empty()) o["dropped_tools"] = r.tools.dropped;  // not OpenAI's: says what was left out
  return o;
}

json response_output(const ChoiceOutput& out, const ResponsesTools& tools) {
  const bool cut = out.finish_reason == "length";
  json items = json::array();
  if (!out.reasoning.empty()) items.push_back(reasoning_item(out.reasoning, true));
  if (!out.content.empty() || out.tool_calls.empty())
    items.push_back(message_item(out.content, cut ? "incomplete" : "completed", true));
  for (const auto& t : out.tool_calls)
    items.push_back(function_item(t.id, tools, t.name, t.arguments, "completed"));
  return items;
}

ojson output_as_messages(const json& output) {
  ojson a = {{"role", "assistant"}, {"content", ""}};
  std::string content, reasoning;
  for (const auto& it : output) {
    const std::string type = it.value("type", "");
    if (type == "reasoning") {
      for (const auto& p : it.value("summary", json::array())) reasoning += p.value("text", "");
    } else if (type == "message") {
      for (const auto& p : it.value("content", json::array())) content += p.value("text", "");
    } else if (type == "function_call") {
      const std::string args = it.value("arguments", "");
      ojson parsed = json_shape_problem(args) ? ojson() : ojson::parse(args, nullptr, false);
      const std::string ns = it.value("namespace", ""), name = it.value("name", "");
      if (!a.contains("tool_calls")) a["tool_calls"] = ojson::array();
      a["tool_calls"].push_back({{"id", it.value("call_id", "")},
                                 {"type", "function"},
                                 {"function",
                                  {{"name", ns.empty() ? name : flat_tool_name(ns, name)},
                                   {"arguments", parsed.is_object() ? parsed : ojson(args)}}}});
    }
  }
  a["content"] = content;
  if (!reasoning.empty()) a["reasoning_content"] = reasoning;
  return ojson::array({a});
}

ResponsesStream::ResponsesStream(std::string id, int64_t created_at, std::string model,
                                 const ResponsesRequest& r)
    : id_(std::move(id)), created_at_(created_at), model_(std::move(model)), req_(r) {}

std::string ResponsesStream::event(const char* type, json body) {
  body["type"] = type;
  body["sequence_number"] = seq_++;
  return sse_named_event(type, body);
}

std::string ResponsesStream::begin() {
  const json r = response_object(id_, created_at_, model_, req_, "in_progress", json::array(), nullptr);
  std::string ev = event("response.created", {{"response", r}});  // sequenced: numbers in order
  return ev + event("response.in_progress", {{"response", r}});
}

std::string ResponsesStream::open(json item) {
  item_ = std::move(item);
  text_.clear();
  const int oi = static_cast<int>(output_.size());
  const json id = item_["id"];
  std::string ev = event("response.output_item.added", {{"output_index", oi}, {"item", item_}});
  const std::string type = item_["type"];
  if (type == "message")
    ev += event("response.content_part.added",
                {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"part", text_part("")}});
  else if (type == "reasoning")
    ev += event("response.reasoning_summary_part.added",
                {{"item_id", id}, {"output_index", oi}, {"summary_index", 0}, {"part", summary_part("")}});
  return ev;
}

std::string ResponsesStream::close(const char* status) {
  if (item_.is_null()) return {};
  const int oi = static_cast<int>(output_.size());
  const json id = item_["id"];
  const std::string type = item_["type"];
  std::string ev;
  if (type == "message") {
    ev += event("response.output_text.done", {{"item_id", id},
                                              {"output_index", oi},
                                              {"content_index", 0},
                                              {"text", text_},
                                              {"logprobs", json::array()}});
    ev += event("response.content_part.done",
                {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"part", text_part(text_)}});
    item_["content"] = json::array({text_part(text_)});
    item_["status"] = status;
  } else if (type == "reasoning") {
    ev += event("response.reasoning_summary_text.done",
                {{"item_id", id}, {"output_index", oi}, {"summary_index", 0}, {"text", text_}});
    ev += event("response.reasoning_summary_part.done",
                {{"item_id", id}, {"output_index", oi}, {"summary_index", 0}, {"part", summary_part(text_)}});
    item_["summary"] = json::array({summary_part(text_)});
  } else {
    ev += event("response.function_call_arguments.done",
                {{"item_id", id}, {"output_index", oi}, {"name", item_["name"]}, {"arguments", text_}});
    item_["arguments"] = text_;
    item_["status"] = status;
  }
  ev += event("response.output_item.done", {{"output_index", oi}, {"item", item_}});
  output_.push_back(std::move(item_));
  item_ = nullptr;
  open_tool_ = -1;
  return ev;
}

std::string ResponsesStream::push(const OutputDelta& d) {
  const int oi = static_cast<int>(output_.size());
  const std::string open_type = item_.is_null() ? "" : item_["type"].get<std::string>();
  std::string ev;
  switch (d.kind) {
    case OutputDelta::Kind::content:
      if (d.text.empty()) return ev;
      if (open_type != "message") {
        ev += close("completed");
        ev += open(message_item("", "in_progress", false));
      }
      text_ += d.text;
      return ev + event("response.output_text.delta", {{"item_id", item_["id"]},
                                                       {"output_index", static_cast<int>(output_.size())},
                                                       {"content_index", 0},
                                                       {"delta", d.text},
                                                       {"logprobs", json::array()}});
    case OutputDelta::Kind::reasoning:
      if (d.text.empty()) return ev;
      if (open_type != "reasoning") {
        ev += close("completed");
        ev += open(reasoning_item("", false));
      }
      text_ += d.text;
      return ev + event("response.reasoning_summary_text.delta",
                        {{"item_id", item_["id"]},
                         {"output_index", static_cast<int>(output_.size())},
                         {"summary_index", 0},
                         {"delta", d.text}});
    case OutputDelta::Kind::tool_call_begin:
      ev += close("completed");  // sequenced: close the old item before opening the new
      ev += open(function_item(d.id, req_.tools, d.name, "", "in_progress"));
      open_tool_ = d.tool_index;
      return ev;
    case OutputDelta::Kind::tool_call_arguments:
      // Arguments go to the call now open (the parsers finish one call before they begin the next).
      if (d.text.empty() || open_type != "function_call" || open_tool_ != d.tool_index) return ev;
      text_ += d.text;
      return event("response.function_call_arguments.delta",
                   {{"item_id", item_["id"]}, {"output_index", oi}, {"delta", d.text}});
  }
  return ev;
}

std::string ResponsesStream::finish(const ChoiceOutput& out, const Usage& usage) {
  const bool cut = out.finish_reason == "length";
  std::string ev;
  if (output_.empty() && item_.is_null()) ev += open(message_item("", "in_progress", false));
  ev += close(cut ? "incomplete" : "completed");
  const char* status = cut ? "incomplete" : "completed";
  final_ = response_object(id_, created_at_, model_, req_, status, output_, &usage);
  return ev + event(cut ? "response.incomplete" : "response.completed", {{"response", final_}});
}

std::string ResponsesStream::fail(const std::string& message) {
  std::string ev = close("incomplete");
  final_ = response_object(id_, created_at_, model_, req_, "failed", output_, nullptr);
  final_["error"] = {{"code", "server_error"}, {"message", message}};
  return ev + event("response.failed", {{"response", final_}});
}

ResponsesFront::ResponsesFront(ResponsesRequest req, std::string model, ResponseStore* store)
    : req_(std::move(req)),
      id_(make_wire_id("resp_")),
      model_(std::move(model)),
      created_at_(std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count()),
      store_(store),
      stream_(id_, created_at_, model_, req_) {}

void ResponsesFront::remember(const json& response) {
  if (!store_ || !req_.store) return;
  ojson conversation = req_.conversation.is_array() ? req_.conversation : ojson::array();
  for (auto& m : output_as_messages(response["output"])) conversation.push_back(std::move(m));
  store_->put(id_, StoredResponse{dump_json(response), std::move(conversation)});  // false: over the budget
}

std::string ResponsesFront::take_events(Generation& gen) {
  std::string ev;
  if (!begun_) {
    ev += stream_.begin();
    begun_ = true;
  }
  for (const auto& d : gen.take_deltas(0)) ev += stream_.push(d);
  if (gen.all_done() && !finished_) {
    if (auto f = gen.failure()) {
      ev += stream_.fail(f->message);
    } else {
      ev += stream_.finish(gen.output(0), gen.usage());
      remember(stream_.final_response());
    }
    finished_ = true;
  }
  return ev;
}

std::pair<int, json> ResponsesFront::response(Generation& gen) {
  if (auto f = gen.failure()) return {f->status, f->body()};
  const ChoiceOutput out = gen.output(0);
  const Usage u = gen.usage();
  json r = response_object(id_, created_at_, model_, req_,
                           out.finish_reason == "length" ? "incomplete" : "completed",
                           response_output(out, req_.tools), &u);
  remember(r);
  return {200, r};
}

}  // namespace spk::rt
