#include "orchestrator/transport/ssh_session.h"

#include <algorithm>
#include <filesystem>

namespace spk {

namespace {

std::string ssh_err(ssh_session s) { return ssh_get_error(s); }

Result<std::string> server_fingerprint(ssh_session s, const std::string& who) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(s, &key) != SSH_OK)
    return make_error(who + ": no host key from server: " + ssh_err(s), "check the node's sshd");
  unsigned char* hash = nullptr;
  size_t hlen = 0;
  int rc = ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen);
  std::string type = ssh_key_type_to_char(ssh_key_type(key));
  ssh_key_free(key);
  if (rc != 0) return make_error(who + ": cannot hash the host key", "check libssh");
  char* fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
  ssh_clean_pubkey_hash(&hash);
  std::string out = type + " " + (fp ? fp : "?");
  ssh_string_free_char(fp);
  return out;
}

Status check_host_key(ssh_session s, const SshTarget& t, std::string& fingerprint) {
  const std::string who = t.display();
  SPK_ASSIGN(fingerprint, server_fingerprint(s, who));
  const std::string kh = t.known_hosts.empty() ? "~/.ssh/known_hosts" : t.known_hosts;
  switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK:
      return ok_status();
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      return make_error(who + ": HOST KEY CHANGED: the server now presents " + fingerprint + ", which " + kh +
                            " does not have for " + t.host + ":" + std::to_string(t.port) +
                            " (possible man-in-the-middle)",
                        "if the node was reinstalled, verify the new key on its console and remove the old "
                        "line: ssh-keygen -R '[" +
                            t.host + "]:" + std::to_string(t.port) + "' -f " + kh);
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (!t.accept_new_host_key)
        return make_error(who + ": unknown host key " + fingerprint + " (not in " + kh + "); refused",
                          "verify that fingerprint on the node (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), "
                          "then pass --accept-new-host-key");
      if (!t.known_hosts.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(t.known_hosts).parent_path(), ec);
      }
      if (ssh_session_update_known_hosts(s) != SSH_OK)
        return make_error(who + ": cannot record host key in " + kh + ": " + ssh_err(s),
                          "check that the known_hosts file is writable");
      return ok_status();
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      return make_error(who + ": cannot check the host key against " + kh + ": " + ssh_err(s),
                        "check the known_hosts file (a corrupt line?)");
  }
}

Status authenticate(ssh_session s, const SshTarget& t) {
  const std::string who = t.display();
  if (!t.identity_files.empty()) {
    std::string tried;
    for (const auto& path : t.identity_files) {
      ssh_key key = nullptr;
      if (ssh_pki_import_privkey_file(path.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
        tried += " " + path + " (unreadable or passphrase-protected)";
        continue;
      }
      int rc = ssh_userauth_publickey(s, nullptr, key);
      ssh_key_free(key);
      if (rc == SSH_AUTH_SUCCESS) return ok_status();
      tried += " " + path + " (rejected)";
    }
    return make_error(
        who + ": key authentication failed for user '" + (t.user.empty() ? "<current>" : t.user) +
            "':" + tried,
        "add the public key to the node's authorized_keys or fix the inventory's identity file");
  }
  int rc = ssh_userauth_publickey_auto(s, nullptr, nullptr);  // ssh-agent, then ~/.ssh/id_*
  if (rc == SSH_AUTH_SUCCESS) return ok_status();
  return make_error(who + ": no key accepted (ssh-agent and ~/.ssh/id_* tried): " + ssh_err(s),
                    "load a key into ssh-agent or set the node's identity file in the inventory");
}

bool safe_path_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '+' || c == '/' || c == '-';
}

}  // namespace

SshSession::~SshSession() {
  if (s_) {
    if (ssh_is_connected(s_)) ssh_disconnect(s_);
    ssh_free(s_);
  }
}

bool SshSession::alive() const { return s_ && ssh_is_connected(s_); }

Result<std::unique_ptr<SshSession>> SshSession::connect(const SshTarget& t, int timeout_s) {
  const std::string who = t.display();
  ssh_session raw = ssh_new();
  if (!raw) return make_error(who + ": ssh_new failed", "out of memory?", true);
  std::unique_ptr<SshSession> sess(new SshSession(raw));
  long timeout = std::max(1, std::min(timeout_s, t.connect_timeout_s));
  unsigned port = static_cast<unsigned>(t.port);
  bool process_config = t.read_ssh_config;
  int verbosity = SSH_LOG_NOLOG;
  ssh_options_set(raw, SSH_OPTIONS_LOG_VERBOSITY, &verbosity);
  ssh_options_set(raw, SSH_OPTIONS_PROCESS_CONFIG, &process_config);
  if (ssh_options_set(raw, SSH_OPTIONS_HOST, t.host.c_str()) != SSH_OK)
    return make_error(who + ": bad host '" + t.host + "'", "fix the node's address in the inventory");
  ssh_options_set(raw, SSH_OPTIONS_PORT, &port);
  ssh_options_set(raw, SSH_OPTIONS_TIMEOUT, &timeout);
  // Nagle + delayed ACK costs ~40 ms per request/answer turn (every SFTP write, every small exec).
  int nodelay = 1;
  ssh_options_set(raw, SSH_OPTIONS_NODELAY, &nodelay);
  if (!t.user.empty()) ssh_options_set(raw, SSH_OPTIONS_USER, t.user.c_str());
  if (!t.known_hosts.empty()) {
    ssh_options_set(raw, SSH_OPTIONS_KNOWNHOSTS, t.known_hosts.c_str());
    ssh_options_set(raw, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");  // one explicit file, nothing else
  }
  if (ssh_connect(raw) != SSH_OK)
    return make_error(
        who + ": cannot connect to " + t.host + ":" + std::to_string(t.port) + ": " + ssh_err(raw),
        "check that sshd runs on the node and the inventory's host/port are right", true);
  SPK_TRY(check_host_key(raw, t, sess->fingerprint_));
  SPK_TRY(authenticate(raw, t));
  return sess;
}

Result<std::string> remote_command(const SshTarget& t, std::string_view verb) {
  const std::string& p = t.remote_binary;
  if (p.empty() || p[0] != '/' || !std::all_of(p.begin(), p.end(), safe_path_char))
    return make_error(
        t.display() + ": remote sparkctl path '" + p + "' must be absolute and use only [A-Za-z0-9._+/-]",
        "set the node's sparkctl path to a plain absolute path");
  return p + " node " + std::string(verb);
}

}  // namespace spk
