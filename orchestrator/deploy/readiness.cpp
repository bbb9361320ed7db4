#include "orchestrator/deploy/readiness.h"

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

namespace spk {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

void set_timeouts(httplib::Client& c, std::chrono::milliseconds t) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(t).count();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t).count() % 1000000;
  c.set_connection_timeout(s, us);
  c.set_read_timeout(s, us);
  c.set_write_timeout(s, us);
}

std::string head(const std::string& s, size_t n = 200) { return s.size() > n ? s.substr(0, n) + "..." : s; }

}  // namespace

Result<HttpEndpoint> parse_endpoint(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    return make_error("endpoint '" + url + "' is not http://HOST:PORT/PATH", "re-run sparkctl up");
  std::string rest = url.substr(scheme.size());
  HttpEndpoint ep;
  auto slash = rest.find('/');
  ep.base = slash == std::string::npos ? "" : rest.substr(slash);
  while (!ep.base.empty() && ep.base.back() == '/') ep.base.pop_back();
  std::string hostport = rest.substr(0, slash);
  auto colon = hostport.rfind(':');
  if (colon == std::string::npos)
    return make_error("endpoint '" + url + "' has no port", "re-run sparkctl up");
  ep.host = hostport.substr(0, colon);
  try {
    ep.port = std::stoi(hostport.substr(colon + 1));
  } catch (...) {
    return make_error("endpoint '" + url + "' has a bad port", "re-run sparkctl up");
  }
  if (ep.host.empty() || ep.port <= 0 || ep.port > 65535)
    return make_error("endpoint '" + url + "' has a bad host or port", "re-run sparkctl up");
  return ep;
}

bool health_ok(const HttpEndpoint& ep, std::chrono::milliseconds timeout) {
  httplib::Client c(ep.host, ep.port);
  set_timeouts(c, timeout);
  auto r = c.Get("/health");
  return r && r->status == 200;
}

Result<std::string> fetch_metrics(const HttpEndpoint& ep, const std::string& api_key,
                                  std::chrono::milliseconds timeout) {
  httplib::Client c(ep.host, ep.port);
  set_timeouts(c, timeout);
  auto r = c.Get("/metrics", httplib::Headers{{"Authorization", "Bearer " + api_key}});
  const std::string where = "GET http://" + ep.host + ":" + std::to_string(ep.port) + "/metrics";
  if (!r)
    return make_error(where + ": " + httplib::to_string(r.error()), "is rank 0 up? see sparkctl logs", true);
  if (r->status != 200)
    return make_error(where + ": HTTP " + std::to_string(r->status),
                      "check the API key file of the deployment");
  return r->body;
}

Result<int> chat_completion(const HttpEndpoint& ep, const std::string& api_key, const std::string& model,
                            int prompt_words, int max_tokens, std::chrono::milliseconds timeout) {
  httplib::Client c(ep.host, ep.port);
  set_timeouts(c, timeout);
  std::string text = "Warm up.";
  for (int i = 2; i < prompt_words; ++i) text += " word";
  json body{{"model", model},
            {"messages", json::array({{{"role", "user"}, {"content", text}}})},
            {"max_tokens", max_tokens},
            {"temperature", 0}};
  httplib::Headers h{{"Authorization", "Bearer " + api_key}};
  auto r = c.Post(ep.base + "/chat/completions", h, body.dump(), "application/json");
  const std::string where =
      "POST http://" + ep.host + ":" + std::to_string(ep.port) + ep.base + "/chat/completions";
  if (!r)
    return make_error(where + ": " + httplib::to_string(r.error()), "is rank 0 up? see sparkctl logs", true);
  if (r->status != 200)
    return make_error(where + ": HTTP " + std::to_string(r->status) + ": " + head(r->body),
                      r->status == 401 ? "the API key does not match the runtime's" : "see sparkctl logs",
                      r->status == 503);
  auto j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("usage") || !j["usage"].contains("completion_tokens"))
    return make_error(where + ": answer without usage.completion_tokens: " + head(r->body),
                      "see sparkctl logs");
  return j["usage"]["completion_tokens"].get<int>();
}

Status wait_ready(const HttpEndpoint& ep, const std::string& api_key, const std::string& model,
                  std::chrono::steady_clock::time_point deadline, const std::function<Status()>& check,
                  const std::function<void(const std::string&)>& progress) {
  bool healthy = false;
  std::string last = "no answer yet";
  while (std::chrono::steady_clock::now() < deadline) {
    if (check)
      if (Status s = check(); !s.ok()) return s;
    if (!healthy && health_ok(ep, 2s)) {
      healthy = true;
      if (progress) progress("/health answers 200; asking for a real completion token");
    }
    if (healthy) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      auto n = chat_completion(ep, api_key, model, 4, 1, std::max(left, 1000ms));
      if (n && *n >= 1) return ok_status();
      last = n ? "a completion with 0 tokens" : n.error().message;
      if (!n && !n.error().retryable) return n.error();
    }
    std::this_thread::sleep_for(250ms);
  }
  return make_error("not ready before the deadline (last: " + last + ")",
                    "see `sparkctl logs`; raise --ready-timeout for big models", true);
}

Status run_warmup(const HttpEndpoint& ep, const std::string& api_key, const std::string& model,
                  const std::vector<WarmupPattern>& patterns, std::chrono::milliseconds per_request,
                  const std::function<void(const std::string&)>& progress) {
  int i = 0;
  for (const auto& p : patterns)
    for (int k = 0; k < p.repeat; ++k) {
      ++i;
      const auto t0 = std::chrono::steady_clock::now();
      auto n = chat_completion(ep, api_key, model, p.prompt_tokens, p.max_tokens, per_request);
      if (!n)
        return make_error("warmup request " + std::to_string(i) + " failed: " + n.error().message,
                          n.error().fix);
      if (progress) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "warmup %d: ~%d prompt words, %d/%d tokens in %.2f s", i,
                      p.prompt_tokens, *n, p.max_tokens,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        progress(buf);
      }
    }
  return ok_status();
}

}  // namespace spk
