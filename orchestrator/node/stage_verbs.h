// Node verbs of weight staging (orchestrator/staging):
//   stage-recv   {root, token, bind?, port?, max_bytes?, idle_timeout_s?}
//                -> {ok, port, files, bytes_received, blocks_rejected}; serves one push (push.h) into
//                   `root` and returns when it ends. stderr gets "stage-recv: listening on HOST:PORT".
//   stage-verify {dir, expect?: [{path, size, xxh3?}], prune?: bool} -> VerifyReport JSON; exit 1 when
//   incomplete. Files `expect` does not list are problems, or with prune removed (listed in "removed").
#pragma once

#include <nlohmann/json.hpp>

#include "orchestrator/node/node_verbs.h"

namespace spk {

VerbOutput run_stage_recv(const nlohmann::json& in, const NodeEnv& env);
VerbOutput run_stage_verify(const nlohmann::json& in, const NodeEnv& env);

}  // namespace spk
