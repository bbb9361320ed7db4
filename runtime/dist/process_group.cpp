// join_group: rendezvous (rank 0 hosts the token-checked store), the Gloo communicator over it, and
// the control channel (rank 0 <-> each worker) with heartbeats. Control frames: 'H' heartbeat,
// 'M' + payload (rank 0's messages), 'B' leave, 'G' rendezvous complete, 'E' + why (rank 0 gave up the
// rendezvous: the worker's join fails with rank 0's reason), 'J' a worker's communicator is up. 'B' from a
// worker is a loss for rank 0; 'B' from rank 0 closes the group for the workers (no loss: rank 0 ends the
// group on purpose).
#include "runtime/dist/process_group.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/dist/frame_socket.h"
#include "runtime/dist/gloo_communicator.h"
#include "runtime/dist/host_staged_communicator.h"
#include "runtime/dist/nccl_communicator.h"
#include "runtime/dist/tcp_store.h"

namespace spk::rt::dist {

namespace {

using std::chrono::milliseconds;

std::string secs(milliseconds d) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", d.count() / 1000.0);
  return b;
}

class SingleGroup final : public ProcessGroup {
 public:
  SingleGroup() : comm_(make_single_communicator()) {}
  int rank() const override { return 0; }
  int world() const override { return 1; }
  Communicator& comm() override { return *comm_; }
  Status broadcast(const std::string&) override { return {}; }
  Result<std::string> receive() override {
    return make_error("receive() on a group of one rank", "only ranks != 0 of a TP group receive");
  }
  void close() override {}
  bool closed_by_rank0() const override { return false; }

 private:
  std::unique_ptr<Communicator> comm_;
};

class Group final : public ProcessGroup {
 public:
  explicit Group(GroupOptions o) : o_(std::move(o)) {}
  ~Group() override { close(); }

  int rank() const override { return o_.rank; }
  int world() const override { return o_.world; }
  Communicator& comm() override { return *comm_; }

  Status host(const HostPort& hp);  // rank 0
  Status join(const HostPort& hp);  // ranks != 0
  void start();                     // readers + heartbeats

  Status broadcast(const std::string& msg) override {
    const std::string frame = "M" + msg;
    for (auto& p : peers_) {
      std::lock_guard lk(p->send_mu);
      Status st = p->sock.send(frame, Clock::now() + o_.peer_timeout);
      if (!st.ok()) {
        lost(p->rank, "sending the step plan failed: " + st.error().message);
        return make_error("rank " + std::to_string(p->rank) + " lost: " + st.error().message,
                          "every rank of the group must be restarted");
      }
    }
    return {};
  }

  Result<std::string> receive() override {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !inbox_.empty() || lost_ || closing_ || leader_closed_; });
    if (!inbox_.empty()) {
      std::string m = std::move(inbox_.front());
      inbox_.pop_front();
      return m;
    }
    if (lost_) return make_error(lost_why_, "every rank of the group must be restarted");
    return make_error(leader_closed_ ? "rank 0 closed the group" : "the group was closed",
                      "every rank of the group must be restarted");
  }

  bool closed_by_rank0() const override {
    std::lock_guard lk(mu_);
    return leader_closed_;
  }

  void close() override {
    {
      std::lock_guard lk(mu_);
      if (closing_) return;
      closing_ = true;
    }
    cv_.notify_all();
    for (auto& p : peers_) {
      std::lock_guard lk(p->send_mu);
      (void)p->sock.send("B", Clock::now() + milliseconds(500));
      p->sock.shutdown();
    }
    if (heartbeat_.joinable()) heartbeat_.join();
    for (auto& p : peers_)
      if (p->reader.joinable()) p->reader.join();
  }

 private:
  struct Peer {
    int rank = 0;
    FrameSocket sock;
    std::mutex send_mu;
    std::thread reader;
  };

  Status connect_comm(StoreClient& store, const std::string& local_host);
  void read_loop(Peer& p);
  void heartbeat_loop();
  void lost(int rank, const std::string& why);

  GroupOptions o_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<StoreServer> store_server_;
  std::vector<std::unique_ptr<Peer>> peers_;  // rank 0: every worker; worker: rank 0
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> inbox_;
  bool lost_ = false, closing_ = false, leader_closed_ = false;
  std::string lost_why_;
  std::thread heartbeat_;
};

Status Group::connect_comm(StoreClient& store, const std::string& local_host) {
  if (o_.comm == "gloo" || o_.comm == "gloo-host") {
    SPK_ASSIGN(comm_, make_gloo_communicator(store, o_.rank, o_.world, local_host, o_.collective_timeout));
    // A first collective right away: every pair of the full mesh has carried data before the group is
    // handed out (without it, rare early collectives failed with 'connection closed by peer').
    float one = 1.0f;
    SPK_TRY(comm_->all_reduce_sum(&one, 1, nullptr));
    if (one != static_cast<float>(o_.world))
      return make_error("rendezvous barrier summed to " + std::to_string(one) + ", expected world " +
                        std::to_string(o_.world));
    if (o_.comm == "gloo-host") {
      SPK_ASSIGN(comm_, make_host_staged_communicator(std::move(comm_)));
    }
  } else if (o_.comm == "nccl") {
    SPK_ASSIGN(comm_, make_nccl_communicator(store, o_.rank, o_.world, o_.cuda_device));
  } else {
    return make_error(
        "communicator '" + o_.comm + "' is unknown",
        "use gloo (cpu), nccl (cuda) or gloo-host (cuda ranks over Gloo via pinned host copies)");
  }
  return {};
}

Status Group::host(const HostPort& hp) {
  std::mutex pm;
  std::condition_variable pcv;
  std::map<int, FrameSocket> ctrl;
  store_server_ = std::make_unique<StoreServer>(o_.token, o_.world, [&](int r, FrameSocket s) {
    std::lock_guard lk(pm);
    if (r == 0 || ctrl.count(r)) {
      spdlog::warn("rendezvous: a second process claims rank {}; refused", r);
      return;  // closes s
    }
    ctrl.emplace(r, std::move(s));
    pcv.notify_all();
  });
  struct StopStore {  // the callback above refers to this frame: no connection outlives host()
    StoreServer* s;
    ~StopStore() { s->stop(); }
  } stop_store{store_server_.get()};
  int port = 0;
  SPK_TRY(store_server_->start(hp, &port));
  const auto deadline = Clock::now() + o_.join_timeout;
  {
    std::unique_lock lk(pm);
    pcv.wait_until(lk, deadline, [&] { return static_cast<int>(ctrl.size()) == o_.world - 1; });
    if (static_cast<int>(ctrl.size()) != o_.world - 1) {
      std::string missing;
      int n = 0;
      for (int r = 1; r < o_.world; ++r)
        if (!ctrl.count(r)) missing += (n++ ? ", " : "") + std::to_string(r);
      std::string why = "rendezvous at " + hp.host + ":" + std::to_string(port) + ": rank" +
                        (n > 1 ? "s " : " ") + missing + " of world " + std::to_string(o_.world) +
                        " did not join within " + secs(o_.join_timeout);
      if (int t = store_server_->token_refusals())
        why += " (" + std::to_string(t) + " connection(s) refused for a wrong rendezvous token)";
      for (auto& [r, s] : ctrl) (void)s.send("E" + why, Clock::now() + milliseconds(500));
      return make_error(why, "start every rank with --master " + hp.host + ":" + std::to_string(port) +
                                 " and the same SPARKCTL_RDZV_TOKEN, or raise the join timeout");
    }
    for (auto& [r, s] : ctrl) {
      auto p = std::make_unique<Peer>();
      p->rank = r;
      p->sock = std::move(s);
      peers_.push_back(std::move(p));
    }
  }
  for (auto& p : peers_) SPK_TRY(p->sock.send("G", Clock::now() + o_.peer_timeout));
  const std::string self = hp.host == "0.0.0.0" || hp.host.empty() ? "127.0.0.1" : hp.host;
  SPK_ASSIGN(FrameSocket ss, dial({self, port}, o_.token, "store", 0, deadline));
  StoreClient store(std::move(ss), o_.join_timeout);
  SPK_TRY(connect_comm(store, self));
  // Each worker says 'J' once its communicator is up (it is then done with the store, which closes
  // when host() returns).
  for (auto& p : peers_) {
    auto j = p->sock.recv(deadline + o_.peer_timeout);
    if (!j.ok() || *j != "J")
      return make_error("rank " + std::to_string(p->rank) + " did not finish joining the " + o_.comm +
                            " communicator: " + (j.ok() ? "unexpected frame" : j.error().message),
                        "check that rank's log");
  }
  return {};
}

Status Group::join(const HostPort& hp) {
  const auto deadline = Clock::now() + o_.join_timeout;
  SPK_ASSIGN(FrameSocket ctrl, dial(hp, o_.token, "ctrl", o_.rank, deadline));
  // Rank 0 says 'G' once every rank joined, or 'E' + why when it gave up.
  auto go = ctrl.recv(deadline + milliseconds(2000));
  if (!go.ok())
    return make_error("rank " + std::to_string(o_.rank) + ": rank 0 at " + hp.host + ":" +
                          std::to_string(hp.port) + " did not complete the rendezvous within " +
                          secs(o_.join_timeout) + " (" + go.error().message + ")",
                      "check rank 0's log; start every rank or raise the join timeout", true);
  if (!go->empty() && (*go)[0] == 'E')
    return make_error(
        "rank " + std::to_string(o_.rank) + ": rank 0 abandoned the rendezvous: " + go->substr(1),
        "start every rank with the same --master and SPARKCTL_RDZV_TOKEN");
  if (*go != "G") return make_error("rank 0 sent an unexpected rendezvous frame");
  const std::string local = ctrl.local_host();
  SPK_ASSIGN(FrameSocket ss, dial(hp, o_.token, "store", o_.rank, deadline));
  StoreClient store(std::move(ss), o_.join_timeout);
  SPK_TRY(connect_comm(store, local));
  SPK_TRY(ctrl.send("J", deadline + o_.peer_timeout));
  auto p = std::make_unique<Peer>();
  p->rank = 0;
  p->sock = std::move(ctrl);
  peers_.push_back(std::move(p));
  return {};
}

void Group::start() {
  for (auto& p : peers_) p->reader = std::thread([this, q = p.get()] { read_loop(*q); });
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

void Group::read_loop(Peer& p) {
  for (;;) {
    auto f = p.sock.recv(Clock::now() + o_.peer_timeout);
    {
      std::lock_guard lk(mu_);
      if (closing_) return;
    }
    if (!f.ok()) {
      const std::string& m = f.error().message;
      if (m == "timed out")
        lost(p.rank, "no heartbeat for " + secs(o_.peer_timeout) + " (hung, stopped or unreachable)");
      else if (m.rfind("eof", 0) == 0)
        lost(p.rank, "connection closed (the process exited or was killed)");
      else
        lost(p.rank, "connection lost (the process exited or was killed; " + m + ")");
      return;
    }
    if (f->empty() || (*f)[0] == 'H') continue;
    if ((*f)[0] == 'B') {
      if (o_.rank == 0) {  // a worker cannot leave a running group: the group is broken
        lost(p.rank, "left the group (shut down)");
      } else {  // rank 0 closed the group: receive() drains the inbox, then reports the close
        {
          std::lock_guard lk(mu_);
          leader_closed_ = true;
        }
        cv_.notify_all();
      }
      return;
    }
    if ((*f)[0] == 'M') {
      {
        std::lock_guard lk(mu_);
        inbox_.push_back(f->substr(1));
      }
      cv_.notify_all();
    }
  }
}

void Group::heartbeat_loop() {
  const auto every = std::max(milliseconds(20), o_.peer_timeout / 5);
  std::unique_lock lk(mu_);
  while (!closing_) {
    lk.unlock();
    for (auto& p : peers_) {
      std::unique_lock sl(p->send_mu, std::try_to_lock);  // a frame in flight proves liveness too
      if (!sl.owns_lock()) continue;
      if (Status st = p->sock.send("H", Clock::now() + o_.peer_timeout); !st.ok())
        lost(p->rank, "heartbeat could not be sent: " + st.error().message);
    }
    lk.lock();
    cv_.wait_for(lk, every, [&] { return closing_; });
  }
}

void Group::lost(int rank, const std::string& why) {
  std::function<void(int, const std::string&)> cb;
  std::string msg;
  {
    std::lock_guard lk(mu_);
    if (lost_ || closing_ || leader_closed_) return;
    lost_ = true;
    lost_why_ = "rank " + std::to_string(rank) + " lost: " + why;
    msg = lost_why_;
    cb = o_.on_lost;
  }
  cv_.notify_all();
  spdlog::error("tp group (rank {}): {}", o_.rank, msg);
  if (cb) cb(rank, why);
}

}  // namespace

Result<std::unique_ptr<ProcessGroup>> join_group(const GroupOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world)
    return make_error(
        "rank " + std::to_string(o.rank) + " is outside the tensor-parallel world " + std::to_string(o.world),
        "pass --rank in [0, --tensor-parallel-size)");
  if (o.world == 1) return std::unique_ptr<ProcessGroup>(new SingleGroup());
  if (o.token.empty())
    return make_error("the rendezvous token is empty",
                      "export the same SPARKCTL_RDZV_TOKEN on every rank (the orchestrator sets it)");
  SPK_ASSIGN(HostPort hp, parse_host_port(o.master));
  if (o.rank != 0 && hp.port == 0)
    return make_error("rank " + std::to_string(o.rank) + ": --master " + o.master + " has port 0",
                      "pass rank 0's rendezvous port");
  auto g = std::make_unique<Group>(o);
  SPK_TRY(o.rank == 0 ? g->host(hp) : g->join(hp));
  g->start();
  return std::unique_ptr<ProcessGroup>(std::move(g));
}

}  // namespace spk::rt::dist
