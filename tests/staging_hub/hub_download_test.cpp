// hub_download against a fake hub (cpp-httplib on 127.0.0.1) that speaks the resolve protocol: LFS files
// redirect to a CDN path with X-Linked-Etag/X-Linked-Size, small files answer with ETag. Faults on demand:
// a dropped connection mid-body, a wrong size, a wrong hash.
#include "orchestrator/staging/hub/hub_download.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "orchestrator/staging/hub/sha256.h"
#include "tests/staging_hub/fake_hub.h"

namespace fs = std::filesystem;
using namespace spk::staging;
using namespace spk::testing;

namespace {

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(HubDownload, StandardLayoutWithTokenAndRedirects) {
  TempDir t;
  FakeHub hub;
  hub.token = "hf_secret";
  auto s = hub_download(kRepo, "main", hub.opts(t.p));
  ASSERT_TRUE(s.ok()) << s.error().what();
  const fs::path repo = t.p / "models--acme--tiny";
  EXPECT_EQ(s->dir, (repo / "snapshots" / kCommit).string());
  EXPECT_EQ(slurp(repo / "refs/main"), kCommit);
  EXPECT_EQ(s->files.size(), 6u);  // README.md is not wanted
  for (const auto& [name, content] : hub.files) {
    if (name == "README.md") continue;
    fs::path link = repo / "snapshots" / kCommit / name;
    ASSERT_TRUE(fs::is_symlink(link)) << name;
    EXPECT_EQ(slurp(link), content) << name;
    EXPECT_TRUE(fs::read_symlink(link).string().starts_with("../../blobs/")) << name;
  }
  std::string sha = sha256_hex(hub.files["model-00001-of-00002.safetensors"]);
  EXPECT_TRUE(fs::exists(repo / "blobs" / sha));
  // Offline now: the cached snapshot is used, no request is made.
  auto o = hub.opts(t.p);
  o.offline = true;
  int before = hub.requests;
  auto again = hub_download(kRepo, "main", o);
  ASSERT_TRUE(again.ok()) << again.error().what();
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(hub.requests, before);
}

TEST(HubDownload, WithoutTokenTheErrorSaysSetHfToken) {
  TempDir t;
  FakeHub hub;
  hub.token = "hf_secret";
  auto o = hub.opts(t.p);
  o.token.clear();
  auto s = hub_download(kRepo, kCommit, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what().find("HF_TOKEN"), std::string::npos) << s.error().what();
}

TEST(HubDownload, DroppedConnectionResumesWithRange) {
  TempDir t;
  FakeHub hub;
  hub.drop_once = 2;
  auto s = hub_download(kRepo, kCommit, hub.opts(t.p));
  ASSERT_TRUE(s.ok()) << s.error().what();
  EXPECT_GE(hub.ranged, 1);
  EXPECT_EQ(slurp(fs::path(s->dir) / "model-00001-of-00002.safetensors"),
            hub.files["model-00001-of-00002.safetensors"]);
  EXPECT_EQ(slurp(fs::path(s->dir) / "model-00002-of-00002.safetensors"),
            hub.files["model-00002-of-00002.safetensors"]);
}

TEST(HubDownload, WrongHashIsRefused) {
  TempDir t;
  FakeHub hub;
  hub.wrong_hash = true;
  auto s = hub_download(kRepo, kCommit, hub.opts(t.p));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("sha256"), std::string::npos) << s.error().what();
  const fs::path repo = t.p / "models--acme--tiny";
  EXPECT_FALSE(fs::exists(repo / "blobs" / sha256_hex(hub.files["model-00001-of-00002.safetensors"])));
  EXPECT_FALSE(fs::exists(repo / "snapshots" / kCommit / "model-00001-of-00002.safetensors"));
}

TEST(HubDownload, WrongSizeIsRefused) {
  TempDir t;
  FakeHub hub;
  hub.wrong_size = true;
  auto s = hub_download(kRepo, kCommit, hub.opts(t.p));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("bytes"), std::string::npos) << s.error().what();
  EXPECT_FALSE(
      fs::exists(t.p / "models--acme--tiny/snapshots" / kCommit / "model-00001-of-00002.safetensors"));
}

TEST(HubDownload, PinnedRevisionMissingOfflineIsAnErrorNotADownload) {
  TempDir t;
  FakeHub hub;
  auto o = hub.opts(t.p);
  o.offline = true;
  auto s = hub_download(kRepo, kCommit, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("HF_HUB_OFFLINE"), std::string::npos) << s.error().what();
  EXPECT_EQ(hub.requests, 0);
  EXPECT_FALSE(fs::exists(t.p / "models--acme--tiny/snapshots"));
}
