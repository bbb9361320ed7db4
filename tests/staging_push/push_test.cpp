// The push end to end with real processes on 127.0.0.1: the receiver is `sparkctl node stage-recv` (JSON on
// stdin, port read from its stderr), the sender push_tree() in this process or in a forked child.
#include "orchestrator/staging/push/push.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "orchestrator/staging/push/file_io.h"
#include "orchestrator/staging/push/wire.h"
#include "orchestrator/staging/verify.h"

namespace fs = std::filesystem;
using namespace spk::staging;
using nlohmann::json;

namespace {

constexpr std::uint64_t kBlock = 64 << 10;
const std::string kToken = "0123456789abcdef0123456789abcdef";

struct TempDir {
  fs::path p;
  TempDir() {
    static int n = 0;
    p = fs::temp_directory_path() / ("spk_pushe2e_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(p);
  }
  ~TempDir() {
    ::umount2(p.c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::string s(n, '\0');
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t v = g();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}
void write(const fs::path& f, const std::string& s) {
  fs::create_directories(f.parent_path());
  std::ofstream(f, std::ios::binary) << s;
}
std::string slurp(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A small model-like tree: two shards with awkward sizes, a nested file, a config, an empty file.
void make_tree(const fs::path& d, std::uint64_t shard_bytes = 3'000'017) {
  write(d / "model-00001-of-00002.safetensors", random_bytes(shard_bytes, 1));
  write(d / "model-00002-of-00002.safetensors", random_bytes(shard_bytes / 3 + 5, 2));
  write(d / "sub/dir/extra.bin", random_bytes(kBlock * 2, 3));
  write(d / "config.json", R"({"model_type":"llama"})");
  write(d / "empty", "");
}

std::map<std::string, std::string> tree(const fs::path& d) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(d))
    if (e.is_regular_file()) out[fs::relative(e.path(), d).string()] = slurp(e.path());
  return out;
}

struct Receiver {
  pid_t pid = -1;
  int port = 0;
  int out_fd = -1;
  ~Receiver() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out_fd >= 0) ::close(out_fd);
  }
  // Exit code and stdout JSON.
  std::pair<int, json> wait() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(out_fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<std::size_t>(n));
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, json::parse(out, nullptr, false)};
  }
};

std::unique_ptr<Receiver> start_receiver(const fs::path& root, json extra = json::object()) {
  json in{
      {"root", root.string()}, {"token", kToken}, {"bind", "127.0.0.1"}, {"port", 0}, {"idle_timeout_s", 20}};
  in.update(extra);
  int pin[2], pout[2], perr[2];
  EXPECT_EQ(::pipe(pin), 0);
  EXPECT_EQ(::pipe(pout), 0);
  EXPECT_EQ(::pipe(perr), 0);
  auto r = std::make_unique<Receiver>();
  r->pid = ::fork();
  if (r->pid == 0) {
    ::dup2(pin[0], 0);
    ::dup2(pout[1], 1);
    ::dup2(perr[1], 2);
    for (int fd : {pin[0], pin[1], pout[0], pout[1], perr[0], perr[1]}) ::close(fd);
    ::execl(SPARKCTL_BINARY, SPARKCTL_BINARY, "node", "stage-recv", nullptr);
    ::_exit(127);
  }
  ::close(pin[0]);
  ::close(pout[1]);
  ::close(perr[1]);
  std::string s = in.dump();
  EXPECT_EQ(::write(pin[1], s.data(), s.size()), static_cast<ssize_t>(s.size()));
  ::close(pin[1]);
  r->out_fd = pout[0];
  std::string err;
  char c;
  while (err.find('\n') == std::string::npos && ::read(perr[0], &c, 1) == 1) err += c;
  ::close(perr[0]);  // later stderr lines would get SIGPIPE'd writes: the verb writes only this one
  auto at = err.rfind(':');
  if (err.find("listening on") != std::string::npos && at != std::string::npos)
    r->port = std::stoi(err.substr(at + 1));
  EXPECT_GT(r->port, 0) << "receiver stderr: " << err;
  return r;
}

PushOptions push_opts(const fs::path& src, int port, int streams = 3) {
  PushOptions o;
  o.source_dir = src.string();
  o.host = "127.0.0.1";
  o.port = port;
  o.token = kToken;
  o.streams = streams;
  o.block_bytes = kBlock;
  o.connect_timeout_s = 10;
  o.io_timeout_s = 20;
  return o;
}

// One full session; returns the sender's report (or fails the test).
PushReport push_ok(const fs::path& src, const fs::path& dst, bool hash_all = false) {
  auto rcv = start_receiver(dst);
  auto o = push_opts(src, rcv->port);
  o.hash_all = hash_all;
  auto rep = push_tree(o);
  EXPECT_TRUE(rep.ok()) << (rep.ok() ? "" : rep.error().what());
  auto [code, body] = rcv->wait();
  EXPECT_EQ(code, 0) << body.dump();
  return rep.ok() ? *rep : PushReport{};
}

std::int64_t mtime_ns(const fs::path& f) {
  struct stat st {};
  EXPECT_EQ(::stat(f.c_str(), &st), 0) << f;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}
void set_mtime_ns(const fs::path& f, std::int64_t ns) {
  const timespec ts[2] = {{0, UTIME_OMIT}, {ns / 1'000'000'000, ns % 1'000'000'000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), ts, 0), 0) << f;
}
// Every file of `dst` has the mtime of the same file under `src`.
::testing::AssertionResult same_mtimes(const fs::path& src, const fs::path& dst) {
  for (const auto& e : fs::recursive_directory_iterator(src))
    if (e.is_regular_file()) {
      const fs::path d = dst / fs::relative(e.path(), src);
      if (mtime_ns(e.path()) != mtime_ns(d))
        return ::testing::AssertionFailure() << d << " mtime " << mtime_ns(d) << " != " << mtime_ns(e.path());
    }
  return ::testing::AssertionSuccess();
}

bool no_partials(const fs::path& d) {
  for (const auto& e : fs::recursive_directory_iterator(d))
    if (e.path().string().ends_with(".sparkctl-partial")) return false;
  return true;
}

}  // namespace

TEST(Push, ColdPushGivesIdenticalTree) {
  TempDir src, dst;
  make_tree(src.p);
  std::vector<PushProgress> ticks;
  auto rcv = start_receiver(dst.p);
  auto o = push_opts(src.p, rcv->port);
  o.progress = [&](const PushProgress& p) { ticks.push_back(p); };
  auto rep = push_tree(o);
  ASSERT_TRUE(rep.ok()) << rep.error().what();
  auto [code, body] = rcv->wait();
  ASSERT_EQ(code, 0) << body.dump();
  EXPECT_EQ(tree(src.p), tree(dst.p));
  EXPECT_TRUE(no_partials(dst.p));
  EXPECT_EQ(rep->files, 5u);
  EXPECT_EQ(rep->bytes_sent, rep->bytes_total);
  EXPECT_EQ(body["bytes_received"].get<std::uint64_t>(), rep->bytes_total);
  EXPECT_EQ(body["files"].size(), 5u);
  ASSERT_FALSE(ticks.empty());
  EXPECT_EQ(ticks.back().bytes_sent, ticks.back().bytes_total);
}

// Where the filesystem does direct I/O the aligned blocks bypass the page cache; with direct_io off
// (and on filesystems without it) every block goes through the page cache. Same trees either way.
TEST(Push, DirectAndPageCacheWritesGiveIdenticalTrees) {
  TempDir src;
  make_tree(src.p, 20 * kBlock + 999);
  std::uint64_t aligned = 0;  // payload of whole blocks: 64 KiB blocks of the shard and of extra.bin
  for (const auto& e : fs::recursive_directory_iterator(src.p))
    if (e.is_regular_file()) aligned += e.file_size() / kBlock * kBlock;
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct_io" : "page cache");
    TempDir dst;
    int probe = ::open((dst.p / "probe").c_str(), O_CREAT | O_WRONLY, 0644);
    const bool fs_direct = direct_io_align(probe) != 0;
    ::close(probe);
    fs::remove(dst.p / "probe");
    auto rcv = start_receiver(dst.p, {{"direct_io", direct}});
    auto rep = push_tree(push_opts(src.p, rcv->port));
    ASSERT_TRUE(rep.ok()) << rep.error().what();
    auto [code, body] = rcv->wait();
    ASSERT_EQ(code, 0) << body.dump();
    EXPECT_EQ(tree(src.p), tree(dst.p));
    EXPECT_TRUE(no_partials(dst.p));
    EXPECT_EQ(body["bytes_direct"].get<std::uint64_t>(), direct && fs_direct ? aligned : 0) << body.dump();
    // A changed block of a file already there: the kept blocks are copied the same way.
    std::string shard = slurp(src.p / "model-00001-of-00002.safetensors");
    shard[3 * kBlock + 1] ^= 0x11;
    write(src.p / "model-00001-of-00002.safetensors", shard);
    rcv = start_receiver(dst.p, {{"direct_io", direct}});
    rep = push_tree(push_opts(src.p, rcv->port));
    ASSERT_TRUE(rep.ok()) << rep.error().what();
    EXPECT_EQ(rcv->wait().first, 0);
    EXPECT_EQ(rep->bytes_sent, kBlock);
    EXPECT_EQ(tree(src.p), tree(dst.p));
  }
}

TEST(Push, ChangedBlocksAloneAreResent) {
  TempDir src, dst;
  make_tree(src.p, 200 * kBlock + 123);
  push_ok(src.p, dst.p);
  // Change 2 of the 201 blocks (1%) of the big shard.
  std::string shard = slurp(src.p / "model-00001-of-00002.safetensors");
  shard[7 * kBlock + 5] ^= 0x5a;
  shard[150 * kBlock] ^= 0x01;
  write(src.p / "model-00001-of-00002.safetensors", shard);
  auto rep = push_ok(src.p, dst.p);
  EXPECT_EQ(rep.bytes_sent, 2 * kBlock);
  EXPECT_EQ(rep.blocks_sent, 2u);
  EXPECT_EQ(tree(src.p), tree(dst.p));
  // Nothing changed: nothing sent.
  EXPECT_EQ(push_ok(src.p, dst.p).bytes_sent, 0u);
}

TEST(Push, CorruptBlockAtDestinationIsRepaired) {
  TempDir src, dst;
  make_tree(src.p);
  push_ok(src.p, dst.p);
  {
    std::fstream f(dst.p / "sub/dir/extra.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kBlock + 17);
    f.put('\x7f');
  }
  ASSERT_NE(tree(src.p), tree(dst.p));
  auto rep = push_ok(src.p, dst.p);
  EXPECT_EQ(rep.bytes_sent, kBlock);
  EXPECT_EQ(tree(src.p), tree(dst.p));
}

// Quick check: files whose size and mtime match are read on neither end.
TEST(Push, UnchangedRePushReadsNoFileContent) {
  TempDir src, dst;
  make_tree(src.p);
  push_ok(src.p, dst.p);
  EXPECT_TRUE(same_mtimes(src.p, dst.p));  // every landed file carries the source's mtime
  auto rep = push_ok(src.p, dst.p);
  EXPECT_EQ(rep.files_skipped_quick, 5u);
  EXPECT_EQ(rep.bytes_hashed, 0u);
  EXPECT_EQ(rep.worker_bytes_hashed, 0u);
  EXPECT_EQ(rep.bytes_sent, 0u);
  EXPECT_EQ(rep.blocks_sent, 0u);
  EXPECT_EQ(tree(src.p), tree(dst.p));
}

// A new mtime on the same bytes: hashed on both ends, nothing sent, and the destination takes the new
// mtime so the next push skips it unread.
TEST(Push, NewMtimeSameContentIsHashedAndSendsNothing) {
  TempDir src, dst;
  make_tree(src.p);
  push_ok(src.p, dst.p);
  const fs::path shard = src.p / "model-00001-of-00002.safetensors";
  set_mtime_ns(shard, mtime_ns(shard) - 86'400'000'000'123);  // a day and 123 ns earlier
  auto rep = push_ok(src.p, dst.p);
  EXPECT_EQ(rep.files_skipped_quick, 4u);
  EXPECT_EQ(rep.bytes_hashed, fs::file_size(shard));
  EXPECT_EQ(rep.worker_bytes_hashed, fs::file_size(shard));
  EXPECT_EQ(rep.blocks_sent, 0u);
  EXPECT_EQ(rep.bytes_sent, 0u);
  EXPECT_TRUE(same_mtimes(src.p, dst.p));
  rep = push_ok(src.p, dst.p);
  EXPECT_EQ(rep.files_skipped_quick, 5u);
  EXPECT_EQ(rep.bytes_hashed + rep.worker_bytes_hashed, 0u);
}

// Changed in place, same size, new mtime: hashed, and only the changed block moves.
TEST(Push, SameSizeNewMtimeSendsOnlyTheChangedBlocks) {
  TempDir src, dst;
  make_tree(src.p);
  push_ok(src.p, dst.p);
  const fs::path shard = src.p / "model-00001-of-00002.safetensors";
  const std::int64_t before = mtime_ns(shard);
  std::string data = slurp(shard);
  data[5 * kBlock + 9] ^= 0x42;
  write(shard, data);
  set_mtime_ns(shard, before + 1'000'000'007);  // a distinct mtime whatever the clock's granularity
  auto rep = push_ok(src.p, dst.p);
  EXPECT_EQ(rep.files_skipped_quick, 4u);
  EXPECT_EQ(rep.blocks_sent, 1u);
  EXPECT_EQ(rep.bytes_sent, kBlock);
  EXPECT_EQ(tree(src.p), tree(dst.p));
  EXPECT_TRUE(same_mtimes(src.p, dst.p));
}

// A corruption that keeps size and mtime is invisible to the quick check; hash_all finds and repairs it.
TEST(Push, HashAllRepairsACorruptionThatKeptSizeAndMtime) {
  TempDir src, dst;
  make_tree(src.p);
  push_ok(src.p, dst.p);
  const fs::path bad = dst.p / "sub/dir/extra.bin";
  const std::int64_t t = mtime_ns(bad);
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kBlock + 17);
    f.put('\x7f');
  }
  set_mtime_ns(bad, t);
  ASSERT_NE(tree(src.p), tree(dst.p));
  auto rep = push_ok(src.p, dst.p);
  EXPECT_EQ(rep.files_skipped_quick, 5u);
  EXPECT_EQ(rep.bytes_sent, 0u);
  EXPECT_NE(tree(src.p), tree(dst.p));  // the documented limit of the quick check
  rep = push_ok(src.p, dst.p, /*hash_all=*/true);
  EXPECT_EQ(rep.files_skipped_quick, 0u);
  EXPECT_EQ(rep.bytes_hashed, rep.bytes_total);
  EXPECT_EQ(rep.blocks_sent, 1u);
  EXPECT_EQ(rep.bytes_sent, kBlock);
  EXPECT_EQ(tree(src.p), tree(dst.p));
  EXPECT_TRUE(same_mtimes(src.p, dst.p));
}

// A final file longer than the source whose first bytes are the source's: truncated, not kept.
TEST(Push, LongerFileWithTheSourceAsPrefixIsTruncated) {
  TempDir src, dst;
  write(src.p / "f", random_bytes(2 * kBlock, 4));
  write(dst.p / "f", slurp(src.p / "f") + "tail");
  auto rep = push_ok(src.p, dst.p);
  EXPECT_EQ(rep.bytes_sent, 0u);
  EXPECT_EQ(tree(src.p), tree(dst.p));
}

TEST(Push, KilledAtRandomPointsThenResumedGivesIdenticalTree) {
  TempDir src;
  make_tree(src.p, 40 << 20);
  const auto want = tree(src.p);
  const unsigned seed = std::random_device{}();
  std::mt19937 g(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::uint64_t saved = 0;
  for (int round = 0; round < 4; ++round) {
    TempDir dst;
    for (int kills = 0; kills < 2; ++kills) {  // a kill, and a kill during the resume
      auto rcv = start_receiver(dst.p);
      // The kill lands after a random share of the bytes: the sender kills the receiver or itself.
      const std::uint64_t at = (5 + g() % 90) * (want.at("model-00001-of-00002.safetensors").size() / 100);
      const bool kill_receiver = (round + kills) % 2 == 0;
      const pid_t rpid = rcv->pid;
      pid_t sender = ::fork();
      if (sender == 0) {
        auto o = push_opts(src.p, rcv->port, 4);
        o.block_bytes = 1 << 20;
        o.after_block = [&](std::uint64_t sent) {
          if (sent >= at) ::kill(kill_receiver ? rpid : ::getpid(), SIGKILL);
        };
        ::_exit(push_tree(o).ok() ? 0 : 1);
      }
      ::waitpid(sender, nullptr, 0);
      ::kill(rcv->pid, SIGKILL);
      rcv->wait();
      // Whatever was killed when: every visible final file is whole (identical to the source) or absent.
      for (const auto& [rel, data] : tree(dst.p))
        if (!rel.ends_with(".sparkctl-partial")) {
          ASSERT_TRUE(want.count(rel)) << rel;
          EXPECT_TRUE(want.at(rel) == data)
              << "round " << round << ": " << rel << " is visible but not whole";
        }
    }
    auto rcv = start_receiver(dst.p);
    auto o = push_opts(src.p, rcv->port, 4);
    o.block_bytes = 1 << 20;
    auto rep = push_tree(o);
    ASSERT_TRUE(rep.ok()) << rep.error().what();
    EXPECT_EQ(rcv->wait().first, 0);
    EXPECT_EQ(tree(dst.p), want) << "round " << round;
    EXPECT_TRUE(no_partials(dst.p));
    saved += rep->bytes_total - rep->bytes_sent;
  }
  std::cerr << "the resumes skipped " << saved << " bytes already at the destination\n";
  EXPECT_GT(saved, 0u);  // every resume starts from the kept partial files, not from zero
}

TEST(Push, NotEnoughDiskFailsBeforeTheFirstByte) {
  TempDir src, dst;
  make_tree(src.p);
  auto rcv = start_receiver(dst.p, {{"max_bytes", 100000}});
  auto rep = push_tree(push_opts(src.p, rcv->port));
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.error().message.find("needs"), std::string::npos) << rep.error().what();
  EXPECT_NE(rep.error().message.find("100000 bytes"), std::string::npos) << rep.error().what();
  auto [code, body] = rcv->wait();
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(tree(dst.p).empty());
}

TEST(Push, FullDiskWhileWritingLeavesNothingHalfWritten) {
  TempDir src, dst;
  make_tree(src.p, 6 << 20);
  if (::mount("tmpfs", dst.p.c_str(), "tmpfs", 0, "size=4m") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << "); the preflight test covers the cap";
  auto rcv = start_receiver(dst.p, {{"max_bytes", 1ull << 40}});  // claim space: the real disk fills up
  auto rep = push_tree(push_opts(src.p, rcv->port));
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.error().message.find("ENOSPC"), std::string::npos) << rep.error().what();
  auto [code, body] = rcv->wait();
  EXPECT_EQ(code, 1);
  for (const auto& [rel, data] : tree(dst.p)) EXPECT_EQ(data, slurp(src.p / rel)) << rel << " half-written";
  EXPECT_TRUE(no_partials(dst.p));
}

TEST(Push, WrongTokenIsRefused) {
  TempDir src, dst;
  make_tree(src.p);
  auto rcv = start_receiver(dst.p, {{"idle_timeout_s", 2}});
  auto o = push_opts(src.p, rcv->port);
  o.token = "not-the-token-at-all-000000000000";
  auto rep = push_tree(o);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.error().message.find("wrong token"), std::string::npos) << rep.error().what();
  rcv->wait();
  EXPECT_TRUE(tree(dst.p).empty());
}

// A hand-written sender speaks the protocol: escapes are refused, a corrupted block is asked for again.
TEST(Push, TraversalIsRefused) {
  TempDir dst, outside;
  fs::create_directory_symlink(outside.p, dst.p / "link");
  for (std::string bad : {"../x", "/etc/evil", "a/../../x", "link/x", "./x"}) {
    auto rcv = start_receiver(dst.p);
    auto c = wire::connect_tcp("127.0.0.1", rcv->port, std::chrono::seconds(5));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->send_json({{"type", "hello"}, {"token", kToken}, {"role", "control"}}).ok());
    ASSERT_TRUE(c->recv_json("welcome").ok());
    json mf{{"type", "manifest"}, {"block_bytes", kBlock}, {"files", {{{"path", bad}, {"size", 10}}}}};
    ASSERT_TRUE(c->send_json(mf).ok());
    auto ans = c->recv_json("have");
    ASSERT_FALSE(ans.ok()) << bad;
    EXPECT_NE(ans.error().message.find("refused path"), std::string::npos) << ans.error().what();
    auto [code, body] = rcv->wait();
    EXPECT_EQ(code, 1) << bad;
  }
  EXPECT_TRUE(fs::is_empty(outside.p));
  EXPECT_EQ(std::distance(fs::directory_iterator(dst.p), fs::directory_iterator()), 1);  // just the link
}

TEST(Push, BlockWithWrongHashIsAskedForAgain) {
  TempDir dst;
  auto rcv = start_receiver(dst.p);
  std::string data = random_bytes(2 * kBlock, 9);
  std::uint64_t h0 = XXH64(data.data(), kBlock, 0), h1 = XXH64(data.data() + kBlock, kBlock, 0);
  auto ctl = wire::connect_tcp("127.0.0.1", rcv->port, std::chrono::seconds(5));
  ASSERT_TRUE(ctl.ok());
  ASSERT_TRUE(ctl->send_json({{"type", "hello"}, {"token", kToken}, {"role", "control"}}).ok());
  ASSERT_TRUE(ctl->recv_json("welcome").ok());
  ASSERT_TRUE(ctl->send_json({{"type", "manifest"},
                              {"block_bytes", kBlock},
                              {"files", {{{"path", "f"}, {"size", 2 * kBlock}}}}})
                  .ok());
  ASSERT_TRUE(ctl->recv_json("have").ok());
  json plan{{"type", "plan"}, {"streams", 1}, {"files", {{{"want", {h0, h1}}, {"send", {0, 1}}}}}};
  ASSERT_TRUE(ctl->send_json(plan).ok());
  ASSERT_TRUE(ctl->recv_json("ready").ok());
  auto dc = wire::connect_tcp("127.0.0.1", rcv->port, std::chrono::seconds(5));
  ASSERT_TRUE(dc->send_json({{"type", "hello"}, {"token", kToken}, {"role", "data"}}).ok());
  ASSERT_TRUE(dc->recv_json("welcome").ok());
  ASSERT_TRUE(dc->send_block(0, 0, h0, data.data(), kBlock).ok());
  std::string bad = data.substr(kBlock);
  bad[3] ^= 1;  // corrupted in flight: the header still carries the true hash
  ASSERT_TRUE(dc->send_block(0, 1, h1, bad.data(), kBlock).ok());
  ASSERT_TRUE(dc->send_end().ok());
  ASSERT_TRUE(dc->recv_json("ack").ok());
  ASSERT_TRUE(ctl->send_json({{"type", "done"}}).ok());
  auto resend = ctl->recv_json("resend");
  ASSERT_TRUE(resend.ok()) << resend.error().what();
  EXPECT_EQ((*resend)["files"], json::parse(R"([{"file":0,"blocks":[1]}])"));
  EXPECT_FALSE(fs::exists(dst.p / "f"));  // not visible while incomplete
  ASSERT_TRUE(ctl->send_block(0, 1, h1, data.data() + kBlock, kBlock).ok());
  ASSERT_TRUE(ctl->send_end().ok());
  ASSERT_TRUE(ctl->send_json({{"type", "done"}}).ok());
  auto rep = ctl->recv_json("report");
  ASSERT_TRUE(rep.ok()) << rep.error().what();
  auto [code, body] = rcv->wait();
  EXPECT_EQ(code, 0);
  EXPECT_EQ(body["blocks_rejected"], 1);
  EXPECT_EQ(slurp(dst.p / "f"), data);
}

// A hub snapshot is a tree of symlinks into blobs/: the push and the head's manifest name each file by
// its path in the snapshot (config.json), not by where the link points (../../blobs/<etag>, which the
// receiver refuses and the worker's verify would call missing).
TEST(Push, HubSnapshotOfSymlinksPushesUnderItsOwnNames) {
  TempDir src, dst;
  write(src.p / "blobs/aaaa", R"({"model_type":"llama"})");
  write(src.p / "blobs/bbbb", random_bytes(kBlock * 3 + 7, 9));
  const fs::path snap = src.p / "snapshots/rev";
  fs::create_directories(snap / "sub");
  fs::create_symlink("../../blobs/aaaa", snap / "config.json");
  fs::create_symlink("../../../blobs/bbbb", snap / "sub/model.safetensors");
  auto m = build_manifest(snap.string(), false);
  ASSERT_TRUE(m.ok()) << m.error().what();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].path, "config.json");
  EXPECT_EQ((*m)[1].path, "sub/model.safetensors");
  auto rep = push_ok(snap, dst.p);
  EXPECT_EQ(rep.files, 2u);
  EXPECT_EQ(slurp(dst.p / "config.json"), slurp(src.p / "blobs/aaaa"));
  EXPECT_EQ(slurp(dst.p / "sub/model.safetensors"), slurp(src.p / "blobs/bbbb"));
}
