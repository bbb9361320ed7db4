#include "orchestrator/transport/remote_exec.h"

namespace spk {

namespace {
std::string head(const std::string& s, size_t n = 300) {
  std::string h = s.substr(0, n);
  while (!h.empty() && (h.back() == '\n' || h.back() == '\r')) h.pop_back();
  return s.size() > n ? h + "..." : h;
}
}  // namespace

Result<NodeAnswer> call_node(RemoteExec& exec, NodeVerb verb, const nlohmann::json& input,
                             std::chrono::milliseconds timeout) {
  SPK_ASSIGN(ExecReply reply, exec.run(verb, input.dump(), timeout));
  const std::string what = exec.node() + ": `sparkctl node " + std::string(node_verb_name(verb)) + "`";
  if (reply.exit_code == 127)
    return make_error(what + " exited 127 (binary missing?): " + head(reply.err),
                      "push the binary first (push_binary) or fix the node's sparkctl path");
  nlohmann::json body = nlohmann::json::parse(reply.out, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object())
    return make_error(what + " exited " + std::to_string(reply.exit_code) +
                          " without one JSON object on stdout: stdout='" + head(reply.out) + "' stderr='" +
                          head(reply.err) + "'",
                      "check that the node runs the same sparkctl version (it is pushed when it differs)");
  return NodeAnswer{reply.exit_code, std::move(body), std::move(reply.err)};
}

}  // namespace spk
