// RemoteExec: run `sparkctl node <verb>` on one node with bytes on stdin; get stdout, stderr and the exit
// code back. LocalExec (fork/exec, no shell) and SshExec (libssh, one channel per call) implement it; tests
// may swap in fakes. Node verbs answer one JSON object on stdout and exit 0 ok / 1 failed check / 2 bad
// input.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kernels/base/status.h"
#include "orchestrator/transport/node_verb.h"

namespace spk {

// What the node process said. A verb that ran and failed is a reply (exit 1/2), not an Error.
struct ExecReply {
  int exit_code = -1;  // the verb's exit status; 127 = the remote binary is missing
  std::string out;     // stdout bytes
  std::string err;     // stderr bytes (logs, diagnostics)
};

// A reply whose stdout parsed as one JSON object.
struct NodeAnswer {
  int exit_code = -1;
  nlohmann::json body;  // always an object
  std::string err;
};

class RemoteExec {
 public:
  virtual ~RemoteExec() = default;

  // Name used in every message: "node-b", "127.0.0.3:2201".
  [[nodiscard]] virtual const std::string& node() const = 0;

  // Runs the node verb with `input` on stdin; the whole call (connect, exec, read) must end within
  // `timeout`, else a retryable Error. Errors mean the call itself failed (spawn, connect, host key, auth).
  virtual Result<ExecReply> run(NodeVerb verb, std::string_view input, std::chrono::milliseconds timeout) = 0;
};

// run() with `input` as JSON, parsing stdout as one JSON object. A non-JSON stdout is an Error that quotes
// the first bytes of stdout and stderr (a missing binary answers 127 and a shell message).
Result<NodeAnswer> call_node(RemoteExec& exec, NodeVerb verb, const nlohmann::json& input,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace spk
