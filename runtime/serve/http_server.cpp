#include "runtime/serve/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "runtime/serve/completion_handler.h"
#include "runtime/serve/peer_socket.h"

namespace spk::rt {

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body().dump(), "application/json");
}

void send_json(httplib::Response& res, const nlohmann::json& j) {
  res.status = 200;
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// Constant-time comparison: the time taken does not reveal how much of the key matched.
bool same_key(const std::string& a, const std::string& b) {
  unsigned char d = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    d |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return d == 0 && !b.empty();
}

const char* route_label(const std::string& path) {
  for (const char* r : {"/health", "/v1/models", "/v1/completions", "/v1/chat/completions", "/metrics"})
    if (path == r) return r;
  return "other";
}

}  // namespace

HttpServer::HttpServer(HttpConfig cfg, Engine& engine, std::shared_ptr<const Tokenizer> tok, ChatConfig chat,
                       Metrics& metrics)
    : cfg_(std::move(cfg)),
      engine_(engine),
      tok_(std::move(tok)),
      chat_(std::move(chat)),
      metrics_(metrics),
      svr_(std::make_unique<httplib::Server>()),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
  routes();
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::bind() {
  if (cfg_.api_key.empty())
    return make_error("no API key configured", "export the variable named by --api-key-env");
  bool ok;
  if (cfg_.port == 0) {
    bound_port_ = svr_->bind_to_any_port(cfg_.host);
    ok = bound_port_ > 0;
  } else {
    ok = svr_->bind_to_port(cfg_.host, cfg_.port);
    bound_port_ = cfg_.port;
  }
  if (!ok)
    return make_error(
        "cannot bind " + cfg_.host + ":" + std::to_string(cfg_.port) + " (in use or bad address)",
        "pick another --port or --host", true);
  return ok_status();
}

void HttpServer::run() { svr_->listen_after_bind(); }

void HttpServer::stop() {
  if (svr_ && svr_->is_running()) svr_->stop();
}

void HttpServer::routes() {
  auto& s = *svr_;
  const int threads = cfg_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(cfg_.max_body_bytes);
  s.set_read_timeout(30, 0);
  s.set_write_timeout(30, 0);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_key(auth.substr(prefix.size()), cfg_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, api_error(401, "invalid or missing API key (send 'Authorization: Bearer <key>')", {},
                              "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });

  // Called for every status >= 400, including ours: only fill in bodies httplib left empty
  // (413 from the payload limit, 404 for unknown routes, 400 for unparsable HTTP).
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, api_error(413, "request body is larger than " + std::to_string(cfg_.max_body_bytes) +
                                         " bytes (the server's body limit)"));
    else if (res.status == 404)
      send_error(res, api_error(404, "no route " + req.method + " " + req.path, {}, "NotFoundError"));
    else
      send_error(res, api_error(res.status, "bad request"));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what += std::string(": ") + e.what();
    } catch (...) {
    }
    spdlog::error("http: {}", what);
    send_error(res, api_error(500, what, {}, "internal_error"));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.request_done(route_label(req.path), res.status);
  });

  s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"status", "ok"}});
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, models_response(cfg_.served_model_name, created_, engine_.config().max_model_len));
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(cfg_.served_model_name), "text/plain; version=0.0.4");
  });

  auto generate = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      ProtocolLimits lim{cfg_.served_model_name, cfg_.max_n, 0};
      auto parsed = parse_request(req.body, chat, lim);
      if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
      auto gen = std::make_shared<Generation>(
          engine_, tok_, metrics_, std::move(std::get<ApiRequest>(parsed)), cfg_.served_model_name);
      if (auto e = gen->start(chat_)) return send_error(res, *e);

      if (!gen->request().stream) {
        // Nothing is written until the answer, so watch the connection itself (peer_socket.h): a
        // client that hung up frees its sequences within one poll interval.
        const int fd = find_connection_fd(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
        while (!gen->all_done()) {
          gen->poll(std::chrono::milliseconds(100));
          if (peer_hung_up(fd)) {
            gen->abort_all();
            res.status = 499;  // nginx's "client closed request": counted in /metrics, read by nobody
            return;
          }
        }
        auto r = gen->response();
        if (auto* e = std::get_if<ApiError>(&r)) return send_error(res, *e);
        return send_json(res, std::get<nlohmann::json>(r));
      }
      res.set_header("Cache-Control", "no-cache");
      const auto keepalive = std::chrono::milliseconds(cfg_.keepalive_ms);
      res.set_chunked_content_provider(
          "text/event-stream",
          [gen, keepalive](size_t, httplib::DataSink& sink) {
            const auto t0 = std::chrono::steady_clock::now();
            while (true) {
              gen->poll(std::chrono::milliseconds(50));
              std::string ev = gen->take_stream_events();
              if (!ev.empty() && !sink.write(ev.data(), ev.size())) return false;  // client gone
              if (gen->stream_finished()) {
                sink.done();
                return true;
              }
              if (!ev.empty()) return true;
              if (std::chrono::steady_clock::now() - t0 > keepalive) {
                // An SSE comment: clients ignore it, and writing it is how a vanished client shows.
                static const char kPing[] = ": keepalive\n\n";
                return sink.write(kPing, sizeof kPing - 1);
              }
            }
          },
          [gen](bool) { gen->abort_all(); });  // no-op for finished choices; frees the rest
    };
  };
  s.Post("/v1/completions", generate(false));
  s.Post("/v1/chat/completions", generate(true));
}

}  // namespace spk::rt
