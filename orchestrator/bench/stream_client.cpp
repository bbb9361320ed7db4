#include "orchestrator/bench/stream_client.h"

#include <httplib.h>

#include <charconv>

namespace spk::bench {

using nlohmann::json;

Status parse_endpoint_url(const std::string& url, Endpoint& out) {
  const std::string bad = "endpoint " + url + " is not http://HOST:PORT[/v1]";
  const std::string_view prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return make_error(bad, "pass --endpoint http://127.0.0.1:8000/v1");
  std::string rest = url.substr(prefix.size());
  if (auto slash = rest.find('/'); slash != std::string::npos) {
    const std::string path = rest.substr(slash);
    if (path != "/" && path != "/v1" && path != "/v1/") return make_error(bad, "drop the path after /v1");
    rest.resize(slash);
  }
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return make_error(bad, "name the port");
  int port = 0;
  const char* b = rest.data() + colon + 1;
  const char* e = rest.data() + rest.size();
  auto [p, ec] = std::from_chars(b, e, port);
  if (ec != std::errc() || p != e || port <= 0 || port > 65535)
    return make_error(bad + ": port " + rest.substr(colon + 1) + " is not 1..65535");
  out.host = rest.substr(0, colon);
  out.port = port;
  return ok_status();
}

double StreamSample::ttft_s() const {
  if (chunks_with_text == 0) return 0;
  return std::chrono::duration<double>(t_first - t_start).count();
}

double StreamSample::tpot_s() const {
  if (completion_tokens < 2) return 0;
  return decode_s() / (completion_tokens - 1);
}

double StreamSample::decode_s() const {
  if (chunks_with_text == 0) return 0;
  return std::chrono::duration<double>(t_last - t_first).count();
}

double StreamSample::decode_tok_s() const {
  const double d = decode_s();
  if (completion_tokens < 2 || d <= 0) return 0;
  return (completion_tokens - 1) / d;
}

Status SseAccumulator::feed(std::string_view bytes, BenchClock::time_point now) {
  buf_.append(bytes);
  // Events end with a blank line; lines may end in \n or \r\n.
  for (;;) {
    size_t end = buf_.find("\n\n");
    size_t skip = 2;
    if (const size_t crlf = buf_.find("\r\n\r\n"); crlf != std::string::npos && crlf < end) {
      end = crlf;
      skip = 4;
    }
    if (end == std::string::npos) return ok_status();
    const std::string ev = buf_.substr(0, end);
    buf_.erase(0, end + skip);
    size_t pos = 0;
    while (pos < ev.size()) {
      size_t nl = ev.find('\n', pos);
      if (nl == std::string::npos) nl = ev.size();
      std::string_view line(ev.data() + pos, nl - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.rfind("data:", 0) == 0) {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        SPK_TRY(event(line, now));
      }
      pos = nl + 1;
    }
  }
}

Status SseAccumulator::event(std::string_view data, BenchClock::time_point now) {
  if (data == "[DONE]") {
    done_ = true;
    return ok_status();
  }
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error("stream chunk is not a JSON object: " + std::string(data.substr(0, 200)));
  if (j.contains("error")) return make_error("server error in stream: " + j["error"].dump());
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    s_.completion_tokens = u->value("completion_tokens", 0);
    s_.prompt_tokens = u->value("prompt_tokens", 0);
  }
  auto ch = j.find("choices");
  if (ch == j.end() || !ch->is_array()) return ok_status();
  for (const auto& c : *ch) {
    if (auto fr = c.find("finish_reason"); fr != c.end() && fr->is_string()) s_.finish_reason = *fr;
    std::string piece;
    if (auto d = c.find("delta"); d != c.end() && d->is_object()) {
      if (auto t = d->find("content"); t != d->end() && t->is_string()) piece = *t;
    } else if (auto t = c.find("text"); t != c.end() && t->is_string()) {
      piece = *t;
    }
    if (piece.empty()) continue;
    if (s_.chunks_with_text++ == 0) s_.t_first = now;
    s_.t_last = now;
    s_.text_times.push_back(now);
    s_.text += piece;
  }
  return ok_status();
}

Result<StreamSample> stream_chat(const Endpoint& ep, json body) {
  body["model"] = ep.model;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  httplib::Client cli(ep.host, ep.port);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(static_cast<time_t>(ep.timeout.count()));
  cli.set_write_timeout(60);

  StreamSample s;
  SseAccumulator acc(s);
  Status feed_status = ok_status();
  std::string error_body;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Authorization", "Bearer " + ep.api_key}, {"Accept", "text/event-stream"}};
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  int status = 0;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, n);
      return true;
    }
    feed_status = acc.feed(std::string_view(data, n), BenchClock::now());
    return feed_status.ok();
  };
  s.t_start = BenchClock::now();
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  const std::string where = "http://" + ep.host + ":" + std::to_string(ep.port) + "/v1/chat/completions";
  if (!feed_status.ok()) return feed_status.error();
  if (!sent)
    return make_error(where + ": " + httplib::to_string(err),
                      "check that the deployment is up (sparkctl status)", true);
  if (status != 200) {
    json e = json::parse(error_body, nullptr, false);
    std::string msg = error_body.substr(0, 300);
    if (!e.is_discarded() && e.contains("error") && e["error"].is_object())
      msg = e["error"].value("message", msg);
    return make_error(where + ": HTTP " + std::to_string(status) + ": " + msg);
  }
  if (!acc.done()) return make_error(where + ": stream ended without [DONE]", "see the runtime log", true);
  return s;
}

Result<ServedModel> served_model(const Endpoint& ep) {
  httplib::Client cli(ep.host, ep.port);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(30);
  const std::string where = "http://" + ep.host + ":" + std::to_string(ep.port) + "/v1/models";
  auto res = cli.Get("/v1/models", {{"Authorization", "Bearer " + ep.api_key}});
  if (!res)
    return make_error(where + ": " + httplib::to_string(res.error()),
                      "is the deployment up? (sparkctl status, or pass --endpoint)", true);
  if (res->status == 401)
    return make_error(where + ": HTTP 401: the API key was refused", "export the deployment's key");
  if (res->status != 200)
    return make_error(where + ": HTTP " + std::to_string(res->status) + ": " + res->body);
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id"))
    return make_error(where + ": no model listed in " + res->body.substr(0, 200));
  ServedModel m;
  m.id = j["data"][0]["id"].get<std::string>();
  m.max_model_len = j["data"][0].value("max_model_len", 0);
  return m;
}

}  // namespace spk::bench
