#include "tests/support/sshd_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "kernels/base/fs.h"

extern char** environ;
namespace fs = std::filesystem;

namespace spk::testing {

namespace {

using namespace std::chrono_literals;

Result<int> free_port(const std::string& host) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    return make_error("bad loopback address " + host, "use 127.x.y.z");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    int e = errno;
    ::close(fd);
    return make_error("cannot bind " + host + ": " + std::strerror(e), "is 127.0.0.0/8 on lo here?");
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

bool accepts(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

std::map<pid_t, pid_t> parent_map() {
  std::map<pid_t, pid_t> ppid;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat;
    try {  // a process that exits while we read: libstdc++'s filebuf throws on ESRCH
      std::ifstream in(e.path() / "stat");
      stat.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (const std::exception&) {
      continue;
    }
    auto rp = stat.rfind(')');
    if (rp == std::string::npos) continue;
    std::istringstream rest(stat.substr(rp + 2));
    char state;
    pid_t pp = 0;
    rest >> state >> pp;
    ppid[static_cast<pid_t>(std::stol(name))] = pp;
  }
  return ppid;
}

Status keygen(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  fs::remove(path + ".pub", ec);
  std::string out;
  if (run_argv({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "spk-test", "-f", path},
               &out) != 0)
    return make_error("ssh-keygen failed for " + path + ": " + out,
                      "install openssh-client (scripts/setup.sh)");
  return ok_status();
}

}  // namespace

int run_argv(const std::vector<std::string>& argv, std::string* output) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(p[1]);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof(buf))) > 0)
    if (output) output->append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::vector<pid_t> descendants(pid_t pid) {
  auto ppid = parent_map();
  std::vector<pid_t> out{pid};
  for (size_t i = 0; i < out.size(); ++i)
    for (const auto& [c, p] : ppid)
      if (p == out[i]) out.push_back(c);
  out.erase(out.begin());
  return out;
}

Result<std::unique_ptr<SshdCluster>> SshdCluster::start(
    const std::vector<std::string>& hosts, const std::vector<std::vector<std::string>>& node_env) {
  if (::geteuid() != 0)
    return make_error("sshd harness needs root (sshd must run as root)", "run the tests as root");
  if (!fs::exists("/usr/sbin/sshd"))
    return make_error("/usr/sbin/sshd not found", "install openssh-server (scripts/setup.sh)");
  std::error_code ec;
  fs::create_directories("/run/sshd", ec);  // sshd's privilege-separation directory
  std::unique_ptr<SshdCluster> c(new SshdCluster());
  char tmpl[] = "/tmp/spk-sshd-XXXXXX";
  if (!::mkdtemp(tmpl)) return make_error("mkdtemp failed", "check /tmp");
  c->dir_ = tmpl;
  c->client_key_ = c->dir_ + "/client_ed25519";
  SPK_TRY(keygen(c->client_key_));
  SPK_ASSIGN(std::string pub, read_file(c->client_key_ + ".pub"));
  SPK_TRY(write_file_atomic(c->dir_ + "/authorized_keys", pub, 0600));
  for (size_t i = 0; i < hosts.size(); ++i) {
    SshdNode n;
    n.host = hosts[i];
    n.dir = c->dir_ + "/node" + std::to_string(i);
    n.root = n.dir + "/root";
    n.host_key = n.dir + "/host_ed25519";
    n.config = n.dir + "/sshd_config";
    n.log = n.dir + "/sshd.log";
    fs::create_directories(n.root + "/bin", ec);
    SPK_TRY(keygen(n.host_key));
    SPK_ASSIGN(n.port, free_port(n.host));
    std::ostringstream cfg;
    cfg << "ListenAddress " << n.host << ":" << n.port << "\n"
        << "HostKey " << n.host_key << "\n"
        << "AuthorizedKeysFile " << c->dir_ << "/authorized_keys\n"
        << "PidFile " << n.dir << "/sshd.pid\n"
        << "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        << "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nMaxStartups 64\nMaxSessions 64\n"
        << "Subsystem sftp internal-sftp\n"
        << "SetEnv SPARKCTL_NODE_ROOT=" << n.root;
    if (i < node_env.size())
      for (const auto& kv : node_env[i]) cfg << " " << kv;  // one SetEnv line: sshd keeps the first
    cfg << "\n";
    SPK_TRY(write_file_atomic(n.config, cfg.str(), 0600));
    c->nodes_.push_back(n);
    SPK_TRY(c->start_node(c->nodes_.back()));
  }
  return c;
}

Status SshdCluster::start_node(SshdNode& n) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a crashed test must not leave sshd listening
    int fd = ::open(n.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", n.config.c_str(),
          static_cast<char*>(nullptr));
    ::_exit(127);
  }
  n.pid = pid;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      n.pid = -1;
      auto log = read_file(n.log);
      return make_error("sshd for " + n.host + ":" + std::to_string(n.port) +
                            " exited at start: " + (log.ok() ? *log : std::string("?")),
                        "sshd cannot run in this sandbox");
    }
    if (accepts(n.host, n.port)) return ok_status();
    std::this_thread::sleep_for(20ms);
  }
  stop_node(n);
  return make_error("sshd for " + n.host + ":" + std::to_string(n.port) + " did not listen within 5 s",
                    "see " + n.log);
}

void SshdCluster::stop_node(SshdNode& n) {
  if (n.pid <= 0) return;
  // Sessions setsid() away from the listener's group, so walk the tree: children first, then the listener.
  for (pid_t d : descendants(n.pid)) ::kill(d, SIGKILL);
  ::kill(n.pid, SIGKILL);
  ::waitpid(n.pid, nullptr, 0);
  n.pid = -1;
}

SshdCluster::~SshdCluster() {
  for (auto& n : nodes_) stop_node(n);
  std::error_code ec;
  if (!dir_.empty() && std::getenv("SPK_KEEP_SSHD_DIR") == nullptr) fs::remove_all(dir_, ec);
}

SshTarget SshdCluster::target(size_t i, const std::string& known_hosts, bool accept_new) const {
  const SshdNode& n = nodes_.at(i);
  SshTarget t;
  t.name = "node" + std::to_string(i) + "@" + n.host;
  t.host = n.host;
  t.port = n.port;
  t.identity_files = {client_key_};
  t.known_hosts = known_hosts;
  t.accept_new_host_key = accept_new;
  t.read_ssh_config = false;
  t.remote_binary = n.root + "/bin/sparkctl";
  t.connect_timeout_s = 5;
  return t;
}

Result<std::string> SshdCluster::host_fingerprint(size_t i) const {
  std::string out;
  if (run_argv({"/usr/bin/ssh-keygen", "-l", "-E", "sha256", "-f", nodes_.at(i).host_key + ".pub"}, &out) !=
      0)
    return make_error("ssh-keygen -l failed: " + out, "");
  auto a = out.find("SHA256:");
  if (a == std::string::npos) return make_error("no SHA256 in: " + out, "");
  return out.substr(a, out.find(' ', a) - a);
}

Status SshdCluster::rotate_host_key(size_t i) {
  SshdNode& n = nodes_.at(i);
  stop_node(n);
  SPK_TRY(keygen(n.host_key));
  return start_node(n);
}

Status SshdCluster::install_binary(size_t i, const std::string& binary) const {
  std::error_code ec;
  const std::string dst = nodes_.at(i).root + "/bin/sparkctl";
  fs::copy_file(binary, dst, fs::copy_options::overwrite_existing, ec);
  if (ec) return make_error("copy " + binary + " -> " + dst + ": " + ec.message(), "");
  fs::permissions(dst, fs::perms(0755), ec);
  return ok_status();
}

Result<pid_t> spawn_fake_runtime(const std::string& fake_binary, const std::string& root,
                                 const std::string& shm_dir) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("SPARKCTL_NODE_ROOT=", 0) != 0 && kv.rfind("SPK_FAKE_SHM_DIR=", 0) != 0) env.push_back(kv);
  }
  env.push_back("SPARKCTL_NODE_ROOT=" + root);
  env.push_back("SPK_FAKE_SHM_DIR=" + shm_dir);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string a0 = root + "/bin/sparkctl", a1 = "runtime", a2 = "serve", a3 = "--fake";
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::execve(fake_binary.c_str(), argv, envp.data());
    ::_exit(127);
  }
  const std::string seg = shm_dir + "/sparkctl-" + std::to_string(pid) + "-kv";
  for (int i = 0; i < 250; ++i) {
    if (fs::exists(seg)) return pid;
    int st;
    if (::waitpid(pid, &st, WNOHANG) == pid) return make_error("fake runtime exited early", fake_binary);
    std::this_thread::sleep_for(20ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return make_error("fake runtime did not create " + seg, "");
}

}  // namespace spk::testing
