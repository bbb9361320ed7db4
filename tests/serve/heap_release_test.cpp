// Issue 43 item 6: the server's resident memory comes back after a burst of large valid requests. Each
// 1 MiB /v1/messages body parses into ~20x its size of small JSON nodes on a handler thread; glibc keeps
// what those threads freed in per-thread arenas (up to 8 per core) and RSS ratchets up by the burst's
// peak. The server bounds the arenas and trims the heap once the last large request of a burst is done.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/serve/live_server.h"
#include "tests/serve/wire_load.h"

namespace spk::rt {
namespace {

size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(HeapRelease, RssComesBackAfterABurstOfLargeRequests) {
  testing::LiveServer live;
  HttpConfig hc;
  hc.api_key = "k";
  hc.served_model_name = "tiny";
  live.start(hc);
  const std::string body = spk::test::large_messages_body("tiny", 1u << 20);
  auto post = [&] {
    auto c = live.client();
    auto r = c.Post("/v1/messages", {{"x-api-key", "k"}}, body, "application/json");
    return r ? r->status : -1;
  };
  ASSERT_EQ(post(), 200);  // warm: the first large request's buffers are the baseline
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const size_t before = rss_bytes();
  std::atomic<int> ok{0};
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> clients;
    for (int i = 0; i < 16; ++i) clients.emplace_back([&] { ok += post() == 200; });
    for (auto& t : clients) t.join();
  }
  EXPECT_EQ(ok.load(), 48);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const size_t after = rss_bytes();
  const double grown_mb = (static_cast<double>(after) - static_cast<double>(before)) / (1 << 20);
  std::printf("RSS %.1f MiB -> %.1f MiB after 48 x 1 MiB /v1/messages (16 at a time)\n",
              static_cast<double>(before) / (1 << 20), static_cast<double>(after) / (1 << 20));
  EXPECT_LT(grown_mb, 48.0) << "the heap kept " << grown_mb << " MiB of a finished burst";
}

}  // namespace
}  // namespace spk::rt
