#include "runtime/serve/http_front.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace spk::rt {

namespace {

const char* reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

bool is_blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n'; });
}

bool iequal(const std::string& a, const char* b) {
  const size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// The head handed to the handler thread: as parsed, minus the framing the front already consumed
// (Transfer-Encoding, Expect), with the exact Content-Length of the buffered body.
std::string rewrite(const RequestHead& h, const std::string& body, bool body_expected) {
  std::string out = h.method + " " + h.target + " HTTP/1." + std::to_string(h.minor_version) + "\r\n";
  for (const auto& [k, v] : h.fields) {
    if (iequal(k, "Content-Length") || iequal(k, "Transfer-Encoding") || iequal(k, "Expect")) continue;
    out += k + ": " + v + "\r\n";
  }
  if (body_expected || !body.empty()) out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "\r\n";
  if (body_expected) out += body;
  return out;
}

}  // namespace

struct ConnectionFront::Conn {
  int fd = -1;
  uint64_t serial = 0;
  // draining: answered with Connection: close and shut down for writing; what the client still sends is
  // read and dropped (up to 8 MiB, 1 s; nothing is kept), so that closing does not reset the answer
  // before a client that is still sending its refused body gets to read it.
  enum class Phase { head, body, writing, draining } phase = Phase::head;
  size_t drained = 0;
  Clock::time_point deadline;
  std::string in;      // bytes read and not yet consumed
  size_t scanned = 0;  // head phase: where the search for the blank line resumes
  RequestHead head;
  BodyFraming framing;
  bool body_expected = false;
  std::unique_ptr<ChunkedDecoder> chunked;
  std::string body;
  size_t charged = 0;  // bytes counted against max_buffered_bytes
  std::string out;
  size_t out_off = 0;
  bool close_after_write = false;
};

ConnectionFront::ConnectionFront(FrontConfig cfg, FrontHooks hooks)
    : cfg_(std::move(cfg)), hooks_(std::move(hooks)) {}

ConnectionFront::~ConnectionFront() { stop(); }

Status ConnectionFront::start() {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wakefd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd_ < 0 || wakefd_ < 0)
    return make_error(std::string("http front: epoll/eventfd: ") + std::strerror(errno), "raise the fd limit",
                      true);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wakefd_;
  ::epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev);
  loop_thread_ = std::thread([this] { loop(); });
  for (int i = 0; i < std::max(1, cfg_.workers); ++i) workers_.emplace_back([this] { worker(); });
  return ok_status();
}

void ConnectionFront::adopt(int fd) {
  if (stop_) {
    ::close(fd);
    return;
  }
  {
    std::lock_guard l(mu_);
    incoming_.push_back(fd);
  }
  const uint64_t one = 1;
  (void)!::write(wakefd_, &one, sizeof one);
}

void ConnectionFront::stop() {
  if (stop_.exchange(true)) return;
  if (wakefd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wakefd_, &one, sizeof one);
  }
  if (loop_thread_.joinable()) loop_thread_.join();
  {
    std::lock_guard l(mu_);
    for (int fd : busy_fds_) ::shutdown(fd, SHUT_RDWR);  // handlers see a gone client and return
  }
  cv_.notify_all();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  workers_.clear();
  std::lock_guard l(mu_);
  for (auto& j : queue_) ::close(j.conn->fd);
  queue_.clear();
  for (auto& c : returned_) ::close(c->fd);
  returned_.clear();
  for (int fd : incoming_) ::close(fd);
  incoming_.clear();
  for (auto& [fd, c] : conns_) ::close(fd);
  conns_.clear();
  if (epfd_ >= 0) ::close(epfd_);
  if (wakefd_ >= 0) ::close(wakefd_);
  epfd_ = wakefd_ = -1;
}

FrontStats ConnectionFront::stats() const {
  std::lock_guard l(mu_);
  FrontStats s = stats_;
  s.queued = queue_.size();
  s.busy = busy_fds_.size();
  return s;
}

void ConnectionFront::set_interest(Conn& c, uint32_t events) {
  epoll_event ev{};
  ev.events = (events & EPOLLIN) ? events | EPOLLRDHUP : events;  // a writer must not spin on RDHUP
  ev.data.fd = c.fd;
  ::epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void ConnectionFront::close_conn(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  release(it->second->charged);
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns_.erase(it);
}

void ConnectionFront::release(size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard l(mu_);
  buffered_ -= std::min(buffered_, bytes);
}

void ConnectionFront::to_head_phase(Conn& c) {
  c.phase = Conn::Phase::head;
  c.deadline = Clock::now() + cfg_.head_timeout;
  c.scanned = 0;
  c.head = RequestHead{};
  c.framing = BodyFraming{};
  c.chunked.reset();
  c.body.clear();
  c.body.shrink_to_fit();
  c.out.clear();
  c.out_off = 0;
  c.close_after_write = false;
  set_interest(c, EPOLLIN);
}

void ConnectionFront::take_incoming() {
  uint64_t v;
  while (::read(wakefd_, &v, sizeof v) > 0) {
  }
  std::vector<int> fresh;
  std::vector<std::unique_ptr<Conn>> back;
  {
    std::lock_guard l(mu_);
    fresh.swap(incoming_);
    back.swap(returned_);
    stats_.connections = conns_.size() + fresh.size() + back.size();
  }
  for (int fd : fresh) {
    // At the cap, the connection that has waited longest for its request makes room: a real client
    // sends its head within milliseconds, so only idle or trickling sockets are ever the oldest.
    if (conns_.size() >= cfg_.max_connections) {
      auto oldest = conns_.end();
      for (auto it = conns_.begin(); it != conns_.end(); ++it)
        if (it->second->phase == Conn::Phase::head &&
            (oldest == conns_.end() || it->second->serial < oldest->second->serial))
          oldest = it;
      if (oldest == conns_.end()) {
        ::close(fd);
        continue;
      }
      close_conn(oldest->first);
      std::lock_guard l(mu_);
      ++stats_.evicted;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->serial = next_serial_++;
    c->deadline = Clock::now() + cfg_.head_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    conns_.emplace(fd, std::move(c));
  }
  for (auto& c : back) {
    const int fd = c->fd;
    c->serial = next_serial_++;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    Conn& ref = *c;
    conns_.emplace(fd, std::move(c));
    to_head_phase(ref);
    if (!ref.in.empty()) process(ref);  // a pipelined request already arrived
  }
}

void ConnectionFront::loop() {
  std::vector<epoll_event> evs(256);
  auto last_sweep = Clock::now();
  while (!stop_) {
    const int n = ::epoll_wait(epfd_, evs.data(), static_cast<int>(evs.size()), 100);
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == wakefd_) {
        take_incoming();
        continue;
      }
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;
      Conn& c = *it->second;
      if (evs[i].events & EPOLLERR) {
        close_conn(fd);
        continue;
      }
      if (c.phase == Conn::Phase::writing) {
        if (evs[i].events & EPOLLHUP) {
          close_conn(fd);
        } else if (evs[i].events & EPOLLOUT) {
          on_writable(c);
        }
      } else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) {
        on_readable(c);
      }
    }
    if (Clock::now() - last_sweep > std::chrono::milliseconds(50)) {
      sweep();
      last_sweep = Clock::now();
    }
  }
}

void ConnectionFront::sweep() {
  const auto now = Clock::now();
  std::vector<int> expired;
  for (auto& [fd, c] : conns_)
    if (now > c->deadline) expired.push_back(fd);
  for (int fd : expired) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) continue;
    Conn& c = *it->second;
    if (c.phase == Conn::Phase::head && !is_blank(c.in)) {
      {
        std::lock_guard l(mu_);
        ++stats_.head_timeouts;
      }
      fail(c, 408,
           "request head not complete within " + std::to_string(cfg_.head_timeout.count()) +
               " ms (send the whole head at once)");
    } else if (c.phase == Conn::Phase::body) {
      {
        std::lock_guard l(mu_);
        ++stats_.body_timeouts;
      }
      std::string got =
          c.framing.kind == BodyFraming::sized
              ? std::to_string(c.in.size()) + " of the " + std::to_string(c.framing.length) +
                    " bytes its Content-Length announced"
              : std::to_string(c.body.size()) + " bytes of a chunked body without its last chunk";
      fail(c, 408,
           "request body not complete within " + std::to_string(cfg_.body_timeout.count()) + " ms (got " +
               got + ")");
    } else {
      close_conn(fd);  // idle keep-alive connection, or a client that does not read its response
    }
  }
}

void ConnectionFront::on_readable(Conn& c) {
  char buf[65536];
  const int fd = c.fd;
  // Head phase: never hold more than the cap (+ one read) of an unfinished head.
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (c.phase == Conn::Phase::draining) {
    if (n > 0) c.drained += static_cast<size_t>(n);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
        c.drained > (8u << 20))
      close_conn(fd);
    return;
  }
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    close_conn(fd);  // the client went away (or reset) before a whole request
    return;
  }
  if (n < 0) return;
  c.in.append(buf, static_cast<size_t>(n));
  process(c);
}

void ConnectionFront::process(Conn& c) {
  if (c.phase == Conn::Phase::head) {
    // Only parse once a blank line may have arrived (a trickled head is scanned once, not per byte).
    const size_t from = c.scanned >= 3 ? c.scanned - 3 : 0;
    const bool ended =
        c.in.find("\n\n", from) != std::string::npos || c.in.find("\n\r\n", from) != std::string::npos;
    c.scanned = c.in.size();
    if (!ended && c.in.size() <= cfg_.max_head_bytes) return;
    HeadParse hp = parse_head(c.in, cfg_.max_head_bytes);
    if (hp.state == HeadState::incomplete) return;
    if (hp.state == HeadState::too_large) {
      {
        std::lock_guard l(mu_);
        ++stats_.oversized;
      }
      return fail(c, 431, hp.problem);
    }
    if (hp.state == HeadState::bad) return fail(c, 400, hp.problem);
    c.in.erase(0, hp.head_bytes);
    return on_head(c, hp);
  }
  if (c.phase == Conn::Phase::body) finish_body(c);
}

void ConnectionFront::on_head(Conn& c, const HeadParse& hp) {
  c.head = hp.head;
  const RequestHead& h = c.head;
  if (const std::string* e = h.field("Expect"); e && !iequal(*e, "100-continue"))
    return fail(c, 417, "Expect '" + e->substr(0, 64) + "' is not supported (only 100-continue)");
  Verdict v = hooks_.classify(h);
  const bool has_body =
      h.count("Transfer-Encoding") > 0 || (h.field("Content-Length") && *h.field("Content-Length") != "0");
  if (!v.dispatch) {
    // Answered here; a body that came with it is not read, so the connection ends after the answer.
    return respond(c, v.response, has_body || v.response.status >= 400, h.path.c_str());
  }
  c.body_expected = v.body_expected;
  c.framing = body_framing(h, v.body_expected, cfg_.max_body_bytes);
  if (c.framing.kind == BodyFraming::error) {
    if (c.framing.status == 413) {
      std::lock_guard l(mu_);
      ++stats_.oversized;
    }
    return fail(c, c.framing.status, c.framing.problem);
  }
  if (!v.body_expected && c.framing.kind != BodyFraming::none)
    return fail(c, 400, h.method + " " + h.path + " takes no request body");
  // Budget for the body (all bodies in the front, the queue and the handlers together).
  const size_t want = c.framing.kind == BodyFraming::sized ? static_cast<size_t>(c.framing.length) : 0;
  bool over = false;
  {
    std::lock_guard l(mu_);
    over = buffered_ + want > cfg_.max_buffered_bytes;
    if (over)
      ++stats_.busy_refusals;
    else
      buffered_ += want;
  }
  if (over) {
    FrontResponse r =
        hooks_.error(503, "the server is at capacity: too many request bodies in flight (retry)");
    r.headers.emplace_back("Retry-After", "1");
    return respond(c, r, true, c.head.path.c_str());
  }
  c.charged = want;
  c.phase = Conn::Phase::body;
  c.deadline = Clock::now() + cfg_.body_timeout;
  if (c.framing.kind == BodyFraming::chunked)
    c.chunked = std::make_unique<ChunkedDecoder>(cfg_.max_body_bytes);
  if (h.field("Expect") && c.framing.kind != BodyFraming::none && c.in.empty()) {
    static const char k100[] = "HTTP/1.1 100 Continue\r\n\r\n";
    (void)!::send(c.fd, k100, sizeof k100 - 1,
                  MSG_NOSIGNAL);  // best effort: clients send anyway after a wait
  }
  finish_body(c);
}

void ConnectionFront::finish_body(Conn& c) {
  if (c.framing.kind == BodyFraming::sized) {
    if (c.in.size() < c.framing.length) return;
    c.body = c.in.substr(0, static_cast<size_t>(c.framing.length));
    c.in.erase(0, static_cast<size_t>(c.framing.length));
  } else if (c.framing.kind == BodyFraming::chunked) {
    const size_t before = c.body.size();
    const size_t used = c.chunked->feed(c.in, c.body);
    c.in.erase(0, used);
    const size_t grown = c.body.size() - before;
    if (grown > 0) {
      std::lock_guard l(mu_);
      buffered_ += grown;
    }
    c.charged += grown;
    if (c.chunked->failed()) {
      if (c.chunked->too_large()) {
        std::lock_guard l(mu_);
        ++stats_.oversized;
      }
      return fail(c, c.chunked->too_large() ? 413 : 400, c.chunked->problem());
    }
    if (!c.chunked->done()) return;
  }
  // A whole request: to a handler thread, or 503 when the queue is full.
  Job job;
  job.request = rewrite(c.head, c.body, c.body_expected);
  job.charged = c.charged;
  {
    std::lock_guard l(mu_);
    if (queue_.size() >= cfg_.max_queued && idle_workers_ == 0) {
      ++stats_.busy_refusals;
    } else {
      auto it = conns_.find(c.fd);
      ::epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
      job.conn = std::move(it->second);
      job.conn->charged = 0;
      job.conn->body.clear();
      conns_.erase(it);
      queue_.push_back(std::move(job));
      cv_.notify_one();
      return;
    }
  }
  FrontResponse r = hooks_.error(503, "the server is at capacity: " + std::to_string(cfg_.max_queued) +
                                          " requests are waiting for a handler (retry)");
  r.headers.emplace_back("Retry-After", "1");
  respond(c, r, true, c.head.path.c_str());
}

void ConnectionFront::fail(Conn& c, int status, const std::string& message) {
  respond(c, hooks_.error(status, message), true, c.head.path.empty() ? nullptr : c.head.path.c_str());
}

void ConnectionFront::respond(Conn& c, const FrontResponse& r, bool close, const char* path_label) {
  const bool head_only = c.head.method == "HEAD";
  close = close || !c.head.keep_alive() || c.head.method.empty();
  std::string& o = c.out;
  o = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  o += "Content-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [k, v] : r.headers) o += k + ": " + v + "\r\n";
  o += close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
  if (!head_only) o += r.body;
  c.out_off = 0;
  c.close_after_write = close;
  c.phase = Conn::Phase::writing;
  c.deadline = Clock::now() + cfg_.write_timeout;
  if (hooks_.observe) hooks_.observe(path_label ? path_label : "other", r.status);
  release(c.charged);
  c.charged = 0;
  flush(c);
}

void ConnectionFront::on_writable(Conn& c) { flush(c); }

void ConnectionFront::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return set_interest(c, EPOLLOUT);
    if (n < 0 && errno == EINTR) continue;
    return close_conn(c.fd);
  }
  if (c.close_after_write) {
    // Let the client read the answer before the reset an unread request body would cause.
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Conn::Phase::draining;
    c.deadline = Clock::now() + std::chrono::milliseconds(1000);
    c.in.clear();
    c.in.shrink_to_fit();
    return set_interest(c, EPOLLIN);
  }
  to_head_phase(c);
  if (!c.in.empty()) process(c);
}

void ConnectionFront::worker() {
  while (true) {
    Job job;
    {
      std::unique_lock l(mu_);
      ++idle_workers_;
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      --idle_workers_;
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_fds_.insert(job.conn->fd);
    }
    const int fd = job.conn->fd;
    bool keep = false;
    // A client that left while its request waited in the queue costs nothing more.
    pollfd p{fd, POLLRDHUP, 0};
    const bool gone = ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
    if (!gone) {
      try {
        keep = hooks_.handle(fd, job.request);
      } catch (const std::exception& e) {
        spdlog::error("http: handler: {}", e.what());
      }
    }
    release(job.charged);
    bool give_back = false;
    {
      std::lock_guard l(mu_);
      busy_fds_.erase(fd);
      if (keep && !stop_) {
        returned_.push_back(std::move(job.conn));
        give_back = true;
      }
    }
    if (give_back) {
      const uint64_t one = 1;
      (void)!::write(wakefd_, &one, sizeof one);
    } else {
      ::close(fd);
    }
  }
}

}  // namespace spk::rt
