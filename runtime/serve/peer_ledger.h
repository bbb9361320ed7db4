// Who holds the front's waiting connections, by peer IP, and which one makes room (issue 43 item 5).
//
// The front keeps at most max_connections connections waiting for a request. Closing the oldest waiting
// one to admit a new one let a reconnecting flood lock real clients out: 64 idle sockets that reconnect at
// once (cap 16) left real clients 3 answers in 124, because a real client's fresh socket is the oldest for
// the few milliseconds before its head arrives. So the choice is now:
//   1. per peer: a peer already holding `per_peer` connections makes room from its own (its oldest
//      waiting socket that has sent nothing, else its oldest waiting one); with none waiting, the new
//      connection is refused. One address cannot take more than its share of the cap.
//   2. at the cap: from the peer holding the most connections (on a tie, one with a socket that has sent
//      nothing), its oldest waiting socket that has sent nothing (never a byte: no head begun, no
//      request served), else its oldest waiting one. The peer comes first: a flood that trickles a byte
//      on each socket must not make a real client's fresh (still silent) socket the preferred victim.
// "Waiting" = the front is reading a head (a fresh socket, a keep-alive one between requests, a head in
// progress); a connection reading its body, writing an answer or in a handler is never chosen.
// Front thread only; a victim costs O(peers), admission O(log n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace spk::rt {

// The peer's address as text ("127.0.0.2", "2001:db8::1"; IPv4-mapped IPv6 as IPv4), "" if unknown.
std::string peer_address(int fd);

class PeerLedger {
 public:
  explicit PeerLedger(size_t per_peer) : per_peer_(per_peer == 0 ? 1 : per_peer) {}

  // A connection the front now holds; `sent` = it has sent bytes before (a keep-alive one coming back).
  void add(int fd, uint64_t serial, const std::string& peer, bool sent);
  void remove(int fd);
  // Its first byte arrived.
  void sent(int fd);
  // Reading a head (true) or not (body, answer): only waiting connections are ever chosen.
  void waiting(int fd, bool yes);

  [[nodiscard]] size_t held(const std::string& peer) const;
  [[nodiscard]] bool at_peer_limit(const std::string& peer) const { return held(peer) >= per_peer_; }
  // Rule 1: the connection of `peer` to close for a new one of the same peer; -1 when none is waiting.
  [[nodiscard]] int peer_victim(const std::string& peer) const;
  // Rule 2: the connection to close at the cap; -1 when none is waiting.
  [[nodiscard]] int victim() const;
  [[nodiscard]] size_t size() const { return conns_.size(); }
  [[nodiscard]] size_t per_peer() const { return per_peer_; }

 private:
  using Queue = std::set<std::pair<uint64_t, int>>;  // (serial, fd): oldest first
  struct Peer {
    size_t held = 0;
    Queue silent, spoken;  // waiting connections that have / have not sent a byte
  };
  struct Info {
    std::string peer;
    uint64_t serial = 0;
    bool sent = false, waiting = true;
  };
  void enqueue(const Info& i, int fd);
  size_t per_peer_;
  std::unordered_map<int, Info> conns_;
  std::unordered_map<std::string, Peer> peers_;
};

}  // namespace spk::rt
