// Issue 43 item 5: a reconnecting flood of idle sockets above the connection cap does not lock real
// clients out. The flood comes from 127.0.0.2 (64 sockets that send nothing and reconnect the moment the
// server closes one), the real clients from 127.0.0.1 (fresh connections and one keep-alive connection
// that pauses between requests). Before: the oldest waiting socket made room, and a real client's fresh
// socket is the oldest for the milliseconds before its head arrives; real clients got 3 answers in 124.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "runtime/serve/peer_ledger.h"
#include "tests/serve/live_server.h"
#include "tests/serve/wire_load.h"

namespace spk::rt {
namespace {

using spk::test::flood;

struct Counts {
  int fresh_ok = 0, fresh = 0, kept_ok = 0, kept = 0;
};

// Real clients from 127.0.0.1 beside the flood: fresh connections, and one keep-alive connection idle
// 20 ms between its requests. Both ask for /v1/models (answered on the front thread).
Counts real_clients(const testing::LiveServer& live, int rounds) {
  Counts c;
  httplib::Client kept("127.0.0.1", live.port());
  kept.set_keep_alive(true);
  kept.set_bearer_token_auth("k");
  kept.set_connection_timeout(2, 0);
  kept.set_read_timeout(2, 0);
  for (int i = 0; i < rounds; ++i) {
    httplib::Client fresh("127.0.0.1", live.port());
    fresh.set_bearer_token_auth("k");
    fresh.set_connection_timeout(2, 0);
    fresh.set_read_timeout(2, 0);
    auto r = fresh.Get("/v1/models");
    ++c.fresh;
    c.fresh_ok += r && r->status == 200;
    auto k = kept.Get("/v1/models");
    ++c.kept;
    c.kept_ok += k && k->status == 200;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return c;
}

std::string metrics_text(const testing::LiveServer& live) {
  auto r = live.client("k").Get("/metrics");
  return r ? r->body : "";
}

class ConnectionFlood : public ::testing::Test {
 protected:
  void start(size_t per_peer) {
    if (!spk::test::second_loopback_address()) GTEST_SKIP() << "no 127.0.0.2 on this host's loopback";
    HttpConfig hc;
    hc.api_key = "k";
    hc.served_model_name = "tiny";
    hc.max_connections = 16;
    hc.max_connections_per_peer = per_peer;
    live_.start(hc);
  }
  Counts run(int rounds, bool trickle = false) {
    std::atomic<bool> stop{false};
    std::thread f(flood, "127.0.0.2", live_.port(), 64, std::cref(stop), trickle);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the flood holds the cap
    const Counts c = real_clients(live_, rounds);
    stop = true;
    f.join();
    return c;
  }
  testing::LiveServer live_;
};

TEST_F(ConnectionFlood, AtTheCapTheFloodingPeerMakesRoom) {
  start(1024);  // the per-peer limit above the cap: only the choice at the cap protects the clients
  const Counts c = run(40);
  EXPECT_GE(c.fresh_ok, c.fresh - 1) << c.fresh_ok << " of " << c.fresh << " fresh connections answered";
  EXPECT_EQ(c.kept_ok, c.kept) << c.kept_ok << " of " << c.kept << " keep-alive requests answered";
  const std::string m = metrics_text(live_);
  EXPECT_NE(m.find("# TYPE sparkctl_connections_evicted_total counter"), std::string::npos) << m;
  EXPECT_EQ(m.find("sparkctl_connections_evicted_total{reason=\"connection_cap\"} 0\n"), std::string::npos)
      << "evictions at the cap are counted";
  EXPECT_GT(live_.server->front_stats().evicted_cap, 60u);
}

TEST_F(ConnectionFlood, ATricklingFloodDoesNotMakeFreshClientSocketsTheVictims) {
  start(1024);
  const Counts c = run(40, /*trickle=*/true);
  EXPECT_GE(c.fresh_ok, c.fresh - 1) << c.fresh_ok << " of " << c.fresh << " fresh connections answered";
  EXPECT_EQ(c.kept_ok, c.kept) << c.kept_ok << " of " << c.kept << " keep-alive requests answered";
  EXPECT_GT(live_.server->front_stats().evicted_cap, 60u);
}

TEST_F(ConnectionFlood, APeerAtItsLimitRecyclesItsOwnSockets) {
  start(4);
  const Counts c = run(40);
  EXPECT_GE(c.fresh_ok, c.fresh - 1) << c.fresh_ok << " of " << c.fresh << " fresh connections answered";
  EXPECT_EQ(c.kept_ok, c.kept) << c.kept_ok << " of " << c.kept << " keep-alive requests answered";
  const FrontStats st = live_.server->front_stats();
  EXPECT_GT(st.evicted_peer, 60u);
  EXPECT_EQ(st.evicted_cap, 0u) << "4 from the flood + the clients stay under the cap of 16";
  const std::string m = metrics_text(live_);
  EXPECT_NE(m.find("sparkctl_connections_evicted_total{reason=\"peer_limit\"} "), std::string::npos) << m;
  EXPECT_EQ(m.find("sparkctl_connections_evicted_total{reason=\"peer_limit\"} 0\n"), std::string::npos) << m;
}

TEST(PeerLedger, ThePeerHoldingTheMostMakesRoomWithItsSilentSocketsFirst) {
  PeerLedger l(100);
  l.add(1, 1, "a", false);  // oldest, but its peer holds one
  l.add(2, 2, "b", true);
  l.add(3, 3, "b", false);
  l.add(4, 4, "b", false);
  EXPECT_EQ(l.victim(), 3) << "b holds the most; its oldest silent socket";
  l.sent(3);
  l.sent(4);
  EXPECT_EQ(l.victim(), 2)
      << "b still holds the most (a trickling flood): its oldest, though a has a silent one";
  l.waiting(2, false);
  l.waiting(3, false);
  l.waiting(4, false);
  EXPECT_EQ(l.victim(), 1) << "a socket reading its body or answered is never chosen";
  l.waiting(1, false);
  EXPECT_EQ(l.victim(), -1);
  EXPECT_EQ(l.held("b"), 3u);
  l.remove(2);
  EXPECT_EQ(l.held("b"), 2u);
}

TEST(PeerLedger, OnATieASilentSocketThenTheOldest) {
  PeerLedger l(100);
  l.add(1, 1, "a", true);
  l.add(2, 2, "b", false);
  l.add(3, 3, "c", false);
  EXPECT_EQ(l.victim(), 2) << "one each: a silent socket before one that has sent, the older of those";
  l.remove(2);
  EXPECT_EQ(l.victim(), 3);
  l.remove(3);
  EXPECT_EQ(l.victim(), 1);
}

TEST(PeerLedger, PerPeerLimit) {
  PeerLedger l(2);
  l.add(1, 1, "a", true);
  EXPECT_FALSE(l.at_peer_limit("a"));
  l.add(2, 2, "a", false);
  EXPECT_TRUE(l.at_peer_limit("a"));
  EXPECT_FALSE(l.at_peer_limit("b"));
  EXPECT_EQ(l.peer_victim("a"), 2) << "its silent socket first, though the other is older";
  l.waiting(2, false);
  EXPECT_EQ(l.peer_victim("a"), 1);
  l.waiting(1, false);
  EXPECT_EQ(l.peer_victim("a"), -1) << "nothing of its own waits: the new one is refused";
  EXPECT_EQ(l.peer_victim("b"), -1);
}

}  // namespace
}  // namespace spk::rt
