// The HTTP server's own lines in /metrics (Prometheus text, after Metrics::render's): the /v1/responses
// store (response_store.h) and the connection front (http_front.h: evictions by reason).
#pragma once

#include <string>

#include "runtime/serve/http_front.h"
#include "runtime/serve/response_store.h"

namespace spk::rt {

std::string store_metrics(const ResponseStoreStats& s);
std::string front_metrics(const FrontStats& s);

}  // namespace spk::rt
