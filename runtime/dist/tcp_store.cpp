#include "runtime/dist/tcp_store.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <thread>

namespace spk::rt::dist {

namespace {
constexpr size_t kMaxKey = 4096;

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
bool get_u32(const std::string& s, size_t at, uint32_t* v) {
  if (s.size() < at + 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return true;
}
Clock::time_point after(std::chrono::milliseconds d) { return Clock::now() + d; }
}  // namespace

std::string hello_frame(const std::string& token, const std::string& kind, int rank) {
  return "SPK1 " + token + "\n" + kind + " " + std::to_string(rank);
}

StoreServer::StoreServer(std::string token, int world, std::function<void(int, FrameSocket)> on_ctrl)
    : token_(std::move(token)), world_(world), on_ctrl_(std::move(on_ctrl)) {}

StoreServer::~StoreServer() { stop(); }

Status StoreServer::start(const HostPort& bind, int* bound_port) {
  SPK_ASSIGN(listen_fd_, listen_on(bind, bound_port));
  acceptor_ = std::thread([this] { accept_loop(); });
  return {};
}

void StoreServer::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_ && !acceptor_.joinable()) return;
    stopping_ = true;
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  cv_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

int StoreServer::token_refusals() const {
  std::lock_guard lk(mu_);
  return token_refusals_;
}

void StoreServer::accept_loop() {
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (stopping_) return;
    }
    auto s = accept_until(listen_fd_, Clock::now() + std::chrono::milliseconds(100));
    if (!s.ok()) continue;
    std::lock_guard lk(mu_);
    conn_fds_.push_back(s->fd());
    workers_.emplace_back([this, sock = std::move(*s)]() mutable { serve(std::move(sock)); });
  }
}

void StoreServer::serve(FrameSocket s) {
  auto hello = s.recv(after(std::chrono::seconds(10)));
  if (!hello.ok()) return;
  const std::string want = "SPK1 " + token_ + "\n";
  if (hello->compare(0, want.size(), want) != 0) {
    {
      std::lock_guard lk(mu_);
      ++token_refusals_;
    }
    spdlog::warn("rendezvous: refused a connection with a wrong token (SPARKCTL_RDZV_TOKEN differs)");
    (void)s.send("ERR rendezvous token mismatch", after(std::chrono::seconds(1)));
    return;
  }
  std::string rest = hello->substr(want.size());
  auto sp = rest.find(' ');
  int rank = -1;
  if (sp != std::string::npos) {
    try {
      rank = std::stoi(rest.substr(sp + 1));
    } catch (const std::exception&) {
    }
  }
  std::string kind = rest.substr(0, sp);
  if (rank < 0 || rank >= world_ || (kind != "store" && kind != "ctrl")) {
    (void)s.send("ERR bad hello '" + rest.substr(0, 64) + "' (world is " + std::to_string(world_) + ")",
                 after(std::chrono::seconds(1)));
    return;
  }
  if (!s.send("OK", after(std::chrono::seconds(10))).ok()) return;
  if (kind == "ctrl") {
    {
      std::lock_guard lk(mu_);
      std::erase(conn_fds_, s.fd());  // the control channel outlives the store
    }
    on_ctrl_(rank, std::move(s));
    return;
  }
  for (;;) {
    auto req = s.recv(Clock::time_point::max());
    if (!req.ok() || req->empty()) return;
    uint32_t a = 0;
    if ((*req)[0] == 'S' && get_u32(*req, 1, &a) && a <= kMaxKey && req->size() >= 5 + a) {
      {
        std::lock_guard lk(mu_);
        kv_[req->substr(5, a)] = req->substr(5 + a);
      }
      cv_.notify_all();
      if (!s.send("O", after(std::chrono::seconds(10))).ok()) return;
    } else if ((*req)[0] == 'G' && get_u32(*req, 1, &a) && req->size() - 5 <= kMaxKey) {
      std::string key = req->substr(5);
      std::unique_lock lk(mu_);
      bool found =
          cv_.wait_for(lk, std::chrono::milliseconds(a), [&] { return stopping_ || kv_.count(key) > 0; });
      if (stopping_) return;
      std::string reply = found ? "O" + kv_[key] : "T";
      lk.unlock();
      if (!s.send(reply, after(std::chrono::seconds(10))).ok()) return;
    } else {
      return;  // untrusted: a bad request drops the connection
    }
  }
}

Result<FrameSocket> dial(const HostPort& master, const std::string& token, const std::string& kind, int rank,
                         Clock::time_point deadline) {
  Error last = make_error("no attempt");
  while (Clock::now() < deadline) {
    auto s = connect_once(master, deadline);
    if (!s.ok()) {
      last = s.error();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    SPK_TRY(s->send(hello_frame(token, kind, rank), deadline));
    auto reply = s->recv(deadline);
    if (!reply.ok())
      return make_error("rendezvous at " + master.host + ":" + std::to_string(master.port) +
                        " dropped rank " + std::to_string(rank) + ": " + reply.error().message);
    if (*reply == "OK") return std::move(*s);
    if (reply->find("token") != std::string::npos)
      return make_error("rank 0 at " + master.host + ":" + std::to_string(master.port) + " refused rank " +
                            std::to_string(rank) + "'s rendezvous token",
                        "set the same SPARKCTL_RDZV_TOKEN on every rank");
    return make_error("rank 0 refused rank " + std::to_string(rank) + ": " + reply->substr(0, 200));
  }
  return make_error("rank " + std::to_string(rank) + " could not reach rank 0's rendezvous at " +
                        master.host + ":" + std::to_string(master.port) + " (" + last.message + ")",
                    "start rank 0 or raise the join timeout", true);
}

void StoreClient::set(const std::string& key, const std::vector<char>& data) {
  if (key.size() > kMaxKey) throw std::runtime_error("store key too long");
  std::string req = "S";
  put_u32(req, static_cast<uint32_t>(key.size()));
  req += key;
  req.append(data.data(), data.size());
  std::lock_guard lk(mu_);
  auto dl = after(timeout_);
  auto st = s_.send(req, dl);
  if (!st.ok()) throw std::runtime_error("rendezvous store set '" + key + "': " + st.error().message);
  auto r = s_.recv(dl);
  if (!r.ok() || *r != "O") throw std::runtime_error("rendezvous store set '" + key + "' failed");
}

std::string StoreClient::get_or_throw(const std::string& key, std::chrono::milliseconds timeout) {
  std::lock_guard lk(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  std::string req = "G";
  put_u32(req, static_cast<uint32_t>(timeout.count()));
  req += key;
  auto dl = after(timeout + std::chrono::seconds(5));
  auto st = s_.send(req, dl);
  if (!st.ok()) throw std::runtime_error("rendezvous store get '" + key + "': " + st.error().message);
  auto r = s_.recv(dl);
  if (!r.ok()) throw std::runtime_error("rendezvous store get '" + key + "': " + r.error().message);
  if (*r == "T")
    throw std::runtime_error("timed out after " + std::to_string(timeout.count()) +
                             " ms waiting for store key '" + key + "'");
  if (r->empty() || (*r)[0] != 'O') throw std::runtime_error("bad store reply");
  cache_[key] = r->substr(1);
  return cache_[key];
}

std::vector<char> StoreClient::get(const std::string& key) {
  std::string v = get_or_throw(key, timeout_);
  return {v.begin(), v.end()};
}

void StoreClient::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  for (const auto& k : keys) get_or_throw(k, timeout);
}

}  // namespace spk::rt::dist
