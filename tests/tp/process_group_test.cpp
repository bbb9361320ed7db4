// The TP process group over loopback, one rank per thread: Gloo collectives are correct, rank 0's
// messages arrive in order, a wrong token and a missing rank give the documented errors, and a rank
// that leaves is reported as lost (by rank) to the others.
#include "runtime/dist/process_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <mutex>

#include "tests/tp/tp_test_util.h"

namespace spk::rt::dist {
namespace {

using std::chrono::milliseconds;

GroupOptions opts(int rank, int world, int port, const std::string& token = "secret") {
  GroupOptions o;
  o.rank = rank;
  o.world = world;
  o.master = "127.0.0.1:" + std::to_string(port);
  o.token = token;
  o.join_timeout = milliseconds(10000);
  o.peer_timeout = milliseconds(2000);
  o.collective_timeout = milliseconds(10000);
  return o;
}

TEST(ProcessGroup, CollectivesAndBroadcast) {
  for (int world : {2, 4}) {
    const int port = test::free_loopback_port();
    std::mutex mu;
    std::vector<std::string> errors;
    // Gloo tears a context down racily while a peer still reads its last bytes: every rank keeps its
    // group until all are done.
    std::barrier done_all(world);
    test::run_ranks(world, [&](int r) {
      auto fail = [&](const std::string& e) {
        std::lock_guard lk(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + e);
      };
      auto g = join_group(opts(r, world, port));
      struct Arrive {
        std::barrier<>& b;
        ~Arrive() { b.arrive_and_wait(); }
      } arrive{done_all};  // before g is destroyed, on every path
      if (!g.ok()) return fail(g.error().what());
      Communicator& c = (*g)->comm();
      if (c.rank() != r || c.world() != world) return fail("wrong rank/world");
      std::vector<float> v = {1.0f + r, 10.0f * r, -2.0f};
      if (Status st = c.all_reduce_sum(v.data(), v.size(), nullptr); !st.ok()) return fail(st.error().what());
      const float n = static_cast<float>(world);
      if (v[0] != n * (n + 1) / 2 || v[1] != 10.0f * n * (n - 1) / 2 || v[2] != -2.0f * n)
        return fail("all_reduce_sum gave " + std::to_string(v[0]) + ", " + std::to_string(v[1]));
      std::vector<float> in = {float(r), float(r) + 0.5f}, out(2 * world, -1.0f);
      if (Status st = c.all_gather(in.data(), out.data(), 2, nullptr); !st.ok())
        return fail(st.error().what());
      for (int q = 0; q < world; ++q)
        if (out[2 * q] != float(q) || out[2 * q + 1] != float(q) + 0.5f)
          return fail("all_gather out of order");
      if (r == 0) {
        for (int i = 0; i < 3; ++i)
          if (Status st = (*g)->broadcast("step " + std::to_string(i)); !st.ok())
            return fail(st.error().what());
      } else {
        for (int i = 0; i < 3; ++i) {
          auto m = (*g)->receive();
          if (!m.ok()) return fail(m.error().what());
          if (*m != "step " + std::to_string(i)) return fail("message out of order: " + *m);
        }
      }
      float done = 1;  // everyone has received before anyone leaves
      if (Status st = c.all_reduce_sum(&done, 1, nullptr); !st.ok()) return fail(st.error().what());
      (*g)->close();
    });
    EXPECT_TRUE(errors.empty()) << "world " << world << ": " << errors.front();
  }
}

TEST(ProcessGroup, WrongTokenIsNamedOnBothSides) {
  const int port = test::free_loopback_port();
  std::string e0, e1;
  test::run_ranks(2, [&](int r) {
    auto o = opts(r, 2, port, r == 0 ? "right" : "wrong");
    o.join_timeout = milliseconds(1500);
    auto g = join_group(o);
    ASSERT_FALSE(g.ok()) << "rank " << r << " joined with a wrong token";
    (r == 0 ? e0 : e1) = g.error().what();
  });
  EXPECT_NE(e1.find("rendezvous token"), std::string::npos) << e1;
  EXPECT_NE(e1.find("SPARKCTL_RDZV_TOKEN"), std::string::npos) << e1;
  EXPECT_NE(e0.find("rank 1 of world 2 did not join"), std::string::npos) << e0;
  EXPECT_NE(e0.find("wrong rendezvous token"), std::string::npos) << e0;
}

TEST(ProcessGroup, MissingRankIsNamedOnEveryRank) {
  const int port = test::free_loopback_port();
  std::string e0, e1;
  test::run_ranks(2, [&](int r) {  // world 3, rank 2 never starts
    auto o = opts(r, 3, port);
    o.join_timeout = milliseconds(1000);
    auto g = join_group(o);
    ASSERT_FALSE(g.ok());
    (r == 0 ? e0 : e1) = g.error().what();
  });
  EXPECT_NE(e0.find("rank 2 of world 3 did not join within 1.0 s"), std::string::npos) << e0;
  EXPECT_NE(e1.find("rank 0 abandoned the rendezvous"), std::string::npos) << e1;
  EXPECT_NE(e1.find("rank 2 of world 3"), std::string::npos) << e1;
}

TEST(ProcessGroup, NoRankZeroTimesOutNamingIt) {
  auto o = opts(1, 2, test::free_loopback_port());
  o.join_timeout = milliseconds(500);
  auto g = join_group(o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().what().find("could not reach rank 0"), std::string::npos) << g.error().what();
}

TEST(ProcessGroup, LeavingRankIsReportedLost) {
  const int port = test::free_loopback_port();
  std::atomic<int> lost_rank{-1}, worker_lost{-1};
  std::string recv_error;
  test::run_ranks(3, [&](int r) {
    auto o = opts(r, 3, port);
    if (r == 0) o.on_lost = [&](int lr, const std::string&) { lost_rank = lr; };
    if (r == 1) o.on_lost = [&](int lr, const std::string&) { worker_lost = lr; };
    auto g = join_group(o);
    ASSERT_TRUE(g.ok()) << g.error().what();
    if (r == 2) {
      (*g)->close();  // rank 2 goes away
      return;
    }
    if (r == 0) {
      for (int i = 0; i < 200 && lost_rank < 0; ++i) std::this_thread::sleep_for(milliseconds(10));
      (*g)->close();
    } else {
      auto m = (*g)->receive();  // rank 0 closes after noticing: the group is over for rank 1
      ASSERT_FALSE(m.ok());
      recv_error = m.error().what();
      (*g)->close();
    }
  });
  EXPECT_EQ(lost_rank.load(), 2);
  EXPECT_EQ(worker_lost.load(), -1) << "rank 0 closing on purpose is no loss";
  EXPECT_NE(recv_error.find("rank 0 closed the group"), std::string::npos) << recv_error;
}

TEST(ProcessGroup, BadArguments) {
  auto o = opts(0, 2, 0, "");
  auto g = join_group(o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().what().find("SPARKCTL_RDZV_TOKEN"), std::string::npos);
  o = opts(3, 2, 1234);
  g = join_group(o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().what().find("rank 3"), std::string::npos);
}

}  // namespace
}  // namespace spk::rt::dist
