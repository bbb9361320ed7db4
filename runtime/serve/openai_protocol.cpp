#include "runtime/serve/openai_protocol.h"

#include <algorithm>
#include <cmath>

#include "runtime/serve/output_constraints.h"

namespace spk::rt {

using nlohmann::json;

std::optional<std::string> json_shape_problem(std::string_view s) {
  // One pass over the raw body (strings skipped): nesting depth, and keys per object (a ':' at the
  // object's own level). Both are checked before parsing: bodies are parsed into ordered_json, whose
  // objects insert by linear search, so one object of 400k keys would hold a handler thread for hours.
  std::vector<int> keys;  // per open container: keys so far, -1 for an array
  int64_t work = 0;       // what ordered_json's inserts will scan
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc)
        esc = false;
      else if (c == '\\')
        esc = true;
      else if (c == '"')
        in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '[' || c == '{') {
      if (static_cast<int>(keys.size()) >= kMaxJsonDepth)
        return "request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      keys.push_back(c == '{' ? 0 : -1);
    } else if (c == ']' || c == '}') {
      if (!keys.empty()) keys.pop_back();
    } else if (c == ':' && !keys.empty() && keys.back() >= 0) {
      work += keys.back();
      if (++keys.back() > kMaxJsonObjectKeys)
        return "a JSON object in the request body has more than " + std::to_string(kMaxJsonObjectKeys) +
               " keys";
      if (work > kMaxJsonKeyWork) return "the request body's objects hold too many keys in all";
    }
  }
  return std::nullopt;
}

namespace {

// A JSON integer as int64: false for non-integers and for unsigned values above 2^63-1 (which
// get<int64_t>() would wrap to negatives: top_k 18446744073709551615 must not read as -1).
bool to_int64(const json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    out = static_cast<int64_t>(u);
    return true;
  }
  if (!v.is_number_integer()) return false;
  out = v.get<int64_t>();
  return true;
}

// Field readers: absent or null leaves `out` untouched; a wrong type or range sets `err`.
struct Reader {
  const json& j;
  std::optional<ApiError> err;

  const json* get(const char* key) {
    if (err) return nullptr;
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void fail(const char* key, const std::string& why) {  // the first failure wins
    if (!err) err = api_error(400, std::string("'") + key + "' " + why, key);
  }
  bool boolean(const char* key, bool& out) {
    const json* v = get(key);
    if (!v) return false;
    if (!v->is_boolean()) return fail(key, "must be a boolean"), false;
    out = v->get<bool>();
    return true;
  }
  bool number(const char* key, float& out, double lo, double hi, const char* range) {
    const json* v = get(key);
    if (!v) return false;
    if (!v->is_number()) return fail(key, "must be a number"), false;
    double d = v->get<double>();
    if (!(d >= lo && d <= hi) || !std::isfinite(d))
      return fail(key, "is " + v->dump() + ", must be in " + range), false;
    out = static_cast<float>(d);
    return true;
  }
  bool integer64(const char* key, int64_t& out, int64_t lo, int64_t hi, const std::string& range) {
    const json* v = get(key);
    if (!v) return false;
    if (!v->is_number_integer()) return fail(key, "must be an integer, got " + v->dump()), false;
    int64_t x = 0;
    if (!to_int64(*v, x) || x < lo || x > hi)
      return fail(key, "is " + v->dump() + ", must be " + range), false;
    out = x;
    return true;
  }
  bool integer(const char* key, int& out, int64_t lo, int64_t hi, const std::string& range) {
    int64_t x = 0;
    if (!integer64(key, x, std::max<int64_t>(lo, INT32_MIN), std::min<int64_t>(hi, INT32_MAX), range))
      return false;
    out = static_cast<int>(x);
    return true;
  }
  void string(const char* key, std::string& out) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_string()) return fail(key, "must be a string");
    out = v->get<std::string>();
  }
  void token_ids(const char* key, std::vector<int32_t>& out) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_array()) return fail(key, "must be an array of token ids");
    for (const auto& e : *v) {
      int64_t id = -1;
      if (!to_int64(e, id) || id < 0 || id > INT32_MAX)
        return fail(key, "must hold token ids in [0, 2147483647], got " + e.dump());
      out.push_back(static_cast<int32_t>(id));
    }
  }
};

void parse_common(Reader& r, ApiRequest& q, const ProtocolLimits& lim) {
  auto& g = q.gen;
  r.string("model", q.model);
  r.boolean("stream", q.stream);
  if (const json* so = r.get("stream_options")) {
    if (!so->is_object())
      r.fail("stream_options", "must be an object");
    else if (auto it = so->find("include_usage"); it != so->end() && !it->is_null()) {
      if (!it->is_boolean())
        r.fail("stream_options", "include_usage must be a boolean");
      else
        q.include_usage = it->get<bool>();
    }
  }
  r.integer("n", q.n, 1, lim.max_n, "between 1 and " + std::to_string(lim.max_n));
  r.number("temperature", g.temperature, 0.0, 2.0, "[0, 2]");
  r.number("top_p", g.top_p, 1e-9, 1.0, "(0, 1]");
  if (r.integer("top_k", g.top_k, -1, INT32_MAX, ">= -1 (-1 or 0 = off)") && g.top_k < 0) g.top_k = 0;
  r.number("min_p", g.min_p, 0.0, 1.0, "[0, 1]");
  r.number("presence_penalty", g.presence_penalty, -2.0, 2.0, "[-2, 2]");
  r.number("frequency_penalty", g.frequency_penalty, -2.0, 2.0, "[-2, 2]");
  r.number("repetition_penalty", g.repetition_penalty, 1e-6, 1e6, "> 0");
  // vLLM's range for seed: a signed 64-bit integer.
  int64_t seed = 0;
  if (r.integer64("seed", seed, INT64_MIN, INT64_MAX,
                  "an integer between -9223372036854775808 and 9223372036854775807"))
    g.seed = static_cast<uint64_t>(seed);
  // max_completion_tokens (new name) wins over max_tokens (old name) when both are given. Any value
  // up to 2^63-1 is read; the context check (completion_handler) refuses what does not fit.
  for (const char* key : {"max_tokens", "max_completion_tokens"})
    if (r.integer64(key, g.max_tokens, 1, INT64_MAX, "an integer >= 1")) {
      q.max_tokens_given = true;
      q.max_tokens_param = key;
    }
  if (const json* lb = r.get("logit_bias")) {
    if (!lb->is_object()) return r.fail("logit_bias", "must be an object mapping token ids to biases");
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& k = it.key();
      int64_t id = -1;
      bool digits = !k.empty() && k.size() <= 18 && k.find_first_not_of("0123456789") == std::string::npos;
      if (digits) id = std::stoll(k);
      if (!digits || id > INT32_MAX)
        return r.fail("logit_bias", "key '" + k.substr(0, 32) + "' is not a token id in [0, 2147483647]");
      if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < -100.0 ||
          it->get<double>() > 100.0)
        return r.fail("logit_bias", "bias of token " + k + " is " + it->dump() + ", must be in [-100, 100]");
      q.logit_bias.emplace_back(id, static_cast<float>(it->get<double>()));
    }
  }
  if (const json* s = r.get("stop")) {
    if (s->is_string()) {
      g.stop.push_back(s->get<std::string>());
    } else if (s->is_array() && s->size() <= 4) {
      for (const auto& e : *s) {
        if (!e.is_string() || e.get<std::string>().empty()) {
          r.fail("stop", "must hold non-empty strings");
          break;
        }
        g.stop.push_back(e.get<std::string>());
      }
    } else {
      r.fail("stop", "must be a string or an array of at most 4 strings");
    }
    if (g.stop.size() == 1 && g.stop[0].empty()) g.stop.clear();
  }
  r.token_ids("stop_token_ids", g.stop_token_ids);
  r.boolean("ignore_eos", g.ignore_eos);
  // vLLM's min_tokens: nothing here holds back end-of-sequence and stop tokens, so only 0 is honoured.
  int64_t min_tokens = 0;
  if (r.integer64("min_tokens", min_tokens, 0, INT64_MAX, "an integer >= 0") && min_tokens > 0)
    r.fail("min_tokens", "is " + std::to_string(min_tokens) +
                             ", but min_tokens is not supported by this server (send 0 or omit it)");
  if (const json* f = r.get("response_format"))
    if (auto e = check_output_format(*f, "response_format"); e && !r.err)
      r.err = api_error(e->status, e->message, e->param);
}

// "required" and a named function are valid but refused: nothing enforces them (output_constraints.h).
std::optional<ApiError> enforceable(const std::string& sent) {
  const FieldError e = forced_tool_call_refused("tool_choice", sent, "send 'auto' or 'none', or omit it");
  return api_error(e.status, e.message, e.param);
}

// tool_choice: auto | none | required | {"type":"function","function":{"name"}} naming one of `tools`.
std::optional<ApiError> check_tool_choice(const json& j) {
  auto it = j.find("tool_choice");
  if (it == j.end() || it->is_null()) return std::nullopt;
  const json& tc = *it;
  std::vector<std::string> names;
  if (auto t = j.find("tools"); t != j.end() && t->is_array())
    for (const auto& tool : *t) {
      const json* fn = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
      if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
        return api_error(
            400, "every entry of 'tools' must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
            "tools");
      names.push_back((*fn)["name"].get<std::string>());
    }
  auto list = [&] {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? std::string("none") : s;
  };
  if (tc.is_string()) {
    const std::string v = tc.get<std::string>();
    if (v == "auto" || v == "none") return std::nullopt;
    if (v == "required") {
      if (names.empty())
        return api_error(400, "'tool_choice' is 'required' but the request has no 'tools'", "tool_choice");
      return enforceable("'required'");
    }
    return api_error(
        400,
        "'tool_choice' is '" + v.substr(0, 64) +
            "', must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}",
        "tool_choice");
  }
  const json* fn = tc.is_object() && tc.value("type", "") == "function" && tc.contains("function") &&
                           tc["function"].is_object()
                       ? &tc["function"]
                       : nullptr;
  if (!fn || !fn->contains("name") || !(*fn)["name"].is_string())
    return api_error(400,
                     "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"function\": "
                     "{\"name\": ...}}",
                     "tool_choice");
  const std::string name = (*fn)["name"].get<std::string>();
  if (std::find(names.begin(), names.end(), name) == names.end())
    return api_error(400,
                     "'tool_choice' names function '" + name.substr(0, 128) +
                         "', which is not in 'tools' (the request's tools: " + list() + ")",
                     "tool_choice");
  return enforceable("a named function ('" + name.substr(0, 128) + "')");
}

}  // namespace

json ApiError::body() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

ApiError api_error(int status, std::string message, std::string param, std::string type, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.param = std::move(param);
  if (!type.empty()) e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

std::variant<ApiRequest, ApiError> parse_request(std::string_view body, bool chat,
                                                 const ProtocolLimits& lim) {
  if (auto why = json_shape_problem(body)) return api_error(400, *why);
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return api_error(400, "request body is not valid JSON");
  if (!j.is_object()) return api_error(400, "request body must be a JSON object");

  ApiRequest q;
  q.chat = chat;
  Reader r{j, std::nullopt};
  parse_common(r, q, lim);
  if (r.err) return *r.err;
  if (q.model.empty()) return api_error(400, "'model' is required", "model");
  if (q.model != lim.served_model_name)
    return api_error(
        404,
        "The model `" + q.model + "` does not exist (this server serves `" + lim.served_model_name + "`)",
        "model", "NotFoundError", "model_not_found");

  if (chat) {
    const json* m = r.get("messages");
    if (!m || !m->is_array() || m->empty())
      return api_error(400, "'messages' must be a non-empty array", "messages");
    for (const auto& msg : *m)
      if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
        return api_error(400, "every message must be an object with a string 'role'", "messages");
    if (const json* t = r.get("tools"); t && !t->is_array())
      return api_error(400, "'tools' must be an array", "tools");
    if (auto e = check_tool_choice(j)) return *e;
    if (const json* k = r.get("chat_template_kwargs"); k && !k->is_object())
      return api_error(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    // Second parse, order-preserving, for what the chat template sees (the body is valid JSON here).
    auto oj = nlohmann::ordered_json::parse(body, nullptr, false);
    q.messages = oj["messages"];
    if (oj.contains("tools") && !oj["tools"].is_null()) q.tools = oj["tools"];
    if (oj.contains("tool_choice") && !oj["tool_choice"].is_null()) q.tool_choice = oj["tool_choice"];
    if (oj.contains("chat_template_kwargs") && !oj["chat_template_kwargs"].is_null())
      q.chat_template_kwargs = oj["chat_template_kwargs"];
    r.boolean("add_generation_prompt", q.add_generation_prompt);
    r.boolean("logprobs", q.logprobs);
    r.integer("top_logprobs", q.top_logprobs, 0, lim.max_top_logprobs,
              "between 0 and " + std::to_string(lim.max_top_logprobs));
  } else {
    const json* p = r.get("prompt");
    if (!p) return api_error(400, "'prompt' is required", "prompt");
    if (p->is_string()) {
      q.prompt = p->get<std::string>();
    } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
      q.prompt = (*p)[0].get<std::string>();
    } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
      r.token_ids("prompt", q.prompt_ids);
      q.prompt_is_ids = true;
    } else {
      return api_error(400,
                       "'prompt' must be a string, a one-element array of strings or an array of token ids",
                       "prompt");
    }
    int lp = -1;
    if (r.integer("logprobs", lp, 0, lim.max_top_logprobs,
                  "between 0 and " + std::to_string(lim.max_top_logprobs))) {
      q.logprobs = true;
      q.top_logprobs = lp;
    }
    r.boolean("echo", q.echo);
    if (q.echo) return api_error(400, "'echo' is not supported by this server", "echo");
    // best_of >= n (OpenAI); only best_of == n is built (no server-side ranking of extra samples).
    int best_of = q.n;
    if (r.integer("best_of", best_of, 1, lim.max_n, "between 1 and " + std::to_string(lim.max_n)) && !r.err) {
      if (best_of < q.n)
        return api_error(
            400, "'best_of' is " + std::to_string(best_of) + ", must be >= n (" + std::to_string(q.n) + ")",
            "best_of");
      if (best_of > q.n)
        return api_error(400,
                         "'best_of' above n is not supported by this server (send best_of = n or omit it)",
                         "best_of");
    }
  }
  if (r.err) return *r.err;
  return q;
}

json Usage::to_json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

namespace {

json finish(const Choice& c) { return c.finish_reason.empty() ? json(nullptr) : json(c.finish_reason); }

json completion_logprobs(const Choice& c) {
  json offsets = json::array();
  return {{"tokens", c.token_texts},
          {"token_logprobs", c.token_logprobs},
          {"top_logprobs", nullptr},
          {"text_offset", offsets}};
}

json chat_logprobs(const Choice& c) {
  json content = json::array();
  for (size_t i = 0; i < c.token_texts.size(); ++i) {
    const std::string& t = c.token_texts[i];
    content.push_back(
        {{"token", t},
         {"logprob", c.token_logprobs[i]},
         {"bytes", std::vector<int>(reinterpret_cast<const unsigned char*>(t.data()),
                                    reinterpret_cast<const unsigned char*>(t.data()) + t.size())},
         {"top_logprobs", json::array()}});
  }
  return {{"content", content}};
}

json envelope(const std::string& id, const char* object, int64_t created, const std::string& model) {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

}  // namespace

json completion_response(const std::string& id, int64_t created, const std::string& model,
                         const std::vector<Choice>& choices, const Usage& usage, bool logprobs) {
  json out = envelope(id, "text_completion", created, model);
  json cs = json::array();
  for (const auto& c : choices)
    cs.push_back({{"index", c.index},
                  {"text", c.text},
                  {"logprobs", logprobs ? completion_logprobs(c) : json(nullptr)},
                  {"finish_reason", finish(c)}});
  out["choices"] = cs;
  out["usage"] = usage.to_json();
  return out;
}

json chat_response(const std::string& id, int64_t created, const std::string& model,
                   const std::vector<Choice>& choices, const Usage& usage, bool logprobs) {
  json out = envelope(id, "chat.completion", created, model);
  json cs = json::array();
  for (const auto& c : choices) {
    json msg = {{"role", "assistant"}, {"content", c.text}};
    if (!c.reasoning.empty()) msg["reasoning_content"] = c.reasoning;
    if (!c.tool_calls.empty()) {
      if (c.text.empty()) msg["content"] = nullptr;  // OpenAI: content is null beside tool calls
      json calls = json::array();
      for (const auto& t : c.tool_calls)
        calls.push_back({{"id", t.id},
                         {"type", "function"},
                         {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
      msg["tool_calls"] = calls;
    }
    cs.push_back({{"index", c.index},
                  {"message", msg},
                  {"logprobs", logprobs ? chat_logprobs(c) : json(nullptr)},
                  {"finish_reason", finish(c)}});
  }
  out["choices"] = cs;
  out["usage"] = usage.to_json();
  return out;
}

json completion_chunk(const std::string& id, int64_t created, const std::string& model, const Choice& d,
                      bool logprobs) {
  json out = envelope(id, "text_completion", created, model);
  out["choices"] = json::array({{{"index", d.index},
                                 {"text", d.text},
                                 {"logprobs", logprobs ? completion_logprobs(d) : json(nullptr)},
                                 {"finish_reason", finish(d)}}});
  return out;
}

json chat_chunk(const std::string& id, int64_t created, const std::string& model, const Choice& d, bool first,
                bool logprobs) {
  json out = envelope(id, "chat.completion.chunk", created, model);
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (!d.text.empty() || first) delta["content"] = d.text;
  out["choices"] = json::array({{{"index", d.index},
                                 {"delta", delta},
                                 {"logprobs", logprobs ? chat_logprobs(d) : json(nullptr)},
                                 {"finish_reason", finish(d)}}});
  return out;
}

json chat_delta_json(const OutputDelta& d) {
  switch (d.kind) {
    case OutputDelta::Kind::content:
      return {{"content", d.text}};
    case OutputDelta::Kind::reasoning:
      return {{"reasoning_content", d.text}};
    case OutputDelta::Kind::tool_call_begin:
      return {{"tool_calls", json::array({{{"index", d.tool_index},
                                           {"id", d.id},
                                           {"type", "function"},
                                           {"function", {{"name", d.name}, {"arguments", ""}}}}})}};
    case OutputDelta::Kind::tool_call_arguments:
      return {
          {"tool_calls", json::array({{{"index", d.tool_index}, {"function", {{"arguments", d.text}}}}})}};
  }
  return json::object();
}

json chat_delta_chunk(const std::string& id, int64_t created, const std::string& model, int index,
                      const json& delta, const std::string& finish_reason, bool logprobs, const Choice& lp) {
  json out = envelope(id, "chat.completion.chunk", created, model);
  out["choices"] =
      json::array({{{"index", index},
                    {"delta", delta},
                    {"logprobs", logprobs ? chat_logprobs(lp) : json(nullptr)},
                    {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}}});
  return out;
}

json usage_chunk(const std::string& id, int64_t created, const std::string& model, bool chat,
                 const Usage& u) {
  json out = envelope(id, chat ? "chat.completion.chunk" : "text_completion", created, model);
  out["choices"] = json::array();
  out["usage"] = u.to_json();
  return out;
}

json models_response(const std::string& model, int64_t created, int max_model_len) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "sparkctl"},
                                 {"max_model_len", max_model_len}}})}};
}

std::string sse_event(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace spk::rt
