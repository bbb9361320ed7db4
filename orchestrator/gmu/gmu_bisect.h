// GMU bisection: the window of gpu-memory-utilization values where the runtime boots and its KV pool
// holds at least kv_target tokens. Analytic first: the planner's budget is linear in G
// (device x G - fixed), so two dry runs give the line and the smallest G (3 decimals) meeting the target
// is solved for, then checked with one more dry run. Then real boots, climbing from below: boot at G*;
// on a clean too-high or a pool short of the target, climb by `step`; after the first good boot, one
// boot a step above proves headroom. A dangerous failure stops climbing at once. G whose budget would
// leave the node less than mem_floor bytes of MemAvailable is refused, never booted (unified memory:
// a too-high G can wedge the host).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "orchestrator/gmu/gmu_probe.h"

namespace spk {

struct BisectOptions {
  double min_gmu = 0.70;
  double max_gmu = 0.95;
  int64_t kv_target = 0;    // tokens; 0 = one max_model_len request
  double step = 0.01;       // climb step of the confirming boots
  int max_boots = 4;        // real boots at most
  bool confirm = true;      // false = analytic only (no boots)
  bool apply_floor = true;  // unified memory (or CPU, where RAM is the device)
  uint64_t mem_floor_bytes = 8ull << 30;
};

struct BisectRow {
  double gmu = 0;
  std::string source;       // "dry-run" or "boot"
  std::string outcome;      // "fits", "short", "refused", "booted", "clean_too_high", "dangerous", "floor"
  int64_t kv_tokens = -1;   // -1 = unknown
  double headroom_gib = 0;  // MemAvailable left after the budget (floor applies) else device x (1 - G)
  std::string detail;
};

struct BisectReport {
  std::vector<BisectRow> rows;
  double analytic_gmu = 0;  // solved from the dry runs
  double chosen_gmu = 0;    // confirmed by a boot (or analytic_gmu when confirm is off)
  int64_t chosen_kv_tokens = 0;
  double window_max_gmu = 0;  // highest G seen to boot (0 = none above the chosen)
  int boots = 0;
  int64_t kv_target = 0;
  std::vector<std::string> notes;

  [[nodiscard]] nlohmann::json to_json() const;
  [[nodiscard]] std::string to_table() const;
};

// Err when no G in [min, max] meets the target, a dangerous boot happened before any good one, the
// floor caps below the target, or the boot budget ran out; the message names the values and the knob.
Result<BisectReport> bisect_gmu(GmuProbe& probe, const BisectOptions& opt);

// ceil to 3 decimals, robust to 0.7000000001-style noise.
double ceil_milli(double g);

}  // namespace spk
