// Node verbs launch / stop / ps / log-tail (orchestrator/node/daemons.h), called in-process through
// run_node_verb with real processes (/bin/sleep, /bin/sh as an argv, never a shell string of ours).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernels/base/fs.h"
#include "orchestrator/node/daemons.h"
#include "orchestrator/node/runtime_procs.h"

namespace spk {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

class NodeDaemons : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/spk-daemons-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_.node_root = dir_;
    env_.binary = "/proc/self/exe";
  }
  void TearDown() override {
    (void)node_stop(json{{"dir", dir_}, {"grace_ms", 1000}}, env_);
    fs::remove_all(dir_);
  }
  VerbOutput verb(NodeVerb v, const json& in) { return run_node_verb(v, in.dump(), env_); }
  std::string dir_;
  NodeEnv env_;
};

TEST_F(NodeDaemons, LaunchPsStopLeavesNothing) {
  auto l = verb(NodeVerb::kLaunch,
                {{"dir", dir_}, {"name", "rank-1"}, {"argv", {"/bin/sleep", "30"}}, {"env", {{"A", "b"}}}});
  ASSERT_EQ(l.exit_code, 0) << l.body.dump();
  const int pid = l.body["pid"];
  EXPECT_TRUE(pid_alive(pid));
  EXPECT_EQ(::getpgid(pid), pid) << "own process group (setsid)";
  EXPECT_EQ(::getsid(pid), pid) << "own session";
  EXPECT_TRUE(fs::exists(dir_ + "/rank-1.pid"));
  auto again = verb(NodeVerb::kLaunch, {{"dir", dir_}, {"name", "rank-1"}, {"argv", {"/bin/sleep", "30"}}});
  EXPECT_EQ(again.exit_code, 1) << "a live daemon is never started twice: " << again.body.dump();
  auto ps = verb(NodeVerb::kPs, {{"dir", dir_}});
  ASSERT_EQ(ps.body["daemons"].size(), 1u) << ps.body.dump();
  EXPECT_EQ(ps.body["daemons"][0]["alive"], true);
  EXPECT_EQ(ps.body["daemons"][0]["pid"], pid);
  auto st = verb(NodeVerb::kStop, {{"dir", dir_}, {"grace_ms", 2000}});
  ASSERT_EQ(st.exit_code, 0) << st.body.dump();
  EXPECT_EQ(st.body["stopped"][0]["signal"], "SIGTERM");
  for (int i = 0; i < 100 && pid_alive(pid); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(pid_alive(pid));
  EXPECT_FALSE(fs::exists(dir_ + "/rank-1.pid"));
  EXPECT_EQ(verb(NodeVerb::kPs, {{"dir", dir_}}).body["daemons"].size(), 0u);
}

TEST_F(NodeDaemons, ArgvAndEnvArriveByteExactAndTheLogHoldsOutput) {
  const std::string nasty = "; rm -rf / #$(id) `x` 'q' \"d\" \n\t日本";
  auto l =
      verb(NodeVerb::kLaunch, {{"dir", dir_},
                               {"name", "echo"},
                               {"argv", {"/bin/sh", "-c", "printf '<%s|%s>' \"$1\" \"$V\"", "sh", nasty}},
                               {"env", {{"V", nasty}}},
                               {"wait_ms", 10000}});
  ASSERT_EQ(l.exit_code, 0) << l.body.dump();
  EXPECT_EQ(l.body["exit_code"], 0);
  auto log = read_file(dir_ + "/echo.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("<" + nasty + "|" + nasty + ">"), std::string::npos) << *log;
  EXPECT_FALSE(fs::exists(dir_ + "/echo.pid")) << "wait mode leaves no pidfile";
  auto fail = verb(NodeVerb::kLaunch,
                   {{"dir", dir_}, {"name", "f"}, {"argv", {"/bin/sh", "-c", "exit 3"}}, {"wait_ms", 10000}});
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_EQ(fail.body["exit_code"], 3);
}

TEST_F(NodeDaemons, BadInputIsRefusedWithTheValueNamed) {
  auto rel = verb(NodeVerb::kLaunch, {{"dir", dir_}, {"name", "x"}, {"argv", {"sleep", "1"}}});
  EXPECT_EQ(rel.exit_code, 2);
  EXPECT_NE(rel.body["error"].get<std::string>().find("'sleep'"), std::string::npos) << rel.body.dump();
  auto name = verb(NodeVerb::kLaunch, {{"dir", dir_}, {"name", "../x"}, {"argv", {"/bin/true"}}});
  EXPECT_EQ(name.exit_code, 2);
  auto missing =
      verb(NodeVerb::kLaunch, {{"dir", dir_}, {"name", "m"}, {"argv", {dir_ + "/no-such-binary"}}});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.body["error"].get<std::string>().find("no-such-binary"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/m.pid"));
  EXPECT_EQ(verb(NodeVerb::kStop, {{"dir", "relative"}}).exit_code, 2);
  EXPECT_EQ(verb(NodeVerb::kPs, {{"dir", dir_}, {"bogus", 1}}).exit_code, 2);
}

TEST_F(NodeDaemons, KilledDaemonIsDeadAndAReusedPidIsNotOurs) {
  auto l = verb(NodeVerb::kLaunch, {{"dir", dir_}, {"name", "rank-0"}, {"argv", {"/bin/sleep", "30"}}});
  ASSERT_EQ(l.exit_code, 0);
  const int pid = l.body["pid"];
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 200 && pid_alive(pid); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(verb(NodeVerb::kPs, {{"dir", dir_}}).body["daemons"][0]["alive"], false);
  // A pidfile naming a live process with another start time (pid reuse) is not ours: never signalled.
  ASSERT_TRUE(write_file_atomic(dir_ + "/other.pid",
                                json{{"pid", ::getpid()}, {"start_ticks", 1}, {"started_ms", 0}}.dump())
                  .ok());
  auto ps = verb(NodeVerb::kPs, {{"dir", dir_}});
  for (const auto& d : ps.body["daemons"]) EXPECT_EQ(d["alive"], false) << d.dump();
  auto st = verb(NodeVerb::kStop, {{"dir", dir_}});
  EXPECT_EQ(st.exit_code, 0) << st.body.dump();  // we are still alive: it did not signal us
  EXPECT_FALSE(fs::exists(dir_ + "/other.pid"));
}

TEST_F(NodeDaemons, LogTailFromTheEndAndFromOffsets) {
  ASSERT_TRUE(write_file_atomic(dir_ + "/a.log", "line1\nline2\n\xff\xfe bad bytes\n").ok());
  auto t = verb(NodeVerb::kLogTail, {{"dir", dir_}, {"max_bytes", 13}});
  ASSERT_EQ(t.exit_code, 0) << t.body.dump();
  ASSERT_EQ(t.body["logs"].size(), 1u);
  EXPECT_EQ(t.body["logs"][0]["text"], "?? bad bytes\n") << "invalid UTF-8 replaced byte for byte";
  const uint64_t size = t.body["logs"][0]["size"];
  EXPECT_EQ(size, 25u);
  auto o = verb(NodeVerb::kLogTail, {{"dir", dir_}, {"offsets", {{"a", 6}}}});
  EXPECT_EQ(o.body["logs"][0]["text"].get<std::string>().substr(0, 6), "line2\n");
  EXPECT_EQ(o.body["logs"][0]["from"], 6);
}

}  // namespace
}  // namespace spk
