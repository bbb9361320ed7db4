// Internal to the HTTP server (http_server.cpp: handler threads, front_classify.cpp: the front thread):
// error bodies in each API's shape and the route labels of /metrics.
#pragma once

#include <string>

#include "runtime/serve/messages_api.h"
#include "runtime/serve/openai_protocol.h"

namespace spk::rt {

inline std::string error_text(const ApiError& e) {
  return e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline const char* route_label(const std::string& path) {
  for (const char* r : {"/health", "/v1/models", "/v1/completions", "/v1/chat/completions", "/v1/responses",
                        "/v1/messages", "/v1/messages/count_tokens", "/metrics"})
    if (path == r) return r;
  if (path.rfind("/v1/responses/", 0) == 0) return "/v1/responses/{id}";
  return "other";
}

// Anthropic's clients get Anthropic's error shape, everyone else OpenAI's.
inline bool anthropic_path(const std::string& path) { return path.rfind("/v1/messages", 0) == 0; }

inline constexpr const char* kAuthHelp =
    "invalid or missing API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')";

inline std::string error_text_for(const std::string& path, const ApiError& e) {
  return anthropic_path(path) ? dump_json(anthropic_error_body(e.status, e.message)) : error_text(e);
}

}  // namespace spk::rt
