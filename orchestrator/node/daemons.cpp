#include "orchestrator/node/daemons.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "kernels/base/fs.h"
#include "orchestrator/node/mem_floor.h"
#include "orchestrator/node/node_input.h"
#include "orchestrator/node/runtime_procs.h"

extern char** environ;

namespace spk {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;
namespace ni = node_input;

VerbOutput bad(const Error& e) {
  return {kNodeBadInput, json{{"ok", false}, {"error", e.message}, {"fix", e.fix}}};
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool good_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return n != "." && n != "..";
}

Result<std::string> dir_of(const json& in, const NodeEnv& env, const char* verb) {
  auto d = ni::str(in, "dir", env.node_root + "/deploy/run");
  if (!d) return d.error();
  if (d->empty() || (*d)[0] != '/')
    return make_error(std::string("node ") + verb + ": dir '" + *d + "' is not absolute",
                      "pass an absolute dir");
  return *d;
}

Result<std::vector<std::string>> names_of(const json& in, const char* verb) {
  auto names = ni::strings(in, "names", {});
  if (!names) return names.error();
  for (const auto& n : *names)
    if (!good_name(n))
      return make_error(std::string("node ") + verb + ": bad daemon name '" + n + "'",
                        "use [A-Za-z0-9._-]{1,64}");
  return *names;
}

struct PidFile {
  std::string name;
  int pid = 0;
  unsigned long long start_ticks = 0;
  int64_t started_ms = 0;
  std::string log;
  json argv = json::array();
  [[nodiscard]] bool alive() const {
    return pid > 0 && pid_alive(pid) && process_start_ticks(pid) == start_ticks;
  }
};

// Pidfiles in `dir` (all, or those named), sorted by name.
std::vector<PidFile> read_pidfiles(const std::string& dir, const std::vector<std::string>& only) {
  std::vector<PidFile> out;
  std::error_code ec;
  std::map<std::string, PidFile> by_name;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    if (file.size() < 5 || file.substr(file.size() - 4) != ".pid") continue;
    const std::string name = file.substr(0, file.size() - 4);
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    auto text = read_file(e.path().string());
    if (!text) continue;
    auto j = json::parse(*text, nullptr, false);
    PidFile p;
    p.name = name;
    if (j.is_object()) {
      p.pid = j.value("pid", 0);
      p.start_ticks = j.value("start_ticks", 0ull);
      p.started_ms = j.value("started_ms", int64_t{0});
      p.log = j.value("log", "");
      if (j.contains("argv")) p.argv = j["argv"];
    }
    by_name[name] = p;
  }
  for (auto& [_, p] : by_name) out.push_back(std::move(p));
  return out;
}

std::string pidfile_path(const std::string& dir, const std::string& name) {
  return dir + "/" + name + ".pid";
}

// Bytes that are not valid UTF-8 become '?': node answers are JSON and logs may hold anything.
std::string utf8_clean(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (ok && (c >= 0x20 || c == '\n' || c == '\t' || c >= 0x80)) {
      out.append(s, i, n);
      i += n;
    } else {
      out += c == '\r' ? '\n' : '?';
      i += 1;
    }
  }
  return out;
}

}  // namespace

unsigned long long process_start_ticks(int pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return 0;
  auto rp = stat->rfind(')');
  if (rp == std::string::npos) return 0;
  // Fields after ")": state(3) ppid(4) ... starttime(22) -> the 20th space-separated token after ')'.
  size_t pos = rp + 2;
  for (int field = 3; field < 22 && pos != std::string::npos; ++field) pos = stat->find(' ', pos) + 1;
  if (pos == 0 || pos >= stat->size()) return 0;
  return std::strtoull(stat->c_str() + pos, nullptr, 10);
}

VerbOutput node_launch(const json& in, const NodeEnv& env) {
  if (auto s = ni::only_keys(in, {"dir", "name", "argv", "env", "wait_ms"}, "launch"); !s)
    return bad(s.error());
  auto dir = dir_of(in, env, "launch");
  auto name = ni::str(in, "name", "");
  auto argv = ni::strings(in, "argv", {});
  auto wait_ms = ni::u64(in, "wait_ms", 0);
  for (const Error* e : {dir ? nullptr : &dir.error(), name ? nullptr : &name.error(),
                         argv ? nullptr : &argv.error(), wait_ms ? nullptr : &wait_ms.error()})
    if (e) return bad(*e);
  if (!good_name(*name))
    return bad(make_error("node launch: bad name '" + *name + "'", "use [A-Za-z0-9._-]{1,64}"));
  if (argv->empty() || (*argv)[0].empty() || (*argv)[0][0] != '/')
    return bad(make_error("node launch: argv[0] must be an absolute path, got '" +
                              (argv->empty() ? std::string() : (*argv)[0]) + "'",
                          "send the node's binary path"));
  std::map<std::string, std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (in.contains("env")) {
    if (!in["env"].is_object())
      return bad(make_error("input 'env' must be an object of strings", "fix the caller"));
    for (auto it = in["env"].begin(); it != in["env"].end(); ++it) {
      if (!it.value().is_string() || it.key().empty() || it.key().find('=') != std::string::npos)
        return bad(make_error("input env '" + it.key() + "' must be NAME: string", "fix the caller"));
      vars[it.key()] = it.value().get<std::string>();
    }
  }
  std::error_code ec;
  fs::create_directories(*dir, ec);
  if (ec)
    return {kNodeCheckFailed, json{{"ok", false}, {"error", "cannot create " + *dir + ": " + ec.message()}}};
  const std::string pidfile = pidfile_path(*dir, *name);
  for (const auto& p : read_pidfiles(*dir, {*name}))
    if (p.alive())
      return {kNodeCheckFailed, json{{"ok", false},
                                     {"error", *name + " already runs as pid " + std::to_string(p.pid)},
                                     {"fix", "stop it first (sparkctl down)"}}};
  // A deliberate stop of this run leaves its reason here (orchestrator/node/mem_floor.h); an old note
  // belongs to an earlier run.
  const std::string note = exit_note_path(*dir, *name);
  ::unlink(note.c_str());
  vars[kExitNoteEnv] = note;
  const std::string log = *dir + "/" + *name + ".log";
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return {kNodeCheckFailed,
            json{{"ok", false}, {"error", "cannot open " + log + ": " + std::strerror(errno)}}};
  std::string header = "== sparkctl node launch " + *name + " at " + std::to_string(now_ms()) + " ms:";
  for (const auto& a : *argv) header += " " + a;
  header += "\n";
  [[maybe_unused]] auto w = ::write(fd, header.data(), header.size());

  std::vector<std::string> envs;
  for (const auto& [k, v] : vars) envs.push_back(k + "=" + v);
  std::vector<char*> envp, av;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = *argv;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  int errpipe[2];
  if (::pipe2(errpipe, O_CLOEXEC) != 0) {
    ::close(fd);
    return {kNodeCheckFailed, json{{"ok", false}, {"error", std::string("pipe: ") + std::strerror(errno)}}};
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    // Child: async-signal-safe calls only. New session = own process group, no controlling terminal.
    ::setsid();
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (int f = 3; f < 1024; ++f)
      if (f != errpipe[1]) ::close(f);
    ::execve(av[0], av.data(), envp.data());
    int e = errno;
    [[maybe_unused]] auto w2 = ::write(errpipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(errpipe[1]);
  ::close(fd);
  if (pid < 0) {
    ::close(errpipe[0]);
    return {kNodeCheckFailed, json{{"ok", false}, {"error", std::string("fork: ") + std::strerror(errno)}}};
  }
  int child_errno = 0;
  ssize_t n;
  while ((n = ::read(errpipe[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  ::close(errpipe[0]);
  if (n == sizeof child_errno) {
    ::waitpid(pid, nullptr, 0);
    return {kNodeCheckFailed, json{{"ok", false},
                                   {"error", "cannot exec " + (*argv)[0] + ": " + std::strerror(child_errno)},
                                   {"fix", "install sparkctl on the node at that path"}}};
  }
  if (*wait_ms > 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(*wait_ms);
    int st = 0;
    while (::waitpid(pid, &st, WNOHANG) != pid) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &st, 0);
        return {kNodeCheckFailed,
                json{{"ok", false},
                     {"error", *name + " did not finish within " + std::to_string(*wait_ms) +
                                   " ms (killed; log " + log + ")"},
                     {"log", log}}};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return {code == 0 ? kNodeOk : kNodeCheckFailed,
            json{{"ok", code == 0}, {"exit_code", code}, {"log", log}, {"pid", pid}}};
  }
  json pf{{"pid", pid},    {"pgid", pid}, {"start_ticks", process_start_ticks(pid)},
          {"argv", *argv}, {"log", log},  {"started_ms", now_ms()}};
  if (Status s = write_file_atomic(pidfile, pf.dump() + "\n"); !s.ok()) {
    ::kill(-pid, SIGKILL);  // no pidfile = nobody could stop it later: never leave it running
    return {kNodeCheckFailed, json{{"ok", false}, {"error", s.error().what()}}};
  }
  return {kNodeOk, json{{"ok", true}, {"pid", pid}, {"log", log}}};
}

VerbOutput node_stop(const json& in, const NodeEnv& env) {
  if (auto s = ni::only_keys(in, {"dir", "names", "grace_ms"}, "stop"); !s) return bad(s.error());
  auto dir = dir_of(in, env, "stop");
  auto names = names_of(in, "stop");
  auto grace = ni::u64(in, "grace_ms", 5000);
  for (const Error* e :
       {dir ? nullptr : &dir.error(), names ? nullptr : &names.error(), grace ? nullptr : &grace.error()})
    if (e) return bad(*e);
  auto files = read_pidfiles(*dir, *names);
  json stopped = json::array(), remaining = json::array();
  std::vector<PidFile> live;
  for (const auto& p : files)
    if (p.alive()) {
      ::kill(-p.pid, SIGTERM);
      live.push_back(p);
    }
  auto any_alive = [&] {
    for (const auto& p : live)
      if (pid_alive(p.pid)) return true;
    return false;
  };
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min<uint64_t>(*grace, 120000));
  while (any_alive() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::map<std::string, std::string> signal_of;
  for (const auto& p : live) {
    signal_of[p.name] = "SIGTERM";
    if (pid_alive(p.pid)) {
      ::kill(-p.pid, SIGKILL);
      signal_of[p.name] = "SIGKILL";
    }
  }
  for (int i = 0; i < 200 && any_alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (const auto& p : files) {
    if (p.alive()) {
      remaining.push_back(p.name);
      continue;
    }
    ::unlink(pidfile_path(*dir, p.name).c_str());
    json j{{"name", p.name}, {"pid", p.pid}};
    if (signal_of.count(p.name))
      j["signal"] = signal_of[p.name];
    else
      j["signal"] = "none (already dead)";
    stopped.push_back(j);
  }
  bool ok = remaining.empty();
  return {ok ? kNodeOk : kNodeCheckFailed, json{{"ok", ok}, {"stopped", stopped}, {"remaining", remaining}}};
}

VerbOutput node_ps(const json& in, const NodeEnv& env) {
  if (auto s = ni::only_keys(in, {"dir"}, "ps"); !s) return bad(s.error());
  auto dir = dir_of(in, env, "ps");
  if (!dir) return bad(dir.error());
  json daemons = json::array();
  const int64_t now = now_ms();
  for (const auto& p : read_pidfiles(*dir, {})) {
    bool alive = p.alive();
    json d{{"name", p.name},
           {"pid", p.pid},
           {"alive", alive},
           {"started_ms", p.started_ms},
           {"uptime_s", alive ? (now - p.started_ms) / 1000.0 : 0.0},
           {"log", p.log},
           {"argv", p.argv}};
    if (!alive)
      if (auto t = read_file(exit_note_path(*dir, p.name))) {
        json n = json::parse(*t, nullptr, false);
        if (n.is_object()) d["exit_note"] = n;
      }
    daemons.push_back(std::move(d));
  }
  return {kNodeOk, json{{"ok", true}, {"daemons", daemons}}};
}

VerbOutput node_log_tail(const json& in, const NodeEnv& env) {
  if (auto s = ni::only_keys(in, {"dir", "names", "max_bytes", "offsets"}, "log-tail"); !s)
    return bad(s.error());
  auto dir = dir_of(in, env, "log-tail");
  auto names = names_of(in, "log-tail");
  auto max_bytes = ni::u64(in, "max_bytes", 8192);
  for (const Error* e : {dir ? nullptr : &dir.error(), names ? nullptr : &names.error(),
                         max_bytes ? nullptr : &max_bytes.error()})
    if (e) return bad(*e);
  json offsets = in.value("offsets", json::object());
  if (!offsets.is_object()) return bad(make_error("input 'offsets' must be {name: bytes}", "fix the caller"));
  std::vector<std::string> list = *names;
  if (list.empty()) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(*dir, ec)) {
      std::string f = e.path().filename().string();
      if (f.size() > 4 && f.substr(f.size() - 4) == ".log") list.push_back(f.substr(0, f.size() - 4));
    }
    std::sort(list.begin(), list.end());
  }
  const uint64_t cap = std::min<uint64_t>(*max_bytes, 1 << 20);
  json logs = json::array();
  for (const auto& name : list) {
    const std::string path = *dir + "/" + name + ".log";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    ::fstat(fd, &st);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    uint64_t from = size > cap ? size - cap : 0;
    if (offsets.contains(name) && offsets[name].is_number_integer() && offsets[name].get<int64_t>() >= 0) {
      from = std::min<uint64_t>(offsets[name].get<uint64_t>(), size);  // a truncated log restarts at 0
      if (offsets[name].get<uint64_t>() > size) from = 0;
    }
    const uint64_t len = std::min<uint64_t>(size - from, cap);
    std::string text(len, '\0');
    ssize_t got = len ? ::pread(fd, text.data(), len, static_cast<off_t>(from)) : 0;
    ::close(fd);
    text.resize(got > 0 ? static_cast<size_t>(got) : 0);
    logs.push_back(
        {{"name", name}, {"size", from + text.size()}, {"from", from}, {"text", utf8_clean(text)}});
  }
  return {kNodeOk, json{{"ok", true}, {"logs", logs}}};
}

}  // namespace spk
