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

#include "runtime/serve/completion_handler.h"
#include "runtime/serve/peer_socket.h"

namespace spk::rt {

namespace {

std::string error_text(const ApiError& e) {
  return e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_text(e), "application/json");
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

void ip_and_port(const sockaddr_storage& ss, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// A request the front already holds in full, replayed to cpp-httplib's parser; the answer goes
// straight to the socket (non-blocking: each wait for room is bounded by the write timeout).
class BufferedStream : public httplib::Stream {
 public:
  BufferedStream(int fd, const std::string& request, int write_timeout_ms)
      : fd_(fd), in_(request), timeout_ms_(write_timeout_ms) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override {
    pollfd p{fd_, POLLOUT, 0};
    return ::poll(&p, 1, timeout_ms_) > 0 && !(p.revents & (POLLERR | POLLHUP)) && !peer_hung_up(fd_);
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    size_t off = 0;
    while (off < size) {
      const ssize_t n = ::send(fd_, ptr + off, size - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{fd_, POLLOUT, 0};
        if (::poll(&p, 1, timeout_ms_) > 0 && !(p.revents & (POLLERR | POLLHUP))) continue;
      }
      failed_ = true;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) ip_and_port(ss, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) ip_and_port(ss, ip, port);
  }
  socket_t socket() const override { return fd_; }
  [[nodiscard]] bool failed() const { return failed_; }
  [[nodiscard]] bool consumed() const { return pos_ == in_.size(); }

 private:
  int fd_;
  const std::string& in_;
  size_t pos_ = 0;
  int timeout_ms_;
  bool failed_ = false;
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
                   .count()) {
  FrontConfig fc;
  fc.max_head_bytes = cfg_.max_head_bytes;
  fc.max_body_bytes = cfg_.max_body_bytes;
  fc.head_timeout = std::chrono::milliseconds(cfg_.head_timeout_ms);
  fc.body_timeout = std::chrono::milliseconds(cfg_.body_timeout_ms);
  fc.max_connections = cfg_.max_connections;
  fc.workers = cfg_.threads;
  fc.max_queued = cfg_.max_queued;
  FrontHooks hooks;
  hooks.classify = [this](const RequestHead& h) { return classify(h); };
  hooks.handle = [this](int fd, const std::string& request) { return svr_->serve(fd, request); };
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

// Decided on the head alone, on the front thread: nothing here waits for the engine.
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
  const std::string* auth = h.field("Authorization");
  const std::string prefix = "Bearer ";
  if (!auth || auth->rfind(prefix, 0) != 0 || !same_key(auth->substr(prefix.size()), cfg_.api_key))
    return error(api_error(401, "invalid or missing API key (send 'Authorization: Bearer <key>')", {},
                           "invalid_request_error", "invalid_api_key"));
  if (h.path == "/metrics") {
    if (!get) return only("GET");
    return answer(200, metrics_.render(cfg_.served_model_name), "text/plain; version=0.0.4");
  }
  if (h.path == "/v1/models") {
    if (!get) return only("GET");
    return answer(200, models_response(cfg_.served_model_name, created_, engine_.config().max_model_len)
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  if (h.path == "/v1/completions" || h.path == "/v1/chat/completions") {
    if (h.method != "POST") return only("POST");
    v.dispatch = true;
    v.body_expected = true;
    return v;
  }
  return error(api_error(404, "no route " + h.method + " " + h.path.substr(0, 200), {}, "NotFoundError"));
}

// The handler threads' part: only whole, authenticated POSTs to the generation routes get here.
void HttpServer::routes() {
  auto& s = *svr_;
  s.new_task_queue = [] { return new InlineQueue(); };
  s.set_payload_max_length(cfg_.max_body_bytes);

  // Also checked by the front; kept so that this router never serves an unauthenticated request.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_key(auth.substr(prefix.size()), cfg_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, api_error(401, "invalid or missing API key (send 'Authorization: Bearer <key>')", {},
                              "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });

  // Called for every status >= 400, including ours: only fill in bodies httplib left empty.
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
    send_error(res,
               api_error(500, "internal error while handling the request (the server log has the detail)", {},
                         "internal_error"));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.request_done(route_label(req.path), res.status);
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
