// stage-recv's lifetime, in process: it stops at once when its head goes away (head_fd hang-up), frees
// its port for the next receiver, keeps one receiver per root (flock), and a malformed or hostile
// message is an error, never an exception.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "orchestrator/staging/push/push.h"
#include "orchestrator/staging/push/wire.h"

namespace fs = std::filesystem;
using namespace spk::staging;
using nlohmann::json;
using spk::Result;

namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef";

struct TempDir {
  fs::path p;
  TempDir() {
    static int n = 0;
    p = fs::temp_directory_path() /
        ("spk_recvlife_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(p);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A receiver on its own thread; `port` is known once started.
struct Receiver {
  std::promise<int> port_p;
  std::future<Result<ReceiveReport>> done;
  int port = 0;
  Receiver(ReceiveOptions o) {
    o.on_listening = [this](int p) { port_p.set_value(p); };
    done = std::async(std::launch::async, [o] { return serve_receive(o); });
    auto f = port_p.get_future();
    if (f.wait_for(std::chrono::seconds(15)) == std::future_status::ready) port = f.get();
  }
};

ReceiveOptions opts(const fs::path& root, int port = 0, int head_fd = -1) {
  ReceiveOptions o;
  o.root = root.string();
  o.bind = "127.0.0.1";
  o.port = port;
  o.token = kToken;
  o.idle_timeout_s = 30;
  o.head_fd = head_fd;
  return o;
}

TEST(RecvLifetime, HeadGoneStopsTheReceiverAndFreesThePort) {
  TempDir t;
  int head[2];
  ASSERT_EQ(::pipe(head), 0);
  Receiver a(opts(t.p / "model", 0, head[1]));
  ASSERT_NE(a.port, 0);
  const auto t0 = std::chrono::steady_clock::now();
  ::close(head[0]);  // the head dies: the read end of stage-recv's stdout closes
  ASSERT_EQ(a.done.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "still listening";
  auto r = a.done.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("the head went away"), std::string::npos) << r.error().what();
  EXPECT_LT(since(t0), 2.0);
  ::close(head[1]);
  // The same port and root at once: no "Address already in use", no lock wait.
  int head2[2];
  ASSERT_EQ(::pipe(head2), 0);
  const auto t1 = std::chrono::steady_clock::now();
  Receiver b(opts(t.p / "model", a.port, head2[1]));
  EXPECT_EQ(b.port, a.port);
  EXPECT_LT(since(t1), 2.0);
  ::close(head2[0]);
  auto rb = b.done.get();
  EXPECT_FALSE(rb.ok());
  ::close(head2[1]);
}

TEST(RecvLifetime, HeadGoneMidPushThenRerunGivesIdenticalTree) {
  TempDir src, dst;
  std::mt19937_64 g(7);
  for (int f = 0; f < 3; ++f) {
    std::string s(6 << 20, '\0');
    for (std::size_t i = 0; i + 8 <= s.size(); i += 8) {
      const std::uint64_t v = g();
      std::memcpy(&s[i], &v, 8);
    }
    std::ofstream(src.p / ("shard-" + std::to_string(f) + ".bin"), std::ios::binary) << s;
  }
  int head[2];
  ASSERT_EQ(::pipe(head), 0);
  Receiver a(opts(dst.p, 0, head[1]));
  ASSERT_NE(a.port, 0);
  PushOptions po;
  po.source_dir = src.p.string();
  po.host = "127.0.0.1";
  po.port = a.port;
  po.token = kToken;
  po.streams = 2;
  po.block_bytes = 64 << 10;
  po.io_timeout_s = 10;
  std::atomic<std::uint64_t> sent{0};
  po.after_block = [&](std::uint64_t n) {
    sent = n;
    if (n > (4 << 20)) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let the kill land
  };
  auto pushing = std::async(std::launch::async, [po] { return push_tree(po); });
  while (sent < (5 << 20) && pushing.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
  }
  ::close(head[0]);  // the head goes away mid-push
  ASSERT_EQ(a.done.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_FALSE(a.done.get().ok());
  (void)pushing.get();
  ::close(head[1]);
  // The re-run, at once, on the same port: resumes from the partial files.
  Receiver b(opts(dst.p, a.port));
  ASSERT_EQ(b.port, a.port);
  po.after_block = {};
  auto rep = push_tree(po);
  ASSERT_TRUE(rep.ok()) << rep.error().what();
  auto rb = b.done.get();
  ASSERT_TRUE(rb.ok()) << rb.error().what();
  for (int f = 0; f < 3; ++f) {
    const std::string n = "shard-" + std::to_string(f) + ".bin";
    std::ifstream x(src.p / n, std::ios::binary), y(dst.p / n, std::ios::binary);
    const std::string sx{std::istreambuf_iterator<char>(x), {}}, sy{std::istreambuf_iterator<char>(y), {}};
    EXPECT_TRUE(sx == sy) << n;
  }
  for (const auto& e : fs::recursive_directory_iterator(dst.p))
    EXPECT_FALSE(e.path().string().ends_with(".sparkctl-partial")) << e.path();
}

TEST(RecvLifetime, OneReceiverPerRoot) {
  TempDir t;
  int head[2];
  ASSERT_EQ(::pipe(head), 0);
  Receiver a(opts(t.p / "m", 0, head[1]));
  ASSERT_NE(a.port, 0);
  auto o = opts(t.p / "m");
  o.takeover_wait_s = 1;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = serve_receive(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("another stage-recv (pid " + std::to_string(::getpid()) + ")"),
            std::string::npos)
      << r.error().what();
  EXPECT_LT(since(t0), 3.0);
  ::close(head[0]);
  EXPECT_FALSE(a.done.get().ok());
  ::close(head[1]);
}

// Anyone can connect: a hello whose token is not a string, then a manifest of the wrong shape, are
// errors (the session refuses them), not exceptions that kill stage-recv.
TEST(RecvLifetime, HostileHelloAndMalformedManifestAreErrors) {
  TempDir t;
  Receiver a(opts(t.p / "m"));
  ASSERT_NE(a.port, 0);
  {
    auto c = wire::connect_tcp("127.0.0.1", a.port, std::chrono::seconds(5));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->send_json({{"type", "hello"}, {"token", 42}, {"role", {1, 2}}}).ok());
    auto ans = c->recv_json("welcome");
    EXPECT_FALSE(ans.ok());
  }
  auto c = wire::connect_tcp("127.0.0.1", a.port, std::chrono::seconds(5));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->send_json({{"type", "hello"}, {"token", kToken}, {"role", "control"}}).ok());
  ASSERT_TRUE(c->recv_json("welcome").ok());
  ASSERT_TRUE(c->send_json({{"type", "manifest"}, {"block_bytes", 65536}, {"files", {{{"path", 7}}}}}).ok());
  auto ans = c->recv_json("have");
  ASSERT_FALSE(ans.ok());
  EXPECT_NE(ans.error().message.find("malformed manifest"), std::string::npos) << ans.error().what();
  auto r = a.done.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("malformed manifest"), std::string::npos) << r.error().what();
}

}  // namespace
