// The stored GMU choice of a lane, read by `up`: <state-dir>/gmu/<lane>.json, written atomically:
//   {"lane", "model_revision", "nodes": [...], "gmu": 0.xyz, "kv_tokens": N}
// One file per lane; the (model revision, node set) it was measured for is inside, so a reader compares
// them and ignores a stale choice.
#pragma once

#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk {

struct GmuChoice {
  std::string lane;
  std::string model_revision;  // empty = unpinned / synthetic
  std::vector<std::string> nodes;
  double gmu = 0;  // 3 decimals
  int64_t kv_tokens = 0;
};

std::string gmu_choice_path(const std::string& state_dir, const std::string& lane);
Status write_gmu_choice(const std::string& state_dir, const GmuChoice& c);
Result<GmuChoice> read_gmu_choice(const std::string& state_dir, const std::string& lane);

}  // namespace spk
