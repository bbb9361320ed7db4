// Head side of preflight: run `node preflight` on every node (in parallel, one thread per node) and merge
// the answers into one report and one table. A node that cannot be reached is a failed "reach" row.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "orchestrator/transport/remote_exec.h"

namespace spk {

struct PreflightRow {
  std::string node, check, status, detail, fix;  // status: ok | fail | skip
};

struct PreflightReport {
  std::vector<PreflightRow> rows;           // node order as given, checks in the node's order
  bool ok = true;                           // no row failed
  [[nodiscard]] std::string table() const;  // aligned NODE CHECK STATUS DETAIL columns + fixes of failures
};

// `input` is sent to every node (see orchestrator/node/preflight.h for its keys).
// `input` goes to every node; its optional "model_dirs" {node name: dir} becomes each node's "model_dir".
PreflightReport run_preflight_all(const std::vector<RemoteExec*>& nodes, const nlohmann::json& input,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(60));

// One node's answer (or transport error) as rows; exposed for tests.
void append_preflight_rows(PreflightReport& report, const std::string& node,
                           const Result<NodeAnswer>& answer);

}  // namespace spk
