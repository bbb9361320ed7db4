#include "runtime/serve/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "runtime/serve/api_front.h"
#include "runtime/serve/buffered_stream.h"
#include "runtime/serve/completion_handler.h"
#include "runtime/serve/http_errors.h"
#include "runtime/serve/http_metrics.h"
#include "runtime/serve/messages_api.h"
#include "runtime/serve/peer_socket.h"
#include "runtime/serve/responses_api.h"

namespace spk::rt {

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_text(e), "application/json");
}

void send_body(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

// /v1/completions and /v1/chat/completions: the Generation writes its own OpenAI chunks and bodies.
class OpenAiFront : public ApiFront {
 public:
  std::string take_events(Generation& gen) override { return gen.take_stream_events(); }
  [[nodiscard]] bool finished() const override { return finished_; }
  std::pair<int, nlohmann::json> response(Generation& gen) override {
    auto r = gen.response();
    if (auto* e = std::get_if<ApiError>(&r)) return {e->status, e->body()};
    return {200, std::get<nlohmann::json>(r)};
  }
  void update(const Generation& gen) { finished_ = gen.stream_finished(); }

 private:
  bool finished_ = false;
};

// cpp-httplib's listener accepts, and runs this task inline on its own thread: the socket goes to the
// front at once instead of to a pool thread that would wait for the client's head.
class InlineQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// Many connections need many descriptors: the soft limit goes up to the hard one.
void raise_fd_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
}

}  // namespace

// The connection a handler thread is serving (set around process_request): the non-streaming handler
// watches it for a hang-up without scanning /proc/self/fd.
thread_local int t_conn_fd = -1;

class FrontedServer : public httplib::Server {
 public:
  ConnectionFront* front = nullptr;
  int write_timeout_ms = 10000;
  // One buffered request on `fd`: parse, route, answer. True when the connection may continue.
  bool serve(int fd, const std::string& request) {
    BufferedStream s(fd, request, write_timeout_ms);
    bool closed = false;
    t_conn_fd = fd;
    const bool ok = process_request(s, false, closed, nullptr);
    t_conn_fd = -1;
    return ok && !closed && !s.failed() && s.consumed();
  }
  // cpp-httplib listens with a backlog of 5: a burst of connections overflows it and each dropped SYN
  // costs its client a 1 s retransmit. listen() again raises it (Linux caps it at somaxconn).
  void widen_backlog() {
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, 4096);
  }

 protected:
  bool process_and_close_socket(socket_t sock) override {
    if (front)
      front->adopt(sock);
    else
      ::close(sock);
    return true;
  }
};

HttpServer::HttpServer(HttpConfig cfg, Engine& engine, std::shared_ptr<const Tokenizer> tok, ChatConfig chat,
                       Metrics& metrics)
    : cfg_(std::move(cfg)),
      engine_(engine),
      tok_(std::move(tok)),
      chat_(std::move(chat)),
      metrics_(metrics),
      svr_(std::make_unique<FrontedServer>()),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      responses_(cfg_.max_stored_responses, cfg_.max_stored_response_bytes) {
  FrontConfig fc;
  fc.max_head_bytes = cfg_.max_head_bytes;
  fc.max_body_bytes = cfg_.max_body_bytes;
  fc.head_timeout = std::chrono::milliseconds(cfg_.head_timeout_ms);
  fc.body_timeout = std::chrono::milliseconds(cfg_.body_timeout_ms);
  fc.max_connections = cfg_.max_connections;
  fc.max_connections_per_peer = cfg_.max_connections_per_peer;
  fc.workers = cfg_.threads;
  fc.max_queued = cfg_.max_queued;
  FrontHooks hooks;
  hooks.classify = [this](const RequestHead& h) { return classify(h); };
  hooks.handle = [this](int fd, const std::string& request) {
    const auto large = trimmer_.track(request.size());  // trims once the last large one is done
    return svr_->serve(fd, request);
  };
  hooks.error = [](int status, const std::string& message) {
    FrontResponse r;
    r.status = status;
    const char* type = status == 503 ? "server_error" : "invalid_request_error";
    r.body = error_text(api_error(status, message, {}, type, status == 503 ? "server_overloaded" : ""));
    return r;
  };
  hooks.observe = [this](const std::string& path, int status) {
    metrics_.request_done(route_label(path), status);
  };
  front_ = std::make_unique<ConnectionFront>(fc, std::move(hooks));
  svr_->front = front_.get();
  svr_->write_timeout_ms = static_cast<int>(fc.write_timeout.count());
  routes();
}

HttpServer::~HttpServer() {
  stop();
  if (front_) front_->stop();
}

Status HttpServer::bind() {
  if (cfg_.api_key.empty())
    return make_error("no API key configured", "export the variable named by --api-key-env");
  raise_fd_limit();
  if (const int arenas = bound_malloc_arenas(cfg_.malloc_arena_max); arenas > 0)
    spdlog::info("malloc: at most {} arenas (MALLOC_ARENA_MAX overrides)", arenas);
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
  svr_->widen_backlog();
  return front_->start();
}

void HttpServer::run() {
  svr_->listen_after_bind();
  front_->stop();  // the listener is closed: end every connection, join the handler threads
}

void HttpServer::stop() {
  if (svr_ && svr_->is_running()) svr_->stop();
}

FrontStats HttpServer::front_stats() const { return front_->stats(); }

// The handler threads' part: only whole, authenticated POSTs to the generation routes get here.
void HttpServer::routes() {
  auto& s = *svr_;
  s.new_task_queue = [] { return new InlineQueue(); };
  s.set_payload_max_length(cfg_.max_body_bytes);

  // Also checked by the front; kept so that this router never serves an unauthenticated request.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const std::string auth = req.get_header_value("Authorization");
    const std::string key = req.get_header_value("x-api-key");
    if (authorized(req.has_header("Authorization") ? &auth : nullptr,
                   req.has_header("x-api-key") ? &key : nullptr))
      return httplib::Server::HandlerResponse::Unhandled;
    res.status = 401;
    res.set_content(
        error_text_for(req.path, api_error(401, kAuthHelp, {}, "invalid_request_error", "invalid_api_key")),
        "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });

  // Called for every status >= 400, including ours: only fill in bodies httplib left empty.
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e = api_error(res.status, "bad request");
    if (res.status == 413)
      e = api_error(413, "request body is larger than " + std::to_string(cfg_.max_body_bytes) +
                             " bytes (the server's body limit)");
    else if (res.status == 404)
      e = api_error(404, "no route " + req.method + " " + req.path, {}, "NotFoundError");
    res.set_content(error_text_for(req.path, e), "application/json");
  });
  // The detail of an exception stays in the server log: it can name files and library internals.
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("http: {} {}: {}", req.method, req.path, what);
    res.status = 500;
    res.set_content(
        error_text_for(
            req.path,
            api_error(500, "internal error while handling the request (the server log has the detail)", {},
                      "internal_error")),
        "application/json");
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.request_done(route_label(req.path), res.status);
  });

  // One started generation through its front: the whole answer (non-streaming), or its events as they come.
  auto drive = [this](const httplib::Request& req, httplib::Response& res, std::shared_ptr<Generation> gen,
                      std::shared_ptr<ApiFront> front, bool stream) {
    auto* openai = dynamic_cast<OpenAiFront*>(front.get());
    if (!stream) {
      // Nothing is written until the answer, so watch the connection itself (peer_socket.h): a
      // client that hung up frees its sequences within one poll interval.
      const int fd = t_conn_fd >= 0 ? t_conn_fd
                                    : find_connection_fd(req.local_addr, req.local_port, req.remote_addr,
                                                         req.remote_port);
      while (!gen->all_done()) {
        gen->poll(std::chrono::milliseconds(100));
        if (peer_hung_up(fd)) {
          gen->abort_all();
          res.status = 499;  // nginx's "client closed request": counted in /metrics, read by nobody
          return;
        }
      }
      auto [status, body] = front->response(*gen);
      return send_body(res, status, body);
    }
    res.set_header("Cache-Control", "no-cache");
    const auto keepalive = std::chrono::milliseconds(cfg_.keepalive_ms);
    res.set_chunked_content_provider(
        "text/event-stream",
        [gen, front, openai, keepalive](size_t, httplib::DataSink& sink) {
          const auto t0 = std::chrono::steady_clock::now();
          while (true) {
            gen->poll(std::chrono::milliseconds(50));
            std::string ev = front->take_events(*gen);
            if (openai) openai->update(*gen);
            if (!ev.empty() && !sink.write(ev.data(), ev.size())) return false;  // client gone
            if (front->finished()) {
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

  auto generate = [this, drive](bool chat) {
    return [this, chat, drive](const httplib::Request& req, httplib::Response& res) {
      ProtocolLimits lim{cfg_.served_model_name, cfg_.max_n, 0};
      auto parsed = parse_request(req.body, chat, lim);
      if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
      auto& q = std::get<ApiRequest>(parsed);
      if (chat) apply_default_kwargs(q, cfg_.default_chat_template_kwargs);
      auto gen = std::make_shared<Generation>(engine_, tok_, metrics_, std::move(q), cfg_.served_model_name);
      if (auto e = gen->start(chat_, cfg_.parsing)) return send_error(res, *e);
      drive(req, res, gen, std::make_shared<OpenAiFront>(), gen->request().stream);
    };
  };
  s.Post("/v1/messages", [this, drive](const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_messages_request(req.body, cfg_.served_model_name);
    if (auto* e = std::get_if<FieldError>(&parsed))
      return send_body(res, e->status, anthropic_error_body(*e));
    auto& m = std::get<MessagesRequest>(parsed);
    const bool stream = m.api.stream;
    apply_default_kwargs(m.api, cfg_.default_chat_template_kwargs);
    auto gen =
        std::make_shared<Generation>(engine_, tok_, metrics_, std::move(m.api), cfg_.served_model_name);
    if (auto e = gen->start(chat_, cfg_.parsing))
      return send_body(res, e->status, anthropic_error_body(from_api_error(*e)));
    drive(req, res, gen, std::make_shared<MessagesFront>(cfg_.served_model_name, gen->usage().prompt_tokens),
          stream);
  });
  s.Post("/v1/messages/count_tokens", [this](const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_messages_request(req.body, cfg_.served_model_name, /*count_tokens=*/true);
    if (auto* e = std::get_if<FieldError>(&parsed))
      return send_body(res, e->status, anthropic_error_body(*e));
    auto& api = std::get<MessagesRequest>(parsed).api;
    apply_default_kwargs(api, cfg_.default_chat_template_kwargs);
    auto ids = chat_prompt_ids(chat_, *tok_, api);
    if (auto* e = std::get_if<ApiError>(&ids))
      return send_body(res, e->status, anthropic_error_body(from_api_error(*e)));
    send_body(res, 200, {{"input_tokens", std::get<std::vector<int32_t>>(ids).size()}});
  });
  s.Post("/v1/responses", [this, drive](const httplib::Request& req, httplib::Response& res) {
    auto parsed = parse_responses_request(req.body, cfg_.served_model_name);
    if (auto* e = std::get_if<FieldError>(&parsed)) return send_body(res, e->status, openai_error_body(*e));
    auto& r = std::get<ResponsesRequest>(parsed);
    if (auto e = resolve_history(r, responses_)) return send_body(res, e->status, openai_error_body(*e));
    apply_default_kwargs(r.api, cfg_.default_chat_template_kwargs);
    auto gen = std::make_shared<Generation>(engine_, tok_, metrics_, r.api, cfg_.served_model_name);
    if (auto e = gen->start(chat_, cfg_.parsing)) {
      FieldError fe{e->status, e->param == "messages" ? "input" : e->param, e->message, e->code};
      return send_body(res, fe.status, openai_error_body(fe));
    }
    const bool stream = r.api.stream;
    drive(req, res, gen, std::make_shared<ResponsesFront>(std::move(r), cfg_.served_model_name, &responses_),
          stream);
  });
  // The stored text is sent from the store's own copy (shared, no copy per reader), in 1 MiB pieces.
  s.Get(R"(/v1/responses/(.*))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    auto r = responses_.get(id);
    if (!r)
      return send_error(res, api_error(404,
                                       "Response with id '" + id.substr(0, 100) +
                                           "' not found (responses are kept in memory, the latest " +
                                           std::to_string(responses_.capacity()) + " within " +
                                           std::to_string(responses_.max_bytes() >> 20) +
                                           " MiB, and only with store: true)",
                                       {}, "invalid_request_error", "response_not_found"));
    res.status = 200;
    res.set_content_provider(r->response_text.size(), "application/json",
                             [r](size_t offset, size_t length, httplib::DataSink& sink) {
                               return sink.write(r->response_text.data() + offset,
                                                 std::min<size_t>(length, 1u << 20));
                             });
  });
  s.Post("/v1/completions", generate(false));
  s.Post("/v1/chat/completions", generate(true));
}

}  // namespace spk::rt
