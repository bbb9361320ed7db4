// The answer side of the connection front (http_front.h): writing a response without blocking the front
// thread (the rest when the socket has room), closing gracefully, and the handler threads that run whole
// requests and hand keep-alive connections back.
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/serve/http_front.h"
#include "runtime/serve/http_front_conn.h"

namespace spk::rt {

void ConnectionFront::fail(Conn& c, int status, const std::string& message) {
  respond(c, hooks_.error(status, message), true, c.head.path.empty() ? nullptr : c.head.path.c_str());
}

void ConnectionFront::respond(Conn& c, const FrontResponse& r, bool close, const char* path_label) {
  ledger_.waiting(c.fd, false);
  const bool head_only = c.head.method == "HEAD";
  close = close || !c.head.keep_alive() || c.head.method.empty();
  std::string& o = c.out;
  o = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
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
