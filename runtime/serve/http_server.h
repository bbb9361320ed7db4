// The OpenAI-compatible HTTP front (cpp-httplib): /health, /v1/models, /v1/completions,
// /v1/chat/completions (SSE streaming with [DONE]), /metrics. Every route but /health needs
// "Authorization: Bearer <key>". Every failure is an OpenAI-style JSON error with status
// 400/401/404/413/429 (500 only for bugs), never a crash. Handler threads wait on their sequences'
// channels; a streaming client that goes away aborts its sequences (blocks freed on the next step).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/base/status.h"
#include "runtime/chat/chat_template.h"
#include "runtime/serve/engine.h"
#include "runtime/serve/metrics.h"
#include "runtime/tokenizer/tokenizer.h"

namespace httplib {
class Server;
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

 private:
  void routes();

  HttpConfig cfg_;
  Engine& engine_;
  std::shared_ptr<const Tokenizer> tok_;
  ChatConfig chat_;
  Metrics& metrics_;
  std::unique_ptr<httplib::Server> svr_;
  int bound_port_ = 0;
  int64_t created_ = 0;
};

}  // namespace spk::rt
