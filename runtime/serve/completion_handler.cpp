#include "runtime/serve/completion_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <regex>

#include "runtime/serve/api_front.h"

namespace spk::rt {

namespace {

const char* finish_name(FinishReason f) {
  switch (f) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::none:
      break;
  }
  return "";
}

SamplingParams to_sampling(const GenerationParams& g) {
  SamplingParams p;
  p.temperature = g.temperature;
  p.top_k = g.top_k;
  p.top_p = g.top_p;
  p.min_p = g.min_p;
  p.seed = g.seed;
  p.repetition_penalty = g.repetition_penalty;
  p.presence_penalty = g.presence_penalty;
  p.frequency_penalty = g.frequency_penalty;
  p.max_tokens = static_cast<int>(g.max_tokens);  // start() checked it against max_model_len
  p.stop = g.stop;
  p.stop_token_ids = g.stop_token_ids;
  p.ignore_eos = g.ignore_eos;
  return p;
}

// a + b without overflow (both >= 0): what the client asked for in total, for the message.
int64_t sat_add(int64_t a, int64_t b) { return b > INT64_MAX - a ? INT64_MAX : a + b; }

// The client's half of a chat-template error. The full error reads "<template file>:<line>: <problem>
// (<fix>)"; the file is a path on this server, so the client gets only "line N: <problem>" (the whole
// error goes to the server log).
std::string template_problem(const Error& e) {
  static const std::regex located(R"(^.*?:(\d+): ([\s\S]*)$)");
  std::smatch m;
  if (std::regex_match(e.message, m, located)) return "line " + m[1].str() + ": " + m[2].str();
  const auto colon = e.message.find(": ");
  return colon == std::string::npos ? std::string("the template raised an error")
                                    : e.message.substr(colon + 2);
}

// Errors of the engine and the model as the client may see them: the fixed strings this code writes,
// else a generic line (a backend's error text can hold paths and library internals; the log has it).
std::string client_failure(const std::string& error) {
  for (const char* known : {"aborted", "server shutting down", "sequence does not fit the KV cache"})
    if (error == known) return error;
  return "the model step failed (the server log has the detail)";
}

}  // namespace

Generation::Generation(Engine& engine, std::shared_ptr<const Tokenizer> tok, Metrics& metrics, ApiRequest req,
                       std::string model_name)
    : engine_(engine),
      tok_(std::move(tok)),
      metrics_(metrics),
      req_(std::move(req)),
      model_(std::move(model_name)),
      id_(make_wire_id(req_.chat ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

Generation::~Generation() { abort_all(); }

void Generation::abort_all() {
  for (auto& c : choices_)
    if (!c.done) {
      engine_.abort(c.sub.id);
      c.done = true;
      c.error = "aborted";
    }
}

void apply_default_kwargs(ApiRequest& req, const nlohmann::ordered_json& defaults) {
  if (!defaults.is_object() || defaults.empty()) return;
  nlohmann::ordered_json merged = defaults;
  for (auto it = req.chat_template_kwargs.begin(); it != req.chat_template_kwargs.end(); ++it)
    merged[it.key()] = it.value();
  req.chat_template_kwargs = std::move(merged);
}

bool parses_tool_calls(const ApiRequest& req, const OutputParsing& parsing) {
  return req.chat && !parsing.tool_call_parser.empty() && req.tools.is_array() && !req.tools.empty() &&
         req.tool_choice != "none";
}

std::variant<std::vector<int32_t>, ApiError> chat_prompt_ids(const ChatConfig& chat, const Tokenizer& tok,
                                                             const ApiRequest& req,
                                                             std::string* prompt_text) {
  if (!chat.chat_template)
    return api_error(400, "this model has no chat template (tokenizer_config.json has no chat_template)",
                     "messages");
  nlohmann::ordered_json ctx = req.chat_template_kwargs;
  ctx["messages"] = req.messages;
  if (auto p = normalise_messages(ctx["messages"], chat.expects))
    return api_error(400, p->message, "messages");
  ctx["add_generation_prompt"] = req.add_generation_prompt;
  ctx["bos_token"] = chat.bos_token;
  ctx["eos_token"] = chat.eos_token;
  if (!req.tools.is_null()) ctx["tools"] = req.tools;
  auto text = chat.chat_template->render(ctx);
  if (!text.ok()) {
    spdlog::warn("chat template: {}", text.error().what());
    const bool kwargs = text.error().message.find("clashes with a template global") != std::string::npos;
    return api_error(400, "the chat template cannot render this request: " + template_problem(text.error()),
                     kwargs ? "chat_template_kwargs" : "messages");
  }
  if (prompt_text) *prompt_text = *text;
  return tok.encode(*text, /*add_special_tokens=*/false);  // the template already wrote bos
}

std::optional<ApiError> Generation::start(const ChatConfig& chat, const OutputParsing& parsing) {
  std::vector<int32_t> ids;
  std::string prompt_text;
  const char* prompt_param = req_.chat ? "messages" : "prompt";
  if (req_.chat) {
    auto r = chat_prompt_ids(chat, *tok_, req_, &prompt_text);
    if (auto* e = std::get_if<ApiError>(&r)) return *e;
    ids = std::move(std::get<std::vector<int32_t>>(r));
  } else if (req_.prompt_is_ids) {
    ids = req_.prompt_ids;
    for (int32_t t : ids)
      if (static_cast<size_t>(t) >= tok_->vocab_size())
        return api_error(400,
                         "prompt token id " + std::to_string(t) + " is outside the vocabulary (size " +
                             std::to_string(tok_->vocab_size()) + ")",
                         "prompt");
  } else {
    ids = tok_->encode(req_.prompt, /*add_special_tokens=*/true);
  }
  prompt_tokens_ = static_cast<int>(ids.size());
  const int L = engine_.config().max_model_len;
  if (ids.empty()) return api_error(400, "the prompt is empty after tokenization", prompt_param);
  if (prompt_tokens_ >= L) {
    ApiError e = api_error(400,
                           "This model's maximum context length is " + std::to_string(L) +
                               " tokens. However, your prompt has " + std::to_string(prompt_tokens_) +
                               " tokens (shorten it)",
                           prompt_param);
    e.context = ContextOverflow{prompt_tokens_, 0, L};
    return e;
  }
  auto& g = req_.gen;
  // 64-bit, and compared as room left (L - prompt > 0 here), so no sum can wrap past the check.
  const int64_t room = static_cast<int64_t>(L) - prompt_tokens_;
  if (req_.max_tokens_given && g.max_tokens > room) {
    ApiError e = api_error(
        400,
        "This model's maximum context length is " + std::to_string(L) + " tokens. However, you requested " +
            std::to_string(sat_add(prompt_tokens_, g.max_tokens)) + " tokens (" +
            std::to_string(prompt_tokens_) + " in the " + prompt_param + ", " + std::to_string(g.max_tokens) +
            " in the completion); lower " + req_.max_tokens_param,
        req_.max_tokens_param);
    e.context = ContextOverflow{prompt_tokens_, g.max_tokens, L};
    return e;
  }
  if (!req_.max_tokens_given) g.max_tokens = req_.chat ? room : std::min<int64_t>(16, room);
  for (const auto& [id, bias] : req_.logit_bias)
    if (static_cast<uint64_t>(id) >= tok_->vocab_size())
      return api_error(400,
                       "logit_bias token id " + std::to_string(id) + " is outside the vocabulary (size " +
                           std::to_string(tok_->vocab_size()) + ")",
                       "logit_bias");
  if (!req_.logit_bias.empty())
    return api_error(400, "'logit_bias' is not supported by this server (send {} or omit it)", "logit_bias");

  SamplingParams sp = to_sampling(g);
  if (Status st = validate(sp); !st.ok()) return api_error(400, st.error().message);

  OutputParserOptions po;
  po.stop = g.stop;
  if (req_.chat) {
    po.reasoning_parser = parsing.reasoning_parser;
    po.reasoning_starts_inside = starts_in_reasoning(parsing.reasoning_parser, prompt_text);
    if (parses_tool_calls(req_, parsing)) {
      po.tool_call_parser = parsing.tool_call_parser;
      po.tools = ToolSchemas(req_.tools);
    }
  }
  choices_.resize(static_cast<size_t>(req_.n));
  for (int i = 0; i < req_.n; ++i) {
    SamplingParams spi = sp;
    if (spi.seed) spi.seed = *spi.seed + static_cast<uint64_t>(i);  // n choices must differ
    auto sub = engine_.submit({ids, spi, req_.logprobs});
    if (!sub.ok()) {
      choices_.resize(static_cast<size_t>(i));
      abort_all();
      choices_.clear();
      return sub.error().retryable ? api_error(429, sub.error().what(), {}, "rate_limit_exceeded")
                                   : api_error(400, sub.error().what(), prompt_param);
    }
    ChoiceState& c = choices_[static_cast<size_t>(i)];
    c.index = i;
    c.pending.index = i;
    c.sub = *sub;
    c.dec = std::make_unique<IncrementalDecoder>(tok_, /*skip_special_tokens=*/true);
    c.parser = std::make_unique<OutputParser>(po);
  }
  metrics_.prompt_tokens(prompt_tokens_);
  return std::nullopt;
}

void Generation::keep_text(ChoiceState& c, size_t from) {
  for (size_t i = from; i < c.deltas.size(); ++i)
    if (c.deltas[i].kind == OutputDelta::Kind::content) c.pending.text += c.deltas[i].text;
}

void Generation::consume(ChoiceState& c, SeqUpdate& u) {
  c.cached_tokens = std::max(c.cached_tokens, u.cached_tokens);
  for (size_t i = 0; i < u.tokens.size() && !c.done; ++i) {
    int32_t t = u.tokens[i];
    std::string piece = c.dec->push(t);
    ++c.consumed;
    if (req_.logprobs) {
      c.pending.token_texts.push_back(tok_->decode({t}, false));
      c.pending.token_logprobs.push_back(u.logprobs[i]);
    }
    const size_t from = c.deltas.size();
    const bool was_reasoning = c.parser->reasoning_open();
    const bool stopped = c.parser->push(piece, c.deltas);
    if (was_reasoning && c.parser->reasoning_open()) ++c.reasoning_tokens;
    if (stopped) {  // a stop string: this choice is over, free its blocks now
      c.parser->finish(c.deltas);
      engine_.abort(c.sub.id);
      c.done = true;
      c.finish = FinishReason::stop;
      c.completion_tokens = c.consumed;
    }
    keep_text(c, from);
  }
  if (u.done && !c.done) {
    c.done = true;
    c.completion_tokens = u.num_generated;
    if (!u.error.empty()) {
      c.error = u.error;
      return;
    }
    const size_t from = c.deltas.size();
    const bool stopped = c.parser->push(c.dec->finish(), c.deltas);
    c.parser->finish(c.deltas);
    keep_text(c, from);
    c.finish = stopped ? FinishReason::stop : u.finish;
  }
}

// length wins (a call cut off is no call); then tool_calls when any call was reported.
std::string Generation::finish_of(const ChoiceState& c) const {
  if (c.finish == FinishReason::length) return "length";
  if (c.done && !c.parser->output().tool_calls.empty()) return "tool_calls";
  return finish_name(c.finish);
}

bool Generation::poll(std::chrono::milliseconds timeout) {
  bool any = false;
  for (auto& c : choices_) {
    if (c.done) continue;
    SeqUpdate u;
    if (c.sub.channel->take(u, any ? std::chrono::milliseconds(0) : timeout)) {
      consume(c, u);
      any = true;
    }
  }
  return any;
}

bool Generation::all_done() const {
  for (const auto& c : choices_)
    if (!c.done) return false;
  return true;
}

// A chat choice's chunks: one per structured delta (consecutive text of one kind merged), the first with
// the assistant role, the last with the round's logprobs and, when finishing, the finish_reason.
std::string Generation::chat_stream_events(ChoiceState& c, bool finishing) {
  std::vector<nlohmann::json> deltas;
  OutputDelta::Kind last{};
  for (auto& d : c.deltas) {
    const bool text = d.kind == OutputDelta::Kind::content || d.kind == OutputDelta::Kind::reasoning;
    if (text && d.text.empty()) continue;
    if (text && !deltas.empty() && last == d.kind) {
      auto& j = deltas.back()[d.kind == OutputDelta::Kind::content ? "content" : "reasoning_content"];
      j = j.get<std::string>() + d.text;
      continue;
    }
    deltas.push_back(chat_delta_json(d));
    last = d.kind;
  }
  c.deltas.clear();
  const bool logprobs = !c.pending.token_texts.empty();
  if (deltas.empty() && !logprobs && !finishing && c.role_sent) return {};
  if (deltas.empty()) deltas.push_back(nlohmann::json::object());
  std::string ev;
  for (size_t k = 0; k < deltas.size(); ++k) {
    nlohmann::json& d = deltas[k];
    if (!c.role_sent) {
      if (d.empty()) d["content"] = "";
      d["role"] = "assistant";
      c.role_sent = true;
    }
    const bool tail = k + 1 == deltas.size();
    Choice lp;
    if (tail) {
      lp.token_texts = std::move(c.pending.token_texts);
      lp.token_logprobs = std::move(c.pending.token_logprobs);
    }
    ev += sse_event(chat_delta_chunk(id_, created_, model_, c.index, d,
                                     tail && finishing ? finish_of(c) : std::string(), req_.logprobs && tail,
                                     lp));
  }
  c.pending = Choice{};
  c.pending.index = c.index;
  return ev;
}

std::string Generation::take_stream_events() {
  std::string ev;
  for (auto& c : choices_) {
    bool finishing = c.done && !c.finish_sent;
    if (!c.error.empty() && finishing) {
      spdlog::warn("generation {} choice {}: {}", id_, c.index, c.error);
      ev += sse_event(
          api_error(500, "generation failed: " + client_failure(c.error), {}, "internal_error").body());
      c.finish_sent = true;
      continue;
    }
    if (req_.chat) {
      ev += chat_stream_events(c, finishing);
      if (finishing) c.finish_sent = true;
      continue;
    }
    c.deltas.clear();  // completions stream their text (pending) only
    if (c.pending.text.empty() && c.pending.token_texts.empty() && !finishing && c.role_sent) continue;
    Choice d = std::move(c.pending);
    c.pending = Choice{};
    c.pending.index = c.index;
    d.index = c.index;
    d.finish_reason = finishing ? finish_name(c.finish) : "";
    ev += sse_event(completion_chunk(id_, created_, model_, d, req_.logprobs));
    c.role_sent = true;
    if (finishing) c.finish_sent = true;
  }
  if (all_done() && !final_sent_) {
    if (req_.include_usage) {
      Usage u{prompt_tokens_, 0, cached_tokens()};
      for (const auto& c : choices_) u.completion_tokens += c.completion_tokens;
      ev += sse_event(usage_chunk(id_, created_, model_, req_.chat, u));
    }
    ev += kSseDone;
    final_sent_ = true;
  }
  return ev;
}

std::vector<OutputDelta> Generation::take_deltas(int i) {
  auto& c = choices_.at(static_cast<size_t>(i));
  std::vector<OutputDelta> out = std::move(c.deltas);
  c.deltas.clear();
  return out;
}

ChoiceOutput Generation::output(int i) const {
  const auto& c = choices_.at(static_cast<size_t>(i));
  ChoiceOutput o = c.parser ? c.parser->output() : ChoiceOutput{};
  o.index = c.index;
  o.finish_reason = finish_of(c);
  if (c.parser && c.parser->stopped()) o.stop_sequence = c.parser->stop_matched();
  return o;
}

Usage Generation::usage() const {
  Usage u{prompt_tokens_, 0, cached_tokens()};
  for (const auto& c : choices_) {
    u.completion_tokens += c.done ? c.completion_tokens : c.consumed;
    u.reasoning_tokens += c.reasoning_tokens;
  }
  return u;
}

std::optional<ApiError> Generation::failure() const {
  for (const auto& c : choices_)
    if (!c.error.empty())
      return api_error(500, "generation failed: " + client_failure(c.error), {}, "internal_error");
  return std::nullopt;
}

std::variant<nlohmann::json, ApiError> Generation::response() const {
  std::vector<Choice> out;
  Usage u{prompt_tokens_, 0, cached_tokens()};
  for (const auto& c : choices_) {
    if (!c.error.empty()) {
      spdlog::warn("generation {} choice {}: {}", id_, c.index, c.error);
      return api_error(500, "generation failed: " + client_failure(c.error), {}, "internal_error");
    }
    Choice ch;
    const ChoiceOutput& o = c.parser->output();
    ch.index = c.index;
    ch.text = o.content;
    ch.reasoning = o.reasoning;
    ch.tool_calls = o.tool_calls;
    ch.token_texts = c.pending.token_texts;  // non-streaming: pending keeps every token
    ch.token_logprobs = c.pending.token_logprobs;
    ch.finish_reason = req_.chat ? finish_of(c) : finish_name(c.finish);
    u.completion_tokens += c.completion_tokens;
    out.push_back(std::move(ch));
  }
  return req_.chat ? chat_response(id_, created_, model_, out, u, req_.logprobs)
                   : completion_response(id_, created_, model_, out, u, req_.logprobs);
}

}  // namespace spk::rt
