#include "orchestrator/transport/binary_push.h"

#include <filesystem>

#include "orchestrator/transport/file_hash.h"
#include "orchestrator/transport/local_exec.h"

namespace spk {

namespace {
std::string node_hash(SshExec& exec) {
  auto ans = call_node(exec, NodeVerb::kVersion, nlohmann::json::object(), std::chrono::seconds(20));
  if (!ans.ok() || ans->exit_code != 0) return {};
  return ans->body.value("binary_xxh3", std::string());
}
}  // namespace

Result<PushOutcome> ensure_node_binary(SshExec& exec, const std::string& local_binary) {
  std::string local = local_binary;
  if (local.empty()) {
    SPK_ASSIGN(local, self_executable());
  }
  PushOutcome out;
  SPK_ASSIGN(out.hash, file_xxh3_hex(local));
  SPK_TRY(exec.connect(exec.target().connect_timeout_s));  // host key / auth errors are not "missing binary"
  out.hash_before = node_hash(exec);
  if (out.hash_before == out.hash) return out;
  SPK_TRY(exec.push_file(local, exec.target().remote_binary, 0755));
  std::error_code ec;
  out.bytes = static_cast<size_t>(std::filesystem::file_size(local, ec));
  out.pushed = true;
  std::string after = node_hash(exec);
  if (after != out.hash)
    return make_error(exec.node() + ": pushed sparkctl to " + exec.target().remote_binary +
                          " but the node reports hash '" + after + "', want " + out.hash,
                      "check the node's disk and that nothing else rewrites that path");
  return out;
}

}  // namespace spk
