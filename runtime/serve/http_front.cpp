#include "runtime/serve/http_front.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "runtime/serve/http_front_conn.h"

namespace spk::rt {

namespace {

bool is_blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n'; });
}

}  // namespace

ConnectionFront::ConnectionFront(FrontConfig cfg, FrontHooks hooks)
    : cfg_(std::move(cfg)), hooks_(std::move(hooks)), ledger_(cfg_.max_connections_per_peer) {}

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
  ledger_.remove(fd);
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
  ledger_.waiting(c.fd, true);
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
    std::string peer = peer_address(fd);
    if (!admit(peer)) {
      ::close(fd);
      continue;
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->serial = next_serial_++;
    c->peer = std::move(peer);
    c->deadline = Clock::now() + cfg_.head_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    ledger_.add(fd, c->serial, c->peer, false);
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
    ledger_.add(fd, ref.serial, ref.peer, true);  // a keep-alive client: it has sent before
    conns_.emplace(fd, std::move(c));
    to_head_phase(ref);
    if (!ref.in.empty()) process(ref);  // a pipelined request already arrived
  }
}

// Makes room for a new connection of `peer` (peer_ledger.h: its own oldest idle socket at the per-peer
// limit, at the cap the idlest socket of the peer holding the most); false: refused, nothing waits that
// could be closed.
bool ConnectionFront::admit(const std::string& peer) {
  const bool per_peer = ledger_.at_peer_limit(peer);
  if (!per_peer && conns_.size() < cfg_.max_connections) return true;
  const int victim = per_peer ? ledger_.peer_victim(peer) : ledger_.victim();
  if (victim >= 0) close_conn(victim);
  std::lock_guard l(mu_);
  ++(victim < 0 ? stats_.refused : per_peer ? stats_.evicted_peer : stats_.evicted_cap);
  return victim >= 0;
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
  ledger_.sent(fd);
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
  ledger_.waiting(c.fd, false);  // reading its body or being answered: no longer an idle socket
  c.head = hp.head;
  const RequestHead& h = c.head;
  if (const std::string* e = h.field("Expect"); e && ::strcasecmp(e->c_str(), "100-continue") != 0)
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
  job.request = handler_request(c.head, c.body, c.body_expected);
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
      ledger_.remove(c.fd);
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

}  // namespace spk::rt
