// RoPE as config.json states it, in both spellings: transformers 5 writes `rope_parameters` (rope_theta,
// rope_type and the scaling fields in one object); earlier versions wrote `rope_theta` + `rope_scaling`.
// Supported rope types: default, linear, llama3, yarn. Any other type, and anything that would change the
// rotation without being implemented (partial_rotary_factor != 1, per-layer-type parameters that differ),
// is an error naming the key and the value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/model/config_reader.h"

namespace spk::rt {

struct RopeScaling {
  std::string rope_type = "llama3";             // "linear", "llama3" or "yarn"
  double factor = 8.0;                          // every type
  double low_freq_factor = 1.0;                 // llama3
  double high_freq_factor = 4.0;                // llama3
  int original_max_position_embeddings = 8192;  // llama3, yarn
  std::optional<double> attention_factor;       // yarn: multiplies cos and sin; default from factor/mscale
  double beta_fast = 32.0, beta_slow = 1.0;     // yarn
  double mscale = 0.0, mscale_all_dim = 0.0;    // yarn (DeepSeek-style attention factor)
  bool truncate = true;                         // yarn: floor/ceil the correction range
};

struct RopeConfig {
  double theta = 10000.0;
  std::optional<RopeScaling> scaling;  // empty = default rope
};

// `default_theta`: the architecture's default when no rope_theta is given anywhere.
Result<RopeConfig> parse_rope_config(const ConfigReader& r, double default_theta,
                                     int max_position_embeddings);

// inv_freq[rotary_dim / 2] as transformers computes it for the rope type (in double, rounded once).
std::vector<float> rope_inv_freq(int rotary_dim, const RopeConfig& rope);
// The factor transformers multiplies cos and sin by (yarn; 1 otherwise). q and k both carry it, so the
// attention scores carry its square: the model folds it into the softmax scale.
double rope_attention_factor(const RopeConfig& rope);

}  // namespace spk::rt
