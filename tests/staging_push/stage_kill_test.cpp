// `sparkctl stage` killed with SIGKILL at random points, then run again at once: the re-run succeeds
// (its stage-recv finds the port free: the killed head's receiver stopped when its head went away), and
// the head's and the worker's model trees are identical to those of an uninterrupted run, byte for byte.
// SPARKCTL_STAGE_KILLS sets the number of kills (CI: 5; scripts/stage-kill-soak.sh: 20); the seed is
// printed and can be fixed with SPARKCTL_STAGE_KILL_SEED.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "tests/support/run_binary.h"

namespace fs = std::filesystem;
using spk::test::run_sparkctl;

namespace {

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("spk_stagekill_" + std::to_string(::getpid()));
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

std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// relative path -> xxh64 of the content, for every file under `dir` (symlinks followed as the runtime
// does: the head's model dir may be a link to a snapshot).
std::map<std::string, unsigned long long> tree_hashes(const fs::path& dir) {
  std::map<std::string, unsigned long long> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string s = slurp(it->path());
    out[fs::relative(it->path(), dir).string()] = XXH64(s.data(), s.size(), 0);
  }
  return out;
}

// The model dir under a node's cache dir: the directory holding config.json.
fs::path model_dir(const fs::path& cache) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(cache, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename() == "config.json") return it->path().parent_path();
  return {};
}

std::string describe(const std::map<std::string, unsigned long long>& a,
                     const std::map<std::string, unsigned long long>& b) {
  std::string d;
  for (const auto& [k, v] : a)
    if (!b.count(k))
      d += "  only in the run: " + k + "\n";
    else if (b.at(k) != v)
      d += "  differs: " + k + "\n";
  for (const auto& [k, v] : b)
    if (!a.count(k)) d += "  missing: " + k + "\n";
  return d;
}

}  // namespace

TEST(StageKill, RerunAfterKill9SucceedsWithIdenticalTrees) {
  TempDir t;
  const std::string env = "SPARKCTL_STATE_DIR=" + t.p.string() + " ";
  const int port = free_port();
  std::ofstream(t.p / "two.yaml") << "name: two\nnodes:\n"
                                  << "  - {name: head, role: head, local: true, cache_dir: "
                                  << (t.p / "head").string() << "}\n"
                                  << "  - {name: w1, role: worker, local: true, cache_dir: "
                                  << (t.p / "w1").string() << "}\n";
  std::string lane = slurp(std::string(SPARKCTL_SOURCE_DIR) + "/recipes/lane-demo.yaml");
  lane.replace(lane.find("name: lane-demo"), 15, "name: lane-two\nnodes: 2\ntensor_parallel: 2");
  std::ofstream(t.p / "lane-two.yaml") << lane;
  const std::string args = "--cluster " + (t.p / "two.yaml").string() + " stage " +
                           (t.p / "lane-two.yaml").string() + " --port " + std::to_string(port);

  // The reference: one uninterrupted run from nothing, timed.
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_sparkctl(args, env);
  const double full_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << r.out;
  const auto want = tree_hashes(model_dir(t.p / "head"));
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(tree_hashes(model_dir(t.p / "w1")), want) << describe(tree_hashes(model_dir(t.p / "w1")), want);

  int kills = 5;
  if (const char* e = std::getenv("SPARKCTL_STAGE_KILLS")) kills = std::atoi(e);
  unsigned seed = static_cast<unsigned>(std::random_device{}());
  if (const char* e = std::getenv("SPARKCTL_STAGE_KILL_SEED")) seed = static_cast<unsigned>(std::atoll(e));
  std::printf("stage kill: %d kills, seed %u, a full stage takes %.2f s\n", kills, seed, full_s);
  std::mt19937 rng(seed);
  for (int k = 0; k < kills; ++k) {
    // Odd rounds start from nothing (the kill may land in synthesis, in the push or in verify); even
    // rounds keep the head's tree and wipe only the worker's (the kill lands in the push).
    std::error_code ec;
    fs::remove_all(t.p / "w1", ec);
    if (k % 2 == 0) fs::remove_all(t.p / "head", ec);
    const double at = std::uniform_real_distribution<double>(0.0, full_s)(rng);
    const std::string log = (t.p / ("killed-" + std::to_string(k) + ".log")).string();
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string cmd =
          "exec env " + env + SPARKCTL_BINARY + " " + args + " >" + log + " 2>&1 </dev/null";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(at));
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    const bool killed = WIFSIGNALED(st);
    t0 = std::chrono::steady_clock::now();
    r = run_sparkctl(args, env);  // at once
    const double rerun_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    SCOPED_TRACE("kill " + std::to_string(k) + " at " + std::to_string(at) + " s (seed " +
                 std::to_string(seed) + ", " + (killed ? "killed" : "had already finished") + ")");
    std::printf("  kill %d at %.3f s (%s): re-run exit %d in %.2f s\n", k, at,
                killed ? "killed" : "already done", r.code, rerun_s);
    EXPECT_EQ(r.out.find("Address already in use"), std::string::npos) << r.out;
    ASSERT_EQ(r.code, 0) << r.out << "\nkilled run's log:\n" << slurp(log);
    const auto head = tree_hashes(model_dir(t.p / "head")), w1 = tree_hashes(model_dir(t.p / "w1"));
    EXPECT_EQ(head, want) << describe(head, want);
    EXPECT_EQ(w1, want) << describe(w1, want);
  }
}
