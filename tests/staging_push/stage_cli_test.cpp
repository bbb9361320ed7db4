// `sparkctl stage` end to end: the implicit local cluster (verify, synthesize on the head) and a two-node
// cluster of local nodes (push head -> worker through `node stage-recv`, verify, repair).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/run_binary.h"

namespace fs = std::filesystem;
using spk::test::run_sparkctl;

namespace {

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("spk_stagecli_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(p); }
  ~TempDir() { fs::remove_all(p); }
};

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

fs::path first_shard(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".safetensors") return e.path();
  return {};
}

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A two-node cluster of local nodes (head, worker w1 with `w1_extra` appended to its entry) in
// <dir>/two.yaml and lane-demo as a two-node lane in <dir>/lane-two.yaml; returns the arguments
// "--cluster <two.yaml> stage <lane-two.yaml>".
std::string two_node_stage_args(const fs::path& dir, const std::string& w1_extra) {
  std::ofstream(dir / "two.yaml") << "name: two\nnodes:\n"
                                  << "  - {name: head, role: head, local: true, cache_dir: "
                                  << (dir / "head").string() << "}\n"
                                  << "  - {name: w1, role: worker, local: true, cache_dir: "
                                  << (dir / "w1").string() << w1_extra << "}\n";
  std::string lane = slurp(std::string(SPARKCTL_SOURCE_DIR) + "/recipes/lane-demo.yaml");
  lane.replace(lane.find("name: lane-demo"), 15, "name: lane-two\nnodes: 2\ntensor_parallel: 2");
  std::ofstream(dir / "lane-two.yaml") << lane;
  return "--cluster " + (dir / "two.yaml").string() + " stage " + (dir / "lane-two.yaml").string();
}

}  // namespace

TEST(StageCli, LocalClusterVerifiesAndSynthesizes) {
  TempDir t;
  const std::string env = "SPARKCTL_STATE_DIR=" + t.p.string() + " ";
  auto r = run_sparkctl("stage lane-demo --verify", env);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("INCOMPLETE"), std::string::npos) << r.out;
  r = run_sparkctl("stage lane-demo", env);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("local: complete"), std::string::npos) << r.out;
  fs::path shard = first_shard(t.p / "cache");
  ASSERT_FALSE(shard.empty());
  fs::resize_file(shard, fs::file_size(shard) - 1);  // a partial shard is present but not complete
  r = run_sparkctl("stage lane-demo --verify", env);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(shard.filename().string() + ": size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("truncated"), std::string::npos) << r.out;
}

TEST(StageCli, TwoNodesPushVerifyRepair) {
  TempDir t;
  const std::string env = "SPARKCTL_STATE_DIR=" + t.p.string() + " ";
  // w1 reached by a name: stage-recv binds 0.0.0.0
  const std::string args =
      two_node_stage_args(t.p, ", ssh: {host: localhost}") + " --port " + std::to_string(free_port());
  auto r = run_sparkctl(args, env);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("w1: complete"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pushed"), std::string::npos) << r.out;
  fs::path hs = first_shard(t.p / "head"), ws = first_shard(t.p / "w1");
  ASSERT_FALSE(ws.empty());
  EXPECT_EQ(slurp(hs), slurp(ws));

  r = run_sparkctl(args + " --verify --hash", env);
  EXPECT_EQ(r.code, 0) << r.out;
  {
    std::fstream f(ws, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(ws) / 2));
    f.put('\x42');
  }
  r = run_sparkctl(args + " --verify --hash", env);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("content differs from the head's"), std::string::npos) << r.out;
  r = run_sparkctl(args, env);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 blocks sent"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(hs), slurp(ws));
}

// The worker's stage port is taken: stage-recv fails at once, and so does the stage (the head stops
// retrying its connect when stage-recv has exited) with the port and the knob named.
TEST(StageCli, TakenPortFailsFastNamingIt) {
  TempDir t;
  const std::string env = "SPARKCTL_STATE_DIR=" + t.p.string() + " ";
  const std::string args = two_node_stage_args(t.p, "");
  int blocker = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(blocker, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(blocker, 1), 0);
  socklen_t len = sizeof(a);
  ::getsockname(blocker, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_sparkctl(args + " --port " + port, env);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(blocker);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("w1: INCOMPLETE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1:" + port), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--port"), std::string::npos) << r.out;
  EXPECT_LT(s, 15.0) << "the head kept retrying a receiver that had exited:\n" << r.out;
}

// Issue 43 item 1: a worker that kept a file the head no longer has (an old single-file
// model.safetensors after the head's checkpoint moved to shards + index, or the other way round) is
// not complete: `--verify` names the file, `stage` removes it, and the trees are then equal.
TEST(StageCli, WorkerFilesTheHeadLacksAreReportedThenRemoved) {
  TempDir t;
  const std::string env = "SPARKCTL_STATE_DIR=" + t.p.string() + " ";
  const std::string args = two_node_stage_args(t.p, "") + " --port " + std::to_string(free_port());
  auto r = run_sparkctl(args, env);
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path hdir = first_shard(t.p / "head").parent_path(), wdir = first_shard(t.p / "w1").parent_path();
  ASSERT_FALSE(wdir.empty());
  // The stale weight file is whichever layout the head does not use, with real safetensors bytes.
  const bool head_single = fs::exists(hdir / "model.safetensors");
  const std::string stale = head_single ? "model.safetensors.index.json" : "model.safetensors";
  if (head_single)
    std::ofstream(wdir / stale) << R"({"weight_map":{"x":"model.safetensors"}})";
  else
    fs::copy_file(first_shard(wdir), wdir / stale);
  fs::create_directories(wdir / "old");
  std::ofstream(wdir / "old" / "notes.txt") << "left over";
  std::ofstream(wdir / "x.sparkctl-partial") << "a push's resumable leftover, kept";

  r = run_sparkctl(args + " --verify", env);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("w1: INCOMPLETE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(stale + ": only on this node"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("old/notes.txt: only on this node"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("x.sparkctl-partial"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(wdir / stale)) << "--verify changes nothing";
  auto j =
      nlohmann::json::parse(run_sparkctl("--json " + args + " --verify", env, false).out, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["nodes"][1]["verify"]["complete"], false) << j.dump();

  r = run_sparkctl(args, env);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("w1: complete"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("removed 2 file(s) the head does not have"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(wdir / stale));
  EXPECT_FALSE(fs::exists(wdir / "old" / "notes.txt"));
  EXPECT_TRUE(fs::exists(wdir / "x.sparkctl-partial"));
  fs::remove(wdir / "x.sparkctl-partial");
  fs::remove(wdir / "old");
  std::vector<std::string> hf, wf;
  for (const auto& e : fs::recursive_directory_iterator(hdir)) hf.push_back(fs::relative(e.path(), hdir));
  for (const auto& e : fs::recursive_directory_iterator(wdir)) wf.push_back(fs::relative(e.path(), wdir));
  std::sort(hf.begin(), hf.end());
  std::sort(wf.begin(), wf.end());
  EXPECT_EQ(hf, wf);
  r = run_sparkctl(args + " --verify --hash", env);
  EXPECT_EQ(r.code, 0) << r.out;
}
