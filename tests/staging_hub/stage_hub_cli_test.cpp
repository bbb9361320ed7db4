// `sparkctl stage` of a hub lane against the fake hub (HF_ENDPOINT): download on the head into the hub
// cache layout, model dir linked to the snapshot, verified; offline with nothing cached is an error.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/staging_hub/fake_hub.h"
#include "tests/support/run_binary.h"

using namespace spk::testing;
using spk::test::run_sparkctl;

TEST(StageHubCli, DownloadsVerifiesAndRefusesOfflineMiss) {
  TempDir t;
  FakeHub hub;
  std::ofstream(t.p / "lane-hub.yaml")
      << "name: lane-hub\nbackend: cpu\nmodel:\n  hub: acme/tiny\n  revision: " << kCommit
      << "\n  served_name: tiny\ndevice_memory_gib: 2\nmax_model_len: 2048\n";
  const std::string lane = (t.p / "lane-hub.yaml").string();
  const std::string env = "SPARKCTL_STATE_DIR=" + t.p.string() +
                          " HF_ENDPOINT=http://127.0.0.1:" + std::to_string(hub.port) + " ";
  auto r = run_sparkctl("stage " + lane + " --verify", env + "HF_HUB_OFFLINE=1 ");
  EXPECT_EQ(r.code, 1) << r.out;
  r = run_sparkctl("stage " + lane, env + "HF_HUB_OFFLINE=1 ");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("HF_HUB_OFFLINE=1: nothing is downloaded silently"), std::string::npos) << r.out;
  EXPECT_EQ(hub.requests, 0);
  r = run_sparkctl("stage " + lane, env);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("local: complete"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(t.p / "cache/hub/models--acme--tiny/snapshots" / kCommit / "config.json"));
  int before = hub.requests;
  r = run_sparkctl("stage " + lane + " --verify", env + "HF_HUB_OFFLINE=1 ");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(hub.requests, before);
  // A blob corrupted in place keeps its size: only --hash (SHA-256 against the blob's name) sees it.
  const std::string shard = hub.files["model-00001-of-00002.safetensors"];
  fs::path blob = t.p / "cache/hub/models--acme--tiny/blobs" / sha256_hex(shard);
  {
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(shard.size() - 3));
    f.put('\x01');
  }
  r = run_sparkctl("stage " + lane + " --verify", env);
  EXPECT_EQ(r.code, 0) << r.out;
  r = run_sparkctl("stage " + lane + " --verify --hash", env);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("but its hub blob is named"), std::string::npos) << r.out;
}
