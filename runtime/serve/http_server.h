// The HTTP server: /health, /v1/models, /v1/completions, /v1/chat/completions (SSE streaming with
// [DONE]), /v1/responses (+ GET /v1/responses/{id}), /v1/messages (+ /v1/messages/count_tokens),
// /metrics. Every route but /health needs the key, as "Authorization: Bearer <key>" or "x-api-key: <key>".
// Every failure is a JSON error in the route's API shape (400/401/404/405/408/411/413/417/429/431/503; 500
// only for bugs) that names the request field and the problem and never a path on the server; never a
// crash. Each generation route is one ApiFront (api_front.h) over the same Generation driver.
//
// Connections live in the front (http_front.h: one epoll thread, caps and deadlines while reading,
// /health, /metrics, /v1/models and every refusal answered there, so queued generations cannot block
// them; what it does there is small and bounded, never proportional to stored data); only whole,
// authenticated generation requests and reads of stored responses (GET /v1/responses/{id}: MBs) reach a
// handler thread, which runs cpp-httplib's parser, router and writer on the buffered request; the front
// thread answering 64 readers of one 4 MB response kept /health past 1 s (tests/serve/front_thread_test.cpp).
// Handler threads wait on their sequences' channels; a client that goes away aborts its sequences (blocks
// freed on the next step).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/base/status.h"
#include "runtime/chat/chat_template.h"
#include "runtime/serve/engine.h"
#include "runtime/serve/heap_release.h"
#include "runtime/serve/http_front.h"
#include "runtime/serve/metrics.h"
#include "runtime/serve/output_parser.h"
#include "runtime/serve/response_store.h"
#include "runtime/tokenizer/tokenizer.h"

namespace spk::rt {
class FrontedServer;  // cpp-httplib's Server, fed by the front (http_server.cpp)
}

namespace spk::rt {

struct HttpConfig {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 = any free port (see HttpServer::port())
  std::string served_model_name;
  std::string api_key;               // required; compared in constant time
  size_t max_body_bytes = 4u << 20;  // larger bodies: 413
  int max_n = 16;                    // "n" cap: 400 above it
  int threads = 64;                  // handler threads (each open stream holds one)
  int keepalive_ms = 1000;           // SSE comment after this much silence (detects gone clients)
  // The front's caps and clocks (http_front.h: FrontConfig).
  size_t max_head_bytes = 32u << 10;
  int head_timeout_ms = 5000;
  int body_timeout_ms = 10000;
  size_t max_connections = 4096;
  size_t max_connections_per_peer = 1024;  // of them from one client IP (http_front.h)
  size_t max_queued = 1024;
  size_t max_stored_responses = 256;  // /v1/responses kept for previous_response_id and GET (LRU)
  size_t max_stored_response_bytes = ResponseStore::kDefaultMaxBytes;  // and their serialised bytes
  int malloc_arena_max = 4;  // glibc arenas, bounded at bind() (heap_release.h); 0 = glibc's default
  OutputParsing parsing;     // --tool-call-parser / --reasoning-parser ("" = none)
  nlohmann::ordered_json default_chat_template_kwargs =
      nlohmann::ordered_json::object();  // under the request's
};

class HttpServer {
 public:
  HttpServer(HttpConfig cfg, Engine& engine, std::shared_ptr<const Tokenizer> tok, ChatConfig chat,
             Metrics& metrics);
  ~HttpServer();

  // Binds the socket (so a busy port is an error before anything else starts).
  Status bind();
  [[nodiscard]] int port() const { return bound_port_; }
  // Serves until stop(). Blocks.
  void run();
  void stop();
  [[nodiscard]] FrontStats front_stats() const;

 private:
  void routes();
  Verdict classify(const RequestHead& h);
  [[nodiscard]] bool authorized(const std::string* bearer, const std::string* x_api_key) const;

  HttpConfig cfg_;
  Engine& engine_;
  std::shared_ptr<const Tokenizer> tok_;
  ChatConfig chat_;
  Metrics& metrics_;
  std::unique_ptr<FrontedServer> svr_;
  std::unique_ptr<ConnectionFront> front_;
  int bound_port_ = 0;
  int64_t created_ = 0;
  ResponseStore responses_;
  HeapTrimmer trimmer_;  // after large requests (heap_release.h)
};

}  // namespace spk::rt
