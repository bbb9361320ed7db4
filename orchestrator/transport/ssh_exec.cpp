#include "orchestrator/transport/ssh_exec.h"

#include <fcntl.h>
#include <libssh/sftp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "orchestrator/transport/ssh_session.h"

namespace spk {

namespace {

using Clock = std::chrono::steady_clock;

struct ChannelGuard {
  ssh_channel ch;
  ~ChannelGuard() {
    if (!ch) return;
    if (ssh_channel_is_open(ch)) ssh_channel_close(ch);
    ssh_channel_free(ch);
  }
};

struct SftpGuard {
  sftp_session s;
  ~SftpGuard() {
    if (s) sftp_free(s);
  }
};

long ms_left(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
}

}  // namespace

SshExec::SshExec(SshTarget target) : target_(std::move(target)), name_(target_.display()) {}
SshExec::~SshExec() = default;

Status SshExec::ensure_session(int timeout_s) {
  if (session_ && session_->alive()) return ok_status();
  session_.reset();
  SPK_ASSIGN(session_, SshSession::connect(target_, timeout_s));
  return ok_status();
}

Status SshExec::connect(int timeout_s) {
  std::lock_guard lock(mu_);
  return ensure_session(timeout_s);
}

Result<ExecReply> SshExec::run(NodeVerb verb, std::string_view input, std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  const auto deadline = Clock::now() + timeout;
  const std::string verb_name(node_verb_name(verb));
  SPK_ASSIGN(std::string cmd, remote_command(target_, verb_name));
  SPK_TRY(ensure_session(static_cast<int>((timeout.count() + 999) / 1000)));
  ssh_session s = session_->raw();
  const std::string what = name_ + ": `sparkctl node " + verb_name + "`";

  ChannelGuard g{ssh_channel_new(s)};
  // ssh_free() frees the session's channels: forget ours first so that the guard does not free it twice.
  auto drop = [&] {
    g.ch = nullptr;
    session_.reset();
  };
  if (!g.ch || ssh_channel_open_session(g.ch) != SSH_OK) {
    std::string e = ssh_get_error(s);
    drop();  // a session that cannot open channels is dead: reconnect next time
    return make_error(what + ": cannot open a channel: " + e, "check the node's sshd (MaxSessions?)", true);
  }
  if (ssh_channel_request_exec(g.ch, cmd.c_str()) != SSH_OK)
    return make_error(what + ": exec refused: " + std::string(ssh_get_error(s)),
                      "check the node's sshd config", true);
  size_t off = 0;
  while (off < input.size()) {
    int n = ssh_channel_write(g.ch, input.data() + off,
                              static_cast<uint32_t>(std::min<size_t>(input.size() - off, 32768)));
    if (n < 0) break;  // the verb exited early; its exit code tells why
    off += static_cast<size_t>(n);
  }
  ssh_channel_send_eof(g.ch);

  ExecReply reply;
  std::vector<char> buf(65536);
  for (;;) {
    long left = ms_left(deadline);
    if (left <= 0) {
      drop();  // the remote verb may still run; dropping the session closes the channel hard
      return make_error(what + " did not finish within " + std::to_string(timeout.count()) + " ms",
                        "raise the call timeout or look at the node's load", true);
    }
    int n = ssh_channel_read_timeout(g.ch, buf.data(), static_cast<uint32_t>(buf.size()), 0,
                                     static_cast<int>(std::min<long>(left, 200)));
    if (n == SSH_ERROR) {
      std::string e = ssh_get_error(s);
      drop();
      return make_error(what + ": connection lost: " + e, "check the node and the network", true);
    }
    if (n > 0) reply.out.append(buf.data(), static_cast<size_t>(n));
    int m;
    while ((m = ssh_channel_read_nonblocking(g.ch, buf.data(), static_cast<uint32_t>(buf.size()), 1)) > 0)
      reply.err.append(buf.data(), static_cast<size_t>(m));
    if (n == 0 && ssh_channel_is_eof(g.ch)) break;
  }
  // Exit status arrives with (or just before) the channel close.
  reply.exit_code = ssh_channel_get_exit_status(g.ch);
  if (reply.exit_code < 0)
    return make_error(what + ": no exit status (killed by a signal?)", "look at the node's logs", true);
  return reply;
}

Status SshExec::push_file(const std::string& local_path, const std::string& remote_path, unsigned mode) {
  std::lock_guard lock(mu_);
  SPK_TRY(ensure_session(target_.connect_timeout_s));
  ssh_session s = session_->raw();
  const std::string what = name_ + ": push " + local_path + " -> " + remote_path;
  SftpGuard sftp{sftp_new(s)};
  if (!sftp.s || sftp_init(sftp.s) != SSH_OK)
    return make_error(what + ": no SFTP: " + std::string(ssh_get_error(s)),
                      "enable the sftp subsystem in the node's sshd_config (Subsystem sftp internal-sftp)");
  // mkdir -p of the parent; errors surface at open.
  for (size_t p = remote_path.find('/', 1); p != std::string::npos; p = remote_path.find('/', p + 1))
    sftp_mkdir(sftp.s, remote_path.substr(0, p).c_str(), 0755);

  int fd = ::open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(what + ": " + std::strerror(errno), "check the local binary path");
  std::random_device rd;
  const std::string tmp = remote_path + ".tmp." + std::to_string(rd() % 1000000);
  sftp_file f = sftp_open(sftp.s, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0700);
  if (!f) {
    ::close(fd);
    return make_error(what + ": cannot create " + tmp + ": " + std::string(ssh_get_error(s)),
                      "check that the node's sparkctl directory is writable by the ssh user");
  }
  std::vector<char> buf(1 << 16);  // 64 KiB per SFTP write: one request fits OpenSSH's packet limit
  bool ok = true;
  std::string why;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      why = std::string("read: ") + std::strerror(errno);
      break;
    }
    if (n == 0) break;
    for (ssize_t w = 0; w < n;) {
      ssize_t k = sftp_write(f, buf.data() + w, static_cast<size_t>(n - w));
      if (k <= 0) {
        ok = false;
        why = "write: " + std::string(ssh_get_error(s));
        break;
      }
      w += k;
    }
    if (!ok) break;
  }
  ::close(fd);
  if (sftp_close(f) != SSH_OK && ok) {
    ok = false;
    why = "close: " + std::string(ssh_get_error(s));
  }
  if (ok && sftp_chmod(sftp.s, tmp.c_str(), mode) != SSH_OK) {
    ok = false;
    why = "chmod: " + std::string(ssh_get_error(s));
  }
  if (ok) {
    sftp_unlink(sftp.s, remote_path.c_str());  // absent is fine
    if (sftp_rename(sftp.s, tmp.c_str(), remote_path.c_str()) != SSH_OK) {
      ok = false;
      why = "rename: " + std::string(ssh_get_error(s));
    }
  }
  if (!ok) {
    sftp_unlink(sftp.s, tmp.c_str());
    return make_error(what + ": " + why, "check free disk and permissions on the node", true);
  }
  return ok_status();
}

}  // namespace spk
