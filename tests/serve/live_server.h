// A live HttpServer on 127.0.0.1 (an ephemeral port) over the deterministic HashModel and a running engine:
// the fixture of every test that goes through the wire.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

#include "runtime/serve/http_server.h"
#include "tests/serve/fakes.h"

namespace spk::rt::testing {

struct LiveServer {
  // step_delay_ms: the model's time per step (1: streams interleave as on a real device).
  explicit LiveServer(int step_delay_ms = 0) : model(step_delay_ms) {}
  HashModel model;
  Metrics metrics;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<HttpServer> server;
  std::thread thread;

  // The engine every wire test starts from: 64 tokens a step, 256 sequences, a 512-token context.
  static EngineConfig engine_config() {
    EngineConfig ec;
    ec.sched = {64, 256};
    ec.max_model_len = 512;
    ec.eos_ids = {ByteTokenizer::kEos};
    return ec;
  }
  // Starts the engine (a KV pool of 256 blocks of 16) and the server with `hc` (its port is replaced by an
  // ephemeral one). Fails the test when it cannot bind.
  void start(HttpConfig hc, const EngineConfig& ec = engine_config(), ChatConfig chat = line_chat_config()) {
    ASSERT_TRUE(model.allocate_kv(256, 16).ok());
    engine = std::make_unique<Engine>(model, ec, &metrics);
    metrics.set_gauge_source([this] { return engine->gauges(); });
    engine->start();
    hc.port = 0;
    server = std::make_unique<HttpServer>(hc, *engine, std::make_shared<ByteTokenizer>(), std::move(chat),
                                          metrics);
    ASSERT_TRUE(server->bind().ok());
    thread = std::thread([this] { server->run(); });
  }
  void stop() {
    if (server) server->stop();
    if (thread.joinable()) thread.join();
    if (engine) engine->stop();
  }
  ~LiveServer() { stop(); }
  [[nodiscard]] int port() const { return server->port(); }
  // A client with a 30 s read timeout, sending `key` as a bearer token when it is not empty.
  [[nodiscard]] httplib::Client client(const std::string& key = "") const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(30, 0);
    if (!key.empty()) c.set_bearer_token_auth(key);
    return c;
  }
};

}  // namespace spk::rt::testing
