#include "runtime/serve/peer_ledger.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace spk::rt {

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a))
      ::inet_ntop(AF_INET, &a.s6_addr[12], buf, sizeof buf);
    else
      ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
  }
  return buf;
}

void PeerLedger::enqueue(const Info& i, int fd) {
  if (!i.waiting) return;
  auto& p = peers_[i.peer];
  (i.sent ? p.spoken : p.silent).insert({i.serial, fd});
}

void PeerLedger::add(int fd, uint64_t serial, const std::string& peer, bool sent) {
  remove(fd);
  Info i{peer, serial, sent, true};
  ++peers_[peer].held;
  enqueue(i, fd);
  conns_.emplace(fd, std::move(i));
}

void PeerLedger::remove(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  const Info& i = it->second;
  auto p = peers_.find(i.peer);
  p->second.silent.erase({i.serial, fd});
  p->second.spoken.erase({i.serial, fd});
  if (--p->second.held == 0) peers_.erase(p);
  conns_.erase(it);
}

void PeerLedger::sent(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end() || it->second.sent) return;
  Info& i = it->second;
  peers_[i.peer].silent.erase({i.serial, fd});
  i.sent = true;
  enqueue(i, fd);
}

void PeerLedger::waiting(int fd, bool yes) {
  auto it = conns_.find(fd);
  if (it == conns_.end() || it->second.waiting == yes) return;
  Info& i = it->second;
  auto& p = peers_[i.peer];
  p.silent.erase({i.serial, fd});
  p.spoken.erase({i.serial, fd});
  i.waiting = yes;
  enqueue(i, fd);
}

size_t PeerLedger::held(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it == peers_.end() ? 0 : it->second.held;
}

int PeerLedger::peer_victim(const std::string& peer) const {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return -1;
  if (!it->second.silent.empty()) return it->second.silent.begin()->second;
  if (!it->second.spoken.empty()) return it->second.spoken.begin()->second;
  return -1;
}

int PeerLedger::victim() const {
  // The peer holding the most with a waiting connection; on a tie the one with a silent socket, then the
  // one whose candidate is older.
  const std::string* best = nullptr;
  const Peer* bp = nullptr;
  auto candidate = [](const Peer& p) { return !p.silent.empty() ? *p.silent.begin() : *p.spoken.begin(); };
  for (const auto& [addr, p] : peers_) {
    if (p.silent.empty() && p.spoken.empty()) continue;
    bool better = !bp || p.held > bp->held;
    if (bp && p.held == bp->held) {
      const bool silent = !p.silent.empty(), bsilent = !bp->silent.empty();
      better = silent != bsilent ? silent : candidate(p).first < candidate(*bp).first;
    }
    if (better) {
      best = &addr;
      bp = &p;
    }
  }
  return best ? peer_victim(*best) : -1;
}

}  // namespace spk::rt
