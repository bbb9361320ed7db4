// The SSH transport against three real sshd instances on 127.0.0.2/3/4 (tests/support/sshd_harness.h),
// plus the local node through LocalExec. Skips, with the reason, where sshd cannot run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>

#include "kernels/base/fs.h"
#include "orchestrator/node/preflight_report.h"
#include "orchestrator/node/runtime_procs.h"
#include "orchestrator/transport/binary_push.h"
#include "orchestrator/transport/file_hash.h"
#include "orchestrator/transport/local_exec.h"
#include "orchestrator/transport/ssh_exec.h"
#include "tests/support/sshd_harness.h"

namespace spk {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

class SshTransport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto c = testing::SshdCluster::start({"127.0.0.2", "127.0.0.3", "127.0.0.4"});
    if (!c.ok()) {
      skip_reason_ = new std::string(c.error().what());
      return;
    }
    cluster_ = c->release();
    for (size_t i = 0; i < cluster_->size(); ++i)
      ASSERT_TRUE(cluster_->install_binary(i, SPARKCTL_BINARY).ok());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_) GTEST_SKIP() << "sshd cannot run here: " << *skip_reason_;
  }
  // A known_hosts file of this test alone.
  std::string fresh_known_hosts() {
    return cluster_->dir() + "/known_hosts_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  static testing::SshdCluster* cluster_;
  static std::string* skip_reason_;
};
testing::SshdCluster* SshTransport::cluster_ = nullptr;
std::string* SshTransport::skip_reason_ = nullptr;

// Random NUL-free strings full of what a shell would interpret, plus multi-byte UTF-8.
std::string nasty_string(std::mt19937& rng) {
  static const std::vector<std::string> atoms{
      ";", "$(", ")", "`", "'",  "\"", "\n",   " ",    "\t", "\\", "|",      "&",    "$HOME", "*",
      ">", "<",  "#", "!", "{}", "é",  "日本", "🙂", "\r", "%s", "--help", "\x01", "\x7f"};
  std::uniform_int_distribution<int> len(0, 40), pick(0, static_cast<int>(atoms.size()) - 1), ch(0x20, 0x7e),
      coin(0, 2);
  std::string s;
  for (int i = len(rng); i > 0; --i)
    s += coin(rng) ? atoms[pick(rng)] : std::string(1, static_cast<char>(ch(rng)));
  return s;
}

TEST_F(SshTransport, EchoIsByteExactForShellMetacharacters) {
  SshExec exec(cluster_->target(1, fresh_known_hosts(), /*accept_new=*/true));  // 127.0.0.3
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int call = 0; call < 8; ++call) {
    std::vector<std::string> args;
    for (int i = 0; i < 40; ++i) args.push_back(nasty_string(rng));
    json in{{"args", args}, {"argv0", "; rm -rf / #"}};
    auto a = call_node(exec, NodeVerb::kEcho, in, 20s);
    ASSERT_TRUE(a.ok()) << a.error().what() << " (seed " << seed << ")";
    ASSERT_EQ(a->exit_code, 0) << a->err;
    ASSERT_EQ(a->body["args"].get<std::vector<std::string>>(), args) << "seed " << seed;
  }
}

TEST_F(SshTransport, RemoteBinaryPathWithShellCharactersIsRefused) {
  auto t = cluster_->target(1, fresh_known_hosts(), true);
  t.remote_binary = cluster_->node(1).root + "/bin/sparkctl; touch /tmp/pwned";
  SshExec exec(t);
  auto r = exec.run(NodeVerb::kVersion, "", 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("[A-Za-z0-9._+/-]"), std::string::npos) << r.error().what();
}

TEST_F(SshTransport, SlowVerbTimesOutRetryablyAndTheNextCallReconnects) {
  auto t = cluster_->target(1, fresh_known_hosts(), true);
  t.remote_binary = cluster_->node(1).root + "/bin/slow-sparkctl";
  ASSERT_TRUE(write_file_atomic(t.remote_binary, "#!/bin/sh\nsleep 3\n", 0755).ok());
  SshExec exec(t);
  ASSERT_TRUE(exec.connect(5).ok());
  auto t0 = std::chrono::steady_clock::now();
  auto r = exec.run(NodeVerb::kFacts, "{}", 700ms);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().retryable);
  EXPECT_NE(r.error().message.find("700 ms"), std::string::npos) << r.error().what();
  EXPECT_LT(took, 3s);
  ASSERT_TRUE(write_file_atomic(t.remote_binary, "#!/bin/sh\necho '{\"ok\":true}'\n", 0755).ok());
  auto a = call_node(exec, NodeVerb::kFacts, json::object(), 10s);
  ASSERT_TRUE(a.ok()) << a.error().what();
  EXPECT_EQ(a->body["ok"], true);
}

TEST_F(SshTransport, HostKeyUnknownRefusedThenAcceptedThenChangedIsHardError) {
  const std::string kh = fresh_known_hosts();
  auto fp = cluster_->host_fingerprint(2);
  ASSERT_TRUE(fp.ok()) << fp.error().what();
  {
    SshExec exec(cluster_->target(2, kh, /*accept_new=*/false));
    auto r = exec.run(NodeVerb::kVersion, "", 10s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("unknown host key"), std::string::npos) << r.error().what();
    EXPECT_NE(r.error().message.find(*fp), std::string::npos) << r.error().what() << " want " << *fp;
    EXPECT_NE(r.error().fix.find("--accept-new-host-key"), std::string::npos) << r.error().what();
    EXPECT_FALSE(fs::exists(kh));
  }
  {
    SshExec exec(cluster_->target(2, kh, /*accept_new=*/true));
    auto a = call_node(exec, NodeVerb::kVersion, json::object(), 10s);
    ASSERT_TRUE(a.ok()) << a.error().what();
    auto text = read_file(kh);
    ASSERT_TRUE(text.ok());
    EXPECT_NE(text->find("[127.0.0.4]:" + std::to_string(cluster_->node(2).port)), std::string::npos)
        << *text;
  }
  {
    SshExec exec(cluster_->target(2, kh, /*accept_new=*/false));  // now known: no flag needed
    auto a = call_node(exec, NodeVerb::kVersion, json::object(), 10s);
    ASSERT_TRUE(a.ok()) << a.error().what();
  }
  ASSERT_TRUE(cluster_->rotate_host_key(2).ok());
  auto fp2 = cluster_->host_fingerprint(2);
  ASSERT_TRUE(fp2.ok());
  for (bool accept : {false, true}) {  // accept_new never overrides a changed key
    SshExec exec(cluster_->target(2, kh, accept));
    auto r = exec.run(NodeVerb::kVersion, "", 10s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("HOST KEY CHANGED"), std::string::npos) << r.error().what();
    EXPECT_NE(r.error().message.find(*fp2), std::string::npos) << r.error().what();
    EXPECT_FALSE(r.error().retryable);
  }
}

TEST_F(SshTransport, BinaryPushHappensOnceThenIsSkipped) {
  auto t = cluster_->target(0, fresh_known_hosts(), true);
  t.remote_binary = cluster_->node(0).root + "/pushed/bin/sparkctl";  // not there yet: exits 127
  SshExec exec(t);
  auto t0 = std::chrono::steady_clock::now();
  auto first = ensure_node_binary(exec, SPARKCTL_BINARY);
  const double push_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(first.ok()) << first.error().what();
  std::cout << "push: " << first->bytes << " bytes in " << push_s << " s (hash, sftp, rename, re-hash)\n";
  EXPECT_TRUE(first->pushed);
  EXPECT_TRUE(first->hash_before.empty());
  EXPECT_GT(first->bytes, 0u);
  auto local = file_xxh3_hex(SPARKCTL_BINARY);
  auto remote = file_xxh3_hex(t.remote_binary);  // same host: check the bytes really landed
  ASSERT_TRUE(local.ok() && remote.ok());
  EXPECT_EQ(*local, *remote);
  EXPECT_EQ(first->hash, *local);
  EXPECT_EQ(fs::status(t.remote_binary).permissions() & fs::perms::owner_exec, fs::perms::owner_exec);

  t0 = std::chrono::steady_clock::now();
  auto second = ensure_node_binary(exec, SPARKCTL_BINARY);
  std::cout << "skip: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s (hash compare only)\n";
  ASSERT_TRUE(second.ok()) << second.error().what();
  EXPECT_FALSE(second->pushed);
  EXPECT_EQ(second->hash_before, *local);

  // A different copy on the node (stale version) is replaced.
  ASSERT_TRUE(write_file_atomic(t.remote_binary, "#!/bin/sh\necho '{\"binary_xxh3\":\"old\"}'\n", 0755).ok());
  auto third = ensure_node_binary(exec, SPARKCTL_BINARY);
  ASSERT_TRUE(third.ok()) << third.error().what();
  EXPECT_TRUE(third->pushed);
  EXPECT_EQ(third->hash_before, "old");
}

TEST_F(SshTransport, PreflightOfThreeNodesIsOneTable) {
  const std::string kh = fresh_known_hosts();
  const std::string local_root = cluster_->dir() + "/local-root";
  fs::create_directories(local_root);
  LocalExec local({"local", SPARKCTL_BINARY, local_root, {}});
  SshExec b(cluster_->target(0, kh, true));
  SshExec c(cluster_->target(1, kh, true));
  const std::string shm = cluster_->dir() + "/shm-empty";
  fs::create_directories(shm);
  auto rep = run_preflight_all({&local, &b, &c}, json{{"shm_dir", shm}, {"need_disk_bytes", 1 << 20}}, 30s);
  const std::string table = rep.table();
  EXPECT_TRUE(rep.ok) << table;
  for (const std::string& node : std::vector<std::string>{"local", b.node(), c.node()})
    for (const char* check :
         {"binary", "disk", "memory", "stale_processes", "shm", "ports", "page_cache", "weights", "fabric"}) {
      bool found = false;
      for (const auto& r : rep.rows) found = found || (r.node == node && r.check == check);
      EXPECT_TRUE(found) << node << "/" << check << "\n" << table;
    }
  EXPECT_NE(table.find("NODE"), std::string::npos);
  EXPECT_NE(table.find("preflight: ok"), std::string::npos) << table;
  std::cout << table;
}

TEST_F(SshTransport, StaleRuntimeAndLeakedShmOnARemoteNodeAreCleaned) {
  const auto& n = cluster_->node(2);
  SshExec exec(cluster_->target(2, fresh_known_hosts(), true));
  const std::string shm = n.dir + "/shm";
  fs::create_directories(shm);
  auto pid = testing::spawn_fake_runtime(SPK_FAKE_RUNTIME, n.root, shm);
  ASSERT_TRUE(pid.ok()) << pid.error().what();
  const std::string orphan = shm + "/nccl-leaked-test";
  ASSERT_TRUE(write_file_atomic(orphan, std::string(8192, 'n')).ok());

  auto pf = call_node(exec, NodeVerb::kPreflight, json{{"shm_dir", shm}}, 20s);
  ASSERT_TRUE(pf.ok()) << pf.error().what();
  EXPECT_EQ(pf->exit_code, 1);
  PreflightReport rep;
  append_preflight_rows(rep, exec.node(), pf);
  const std::string table = rep.table();
  EXPECT_NE(table.find(std::to_string(*pid)), std::string::npos) << table;
  EXPECT_NE(table.find(orphan), std::string::npos) << table;

  auto cl = call_node(exec, NodeVerb::kClean, json{{"shm_dir", shm}, {"grace_ms", 2000}}, 20s);
  ASSERT_TRUE(cl.ok()) << cl.error().what();
  EXPECT_EQ(cl->exit_code, 0) << cl->body.dump(2);
  EXPECT_EQ(cl->body["killed"], json::array({*pid})) << cl->body.dump(2);
  EXPECT_EQ(cl->body["removed_shm"].size(), 2u) << cl->body.dump(2);
  int st = 0;
  EXPECT_EQ(::waitpid(*pid, &st, 0), *pid);
  EXPECT_TRUE(WIFSIGNALED(st));
  EXPECT_TRUE(fs::is_empty(shm));
}

TEST_F(SshTransport, TeardownLeavesNoSshdBehind) {
  std::vector<pid_t> pids;
  {
    auto c = testing::SshdCluster::start({"127.0.0.5"});
    ASSERT_TRUE(c.ok()) << c.error().what();
    ASSERT_TRUE((*c)->install_binary(0, SPARKCTL_BINARY).ok());
    SshExec exec((*c)->target(0, (*c)->dir() + "/kh", true));
    ASSERT_TRUE(call_node(exec, NodeVerb::kVersion, json::object(), 10s).ok());
    pids.push_back((*c)->node(0).pid);
    for (pid_t d : testing::descendants((*c)->node(0).pid)) pids.push_back(d);
    EXPECT_GE(pids.size(), 2u);  // the listener plus the live session of `exec`
  }
  for (pid_t p : pids) EXPECT_FALSE(pid_alive(p)) << "pid " << p << " outlived the cluster";
}

}  // namespace
}  // namespace spk
