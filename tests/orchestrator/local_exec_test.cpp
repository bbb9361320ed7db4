// LocalExec: fork/exec without a shell, stdin/stdout/stderr, exit codes, timeouts that kill the group.
#include "orchestrator/transport/local_exec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "kernels/base/fs.h"
#include "orchestrator/node/runtime_procs.h"

namespace spk {
namespace {

using namespace std::chrono_literals;

TEST(LocalExec, EchoRoundTripsLargeInput) {
  LocalExec exec({"local", SPARKCTL_BINARY, "", {}});
  nlohmann::json in{{"blob", std::string(300000, 'x')}, {"k", "v ; $(rm -rf /) `x` 'q' \"d\"\n"}};
  auto a = call_node(exec, NodeVerb::kEcho, in, 20s);
  ASSERT_TRUE(a.ok()) << a.error().what();
  EXPECT_EQ(a->exit_code, 0);
  EXPECT_EQ(a->body, in);
}

TEST(LocalExec, BadInputExitsTwoWithJson) {
  LocalExec exec({"local", SPARKCTL_BINARY, "", {}});
  auto r = exec.run(NodeVerb::kEcho, "{not json", 20s);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->exit_code, 2) << r->out << r->err;
  auto body = nlohmann::json::parse(r->out);
  EXPECT_EQ(body["ok"], false);
  EXPECT_NE(body["error"].get<std::string>().find("not valid JSON"), std::string::npos);
}

TEST(LocalExec, MissingBinaryIs127AndCallNodeSaysSo) {
  LocalExec exec({"local", "/nonexistent/sparkctl", "", {}});
  auto r = exec.run(NodeVerb::kVersion, "", 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  auto a = call_node(exec, NodeVerb::kVersion, nlohmann::json::object(), 5s);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("127"), std::string::npos);
}

TEST(LocalExec, TimeoutKillsTheProcessGroupAndIsRetryable) {
  auto dir = std::filesystem::temp_directory_path() / ("spk-lexec-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string script = (dir / "hang").string();
  const std::string pidfile = (dir / "child.pid").string();
  // The "binary" forks a grandchild that records its pid, then both sleep: the group kill must get both.
  ASSERT_TRUE(
      write_file_atomic(script, "#!/bin/sh\nsleep 30 &\necho $! > " + pidfile + "\nwait\n", 0755).ok());
  LocalExec exec({"local", script, "", {}});
  auto t0 = std::chrono::steady_clock::now();
  auto r = exec.run(NodeVerb::kFacts, "", 500ms);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().retryable);
  EXPECT_NE(r.error().message.find("500 ms"), std::string::npos) << r.error().message;
  EXPECT_LT(took, 5s);
  auto pid_text = read_file(pidfile);
  ASSERT_TRUE(pid_text.ok());
  pid_t gc = static_cast<pid_t>(std::stol(*pid_text));
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = !pid_alive(gc);
    if (!gone) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(gone) << "grandchild " << gc << " survived the timeout";
  std::filesystem::remove_all(dir);
}

TEST(NodeVerbAllowlist, NamesRoundTripAndNothingElseParses) {
  for (auto v :
       {NodeVerb::kVersion, NodeVerb::kEcho, NodeVerb::kFacts, NodeVerb::kPreflight, NodeVerb::kClean})
    EXPECT_EQ(parse_node_verb(node_verb_name(v)), v);
  EXPECT_FALSE(parse_node_verb("echo; rm -rf /").has_value());
  EXPECT_FALSE(parse_node_verb("").has_value());
}

}  // namespace
}  // namespace spk
