// Readiness and warmup of a deployment, over the OpenAI HTTP API of rank 0. Ready means a real
// completion token with the API key (POST /v1/chat/completions, max_tokens 1, usage.completion_tokens
// >= 1), never a 200 from /health or /v1/models alone. Warmup sends one throwaway request per pattern
// of the recipe's `warmup:` list (repeat times) before the deployment is marked ready, so that the
// first-request costs (JIT, graph capture, allocator growth) are paid before anyone measures.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "recipes/recipe.h"

namespace spk {

struct HttpEndpoint {
  std::string host;
  int port = 0;
  std::string base;  // path prefix of the OpenAI routes: "/v1"
};

// "http://HOST:PORT/v1" -> parts. Error names the bad value.
Result<HttpEndpoint> parse_endpoint(const std::string& url);

// GET /health answered 200 within `timeout`.
bool health_ok(const HttpEndpoint& ep, std::chrono::milliseconds timeout);

// GET /metrics (Prometheus text) with the API key.
Result<std::string> fetch_metrics(const HttpEndpoint& ep, const std::string& api_key,
                                  std::chrono::milliseconds timeout);

// One chat completion: `prompt_words` words of user text, at most `max_tokens` tokens, temperature 0.
// Returns usage.completion_tokens; an HTTP error or a body without usage is an Error naming it.
Result<int> chat_completion(const HttpEndpoint& ep, const std::string& api_key, const std::string& model,
                            int prompt_words, int max_tokens, std::chrono::milliseconds timeout);

// Polls until a completion yields a token, or `deadline`. `check` runs between polls (every rank
// alive?): its error aborts the wait at once. `progress` gets one line per phase change.
Status wait_ready(const HttpEndpoint& ep, const std::string& api_key, const std::string& model,
                  std::chrono::steady_clock::time_point deadline, const std::function<Status()>& check,
                  const std::function<void(const std::string&)>& progress);

// Every warmup pattern, `repeat` times each; the first failure is the error.
Status run_warmup(const HttpEndpoint& ep, const std::string& api_key, const std::string& model,
                  const std::vector<WarmupPattern>& patterns, std::chrono::milliseconds per_request,
                  const std::function<void(const std::string&)>& progress);

}  // namespace spk
