// The front thread's part of the HTTP server (http_front.h): every request head is decided here, on the
// head alone, without waiting for the engine: /health, /metrics, /v1/models and every refusal (401, 404,
// 405) are answered at once; generation requests and reads of stored responses go to a handler thread.
// Nothing here costs more than a few KiB of work, whatever is stored (issue 43).
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/serve/http_errors.h"
#include "runtime/serve/http_metrics.h"
#include "runtime/serve/http_server.h"

namespace spk::rt {

namespace {

// Constant-time comparison: the time taken does not reveal how much of the key matched.
bool same_key(const std::string& a, const std::string& b) {
  unsigned char d = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    d |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return d == 0 && !b.empty();
}

}  // namespace

Verdict HttpServer::classify(const RequestHead& h) {
  Verdict v;
  auto answer = [&](int status, const std::string& body, const char* type = "application/json") {
    v.response.status = status;
    v.response.body = body;
    v.response.content_type = type;
    return v;
  };
  auto error = [&](const ApiError& e) { return answer(e.status, error_text(e)); };
  auto only = [&](const char* method) {
    v.response.headers.emplace_back("Allow", method);
    return error(api_error(405,
                           "method " + h.method + " is not allowed on " + h.path + " (use " + method + ")",
                           {}, "invalid_request_error", "method_not_allowed"));
  };
  const bool get = h.method == "GET" || h.method == "HEAD";
  if (h.path == "/health") {
    if (!get) return only("GET");
    // The engine's own progress, so a watcher can tell busy (steps advancing) from hung.
    const EngineProgress p = engine_.progress();
    const Gauges g = engine_.gauges();
    nlohmann::json j{{"status", "ok"},
                     {"engine",
                      {{"steps", p.steps},
                       {"idle", p.idle},
                       {"stalled_ms", p.stalled_ms},
                       {"running", g.running},
                       {"waiting", g.waiting}}}};
    return answer(200, j.dump());
  }
  if (!authorized(h.field("Authorization"), h.field("x-api-key"))) {
    const ApiError e = api_error(401, kAuthHelp, {}, "invalid_request_error", "invalid_api_key");
    return answer(401, error_text_for(h.path, e));
  }
  if (h.path == "/metrics") {
    if (!get) return only("GET");
    return answer(200,
                  metrics_.render(cfg_.served_model_name) + store_metrics(responses_.stats()) +
                      front_metrics(front_->stats()),
                  "text/plain; version=0.0.4");
  }
  if (h.path == "/v1/models") {
    if (!get) return only("GET");
    if (h.field("anthropic-version") != nullptr)  // the Anthropic SDK's page shape
      return answer(200, anthropic_models_response(cfg_.served_model_name, created_)
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return answer(200, models_response(cfg_.served_model_name, created_, engine_.config().max_model_len)
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  if (h.path.rfind("/v1/responses/", 0) == 0) {
    if (!get) return only("GET");
    // A stored response can be MBs: looked up and written by a handler thread, never here (issue 43).
    v.dispatch = true;
    return v;
  }
  if (h.path == "/v1/completions" || h.path == "/v1/chat/completions" || h.path == "/v1/responses" ||
      h.path == "/v1/messages" || h.path == "/v1/messages/count_tokens") {
    if (h.method != "POST") {
      v.response.headers.emplace_back("Allow", "POST");
      return answer(
          405,
          error_text_for(h.path,
                         api_error(405, "method " + h.method + " is not allowed on " + h.path + " (use POST)",
                                   {}, "invalid_request_error", "method_not_allowed")));
    }
    v.dispatch = true;
    v.body_expected = true;
    return v;
  }
  return error(api_error(404, "no route " + h.method + " " + h.path.substr(0, 200), {}, "NotFoundError"));
}

bool HttpServer::authorized(const std::string* bearer, const std::string* x_api_key) const {
  const std::string prefix = "Bearer ";
  if (bearer && bearer->rfind(prefix, 0) == 0 && same_key(bearer->substr(prefix.size()), cfg_.api_key))
    return true;
  return x_api_key && same_key(*x_api_key, cfg_.api_key);
}

}  // namespace spk::rt
