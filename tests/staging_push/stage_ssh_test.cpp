// `sparkctl stage` to workers reached over SSH: a local head and two sshd nodes on 127.0.0.2/3 (the
// harness), so `node stage-recv` starts on each worker through SshExec and the head pushes to 127.0.0.x.
// Cold push -> byte-identical trees, --verify complete everywhere; a few changed blocks of one shard ->
// only those blocks move; a corrupted block on one worker -> --verify --hash names it and the next
// stage sends that block alone; an unchanged re-stage reads no file (size and mtime match); a corruption
// that kept size and mtime is repaired by `stage --hash` only. ~30 MiB of weights in 4 MiB blocks: a few
// seconds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "kernels/base/fs.h"
#include "orchestrator/staging/push/push.h"
#include "tests/deploy/deploy_test_support.h"
#include "tests/support/sshd_harness.h"

namespace spk {
namespace {

using namespace deploy_test;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::uint64_t kBlock = staging::kDefaultBlockBytes;
constexpr int kShards = 3;
constexpr std::uint64_t kShardData = 10ull << 20;  // + header: 3 blocks per shard, the last one short

std::string shard_name(int i) {
  char b[64];
  std::snprintf(b, sizeof b, "model-%05d-of-%05d.safetensors", i, kShards);
  return b;
}

// A valid safetensors file: one U8 tensor of kShardData random bytes.
void write_shard(const fs::path& p, std::uint64_t seed) {
  std::string header = R"({"w":{"dtype":"U8","shape":[)" + std::to_string(kShardData) +
                       R"(],"data_offsets":[0,)" + std::to_string(kShardData) + "]}}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string data(kShardData, '\0');
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i + 8 <= data.size(); i += 8) {
    std::uint64_t v = rng();
    std::memcpy(&data[i], &v, 8);
  }
  std::uint64_t n = header.size();
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << data;
}

// The checkpoint the head already holds: configs, tokenizer, an index and kShards shards.
void write_model(const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type":"qwen3"})";
  std::ofstream(dir / "tokenizer.json") << "{}";
  std::ofstream(dir / "tokenizer_config.json") << "{}";
  json wm = json::object();
  for (int i = 1; i <= kShards; ++i) wm["layer" + std::to_string(i)] = shard_name(i);
  std::ofstream(dir / "model.safetensors.index.json") << json{{"weight_map", wm}}.dump();
  for (int i = 1; i <= kShards; ++i) write_shard(dir / shard_name(i), 1000 + i);
}

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file of `a` is in `b` with the same bytes, and `b` holds nothing else.
::testing::AssertionResult same_tree(const fs::path& a, const fs::path& b) {
  std::vector<std::string> fa, fb;
  for (const auto& e : fs::recursive_directory_iterator(a))
    if (e.is_regular_file()) fa.push_back(fs::relative(e.path(), a).string());
  for (const auto& e : fs::recursive_directory_iterator(b)) fb.push_back(fs::relative(e.path(), b).string());
  std::sort(fa.begin(), fa.end());
  std::sort(fb.begin(), fb.end());
  if (fa != fb) return ::testing::AssertionFailure() << b << " lists other files than " << a;
  for (const auto& f : fa)
    if (slurp(a / f) != slurp(b / f)) return ::testing::AssertionFailure() << (b / f) << " differs";
  return ::testing::AssertionSuccess();
}

void overwrite(const fs::path& p, std::uint64_t off, const std::string& bytes) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(off));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const json* node_of(const json& rep, const std::string& name) {
  for (const auto& n : rep.at("nodes"))
    if (n.value("node", "") == name) return &n;
  return nullptr;
}

TEST(StageSsh, PushesToSshWorkersMovesOnlyChangedBlocksAndRepairsCorruption) {
  auto c = testing::SshdCluster::start({"127.0.0.2", "127.0.0.3"});
  if (!c.ok()) GTEST_SKIP() << "sshd cannot run here: " << c.error().what();
  auto& cl = **c;
  const std::string dir = cl.dir();
  std::string inv = "name: stage-ssh\ndefaults:\n  ssh: {identity: " + cl.client_key() +
                    ", known_hosts: " + dir + "/known_hosts}\nnodes:\n" +
                    "  - {name: head, role: head, local: true, cache_dir: " + dir + "/head}\n";
  for (size_t i = 0; i < cl.size(); ++i) {
    const auto& n = cl.node(i);
    ASSERT_TRUE(cl.install_binary(i, SPARKCTL_BINARY).ok());
    inv += "  - {name: w" + std::to_string(i + 2) + ", role: worker, ssh: {host: " + n.host +
           ", port: " + std::to_string(n.port) + "}, binary: " + n.root +
           "/bin/sparkctl, cache_dir: " + n.root + "/cache, state_dir: " + n.root + "/state}\n";
  }
  ASSERT_TRUE(write_file_atomic(dir + "/cluster.yaml", inv).ok());
  ASSERT_TRUE(
      write_file_atomic(dir + "/lane-ssh.yaml",
                        "name: lane-ssh\nbackend: cpu\n"
                        "model:\n  synthetic: {arch: qwen3, preset: tiny, tokenizer: qwen3, seed: 1}\n"
                        "  served_name: demo\ntensor_parallel: 3\nnodes: 3\ndevice_memory_gib: 2\n")
          .ok());
  // The head's copy is already complete (stage would synthesize it otherwise): this test is the push.
  const std::string sub = "/synth/qwen3-tiny-qwen3-seed1";
  const fs::path head = dir + "/head" + sub;
  const fs::path w2 = cl.node(0).root + "/cache" + sub, w3 = cl.node(1).root + "/cache" + sub;
  write_model(head);
  std::uint64_t total = 0, blocks = 0, nfiles = 0;
  for (const auto& e : fs::directory_iterator(head)) {
    ++nfiles;
    total += e.file_size();
    blocks += std::max<std::uint64_t>(1, (e.file_size() + kBlock - 1) / kBlock);
  }

  const std::string env = "SPARKCTL_STATE_DIR=" + dir + "/state ";
  const std::string args = "--cluster " + dir + "/cluster.yaml stage " + dir + "/lane-ssh.yaml --port " +
                           std::to_string(free_port());
  auto stage_json = [&](const std::string& extra, int want_code) {
    auto r = test::run_sparkctl("--json " + args + extra, env, /*merge_stderr=*/false);
    EXPECT_EQ(r.code, want_code) << r.out;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out;
    return j.is_object() ? j : json{{"nodes", json::array()}};
  };

  // Unknown host keys are refused unless accepted, and the error says how.
  auto refused = test::run_sparkctl(args, env);
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_NE(refused.out.find("--accept-new-host-key"), std::string::npos) << refused.out;

  // Cold: every byte to both workers.
  json rep = stage_json(" --accept-new-host-key", 0);
  for (const char* w : {"w2", "w3"}) {
    const json* n = node_of(rep, w);
    ASSERT_NE(n, nullptr) << rep.dump(2);
    EXPECT_TRUE(n->at("ok").get<bool>()) << n->dump(2);
    EXPECT_EQ(n->at("push").at("bytes_sent").get<std::uint64_t>(), total) << n->dump(2);
    EXPECT_EQ(n->at("push").at("blocks_sent").get<std::uint64_t>(), blocks) << n->dump(2);
  }
  EXPECT_TRUE(same_tree(head, w2));
  EXPECT_TRUE(same_tree(head, w3));
  auto v = test::run_sparkctl(args + " --verify", env);
  EXPECT_EQ(v.code, 0) << v.out;
  for (const char* w : {"head: complete", "w2: complete", "w3: complete"})
    EXPECT_NE(v.out.find(w), std::string::npos) << v.out;

  // Two of the three blocks of shard 2 change on the head: only those move, to each worker.
  const fs::path s2 = head / shard_name(2);
  const std::uint64_t s2_size = fs::file_size(s2);
  overwrite(s2, 100, "changed block 0");
  overwrite(s2, 2 * kBlock + 7, "changed block 2");
  rep = stage_json(" --accept-new-host-key", 0);
  for (const char* w : {"w2", "w3"}) {
    const json* n = node_of(rep, w);
    ASSERT_NE(n, nullptr) << rep.dump(2);
    EXPECT_EQ(n->at("push").at("bytes_sent").get<std::uint64_t>(), kBlock + (s2_size - 2 * kBlock))
        << n->dump(2);
    EXPECT_EQ(n->at("push").at("blocks_sent").get<std::uint64_t>(), 2u) << n->dump(2);
    EXPECT_EQ(n->at("push").at("blocks_skipped").get<std::uint64_t>(), blocks - 2) << n->dump(2);
  }
  EXPECT_TRUE(same_tree(head, w2));
  EXPECT_TRUE(same_tree(head, w3));

  // A flipped byte in block 1 of w3's shard 1 (same size, new mtime): --verify alone (sizes) cannot see
  // it, --verify --hash names the file on w3 only; the next stage (mtime differs: hashed) resends that
  // block to w3 alone.
  const fs::path w3s1 = w3 / shard_name(1);
  std::string old = slurp(w3s1).substr(kBlock + 4096, 1);
  overwrite(w3s1, kBlock + 4096, std::string(1, static_cast<char>(old[0] ^ 0x5a)));
  auto h = test::run_sparkctl(args + " --verify --hash", env);
  EXPECT_EQ(h.code, 1) << h.out;
  EXPECT_NE(h.out.find("w2: complete"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find("w3: INCOMPLETE"), std::string::npos) << h.out;
  EXPECT_NE(h.out.find(shard_name(1) + ": content differs from the head's"), std::string::npos) << h.out;
  rep = stage_json("", 0);  // host keys are known now
  const json* n2 = node_of(rep, "w2");
  const json* n3 = node_of(rep, "w3");
  ASSERT_TRUE(n2 && n3) << rep.dump(2);
  EXPECT_EQ(n2->at("push").at("bytes_sent").get<std::uint64_t>(), 0u) << n2->dump(2);
  EXPECT_EQ(n3->at("push").at("bytes_sent").get<std::uint64_t>(), kBlock) << n3->dump(2);
  EXPECT_EQ(n3->at("push").at("blocks_sent").get<std::uint64_t>(), 1u) << n3->dump(2);
  EXPECT_TRUE(same_tree(head, w3));
  h = test::run_sparkctl(args + " --verify --hash", env);
  EXPECT_EQ(h.code, 0) << h.out;

  // Nothing changed: every file skipped by size and mtime, read on neither end.
  rep = stage_json("", 0);
  for (const char* w : {"w2", "w3"}) {
    const json* n = node_of(rep, w);
    ASSERT_NE(n, nullptr) << rep.dump(2);
    const json& p = n->at("push");
    EXPECT_EQ(p.at("files_skipped_quick").get<std::uint64_t>(), nfiles) << n->dump(2);
    EXPECT_EQ(p.at("bytes_hashed").get<std::uint64_t>(), 0u) << n->dump(2);
    EXPECT_EQ(p.at("worker_bytes_hashed").get<std::uint64_t>(), 0u) << n->dump(2);
    EXPECT_EQ(p.at("bytes_sent").get<std::uint64_t>(), 0u) << n->dump(2);
  }

  // A flipped byte on w2 that keeps size and mtime: the quick check cannot see it; `stage --hash` hashes
  // every block and resends that one.
  const fs::path w2s3 = w2 / shard_name(3);
  struct stat st {};
  ASSERT_EQ(::stat(w2s3.c_str(), &st), 0);
  old = slurp(w2s3).substr(2 * kBlock + 5, 1);
  overwrite(w2s3, 2 * kBlock + 5, std::string(1, static_cast<char>(old[0] ^ 0x33)));
  const timespec keep[2] = {{0, UTIME_OMIT}, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, w2s3.c_str(), keep, 0), 0);
  rep = stage_json("", 0);
  n2 = node_of(rep, "w2");
  ASSERT_NE(n2, nullptr) << rep.dump(2);
  EXPECT_EQ(n2->at("push").at("bytes_sent").get<std::uint64_t>(), 0u) << n2->dump(2);
  EXPECT_FALSE(same_tree(head, w2));
  rep = stage_json(" --hash", 0);
  n2 = node_of(rep, "w2");
  n3 = node_of(rep, "w3");
  ASSERT_TRUE(n2 && n3) << rep.dump(2);
  EXPECT_EQ(n2->at("push").at("files_skipped_quick").get<std::uint64_t>(), 0u) << n2->dump(2);
  EXPECT_EQ(n2->at("push").at("bytes_hashed").get<std::uint64_t>(), total) << n2->dump(2);
  EXPECT_EQ(n2->at("push").at("blocks_sent").get<std::uint64_t>(), 1u) << n2->dump(2);
  EXPECT_EQ(n2->at("push").at("bytes_sent").get<std::uint64_t>(), fs::file_size(w2s3) - 2 * kBlock)
      << n2->dump(2);
  EXPECT_EQ(n3->at("push").at("bytes_sent").get<std::uint64_t>(), 0u) << n3->dump(2);
  EXPECT_TRUE(same_tree(head, w2));
  h = test::run_sparkctl(args + " --verify --hash", env);
  EXPECT_EQ(h.code, 0) << h.out;
}

}  // namespace
}  // namespace spk
