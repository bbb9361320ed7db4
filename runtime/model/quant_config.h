// A checkpoint's weight quantization, from config.json's `quantization_config` (or, for older GPTQ
// exports, a `quantize_config.json` beside it). This build loads GPTQ 4-bit (W4A16, checkpoint_format
// gptq) and compressed-tensors `pack-quantized` int 4-bit weight-only (W4A16: strategy group or channel,
// sym or asym, actorder null/group/weight), the latter converted at load into the GPTQ layout
// (runtime/model/linear_compressed_tensors.h); every other method, format or bit width is refused by name
// at config time, never loaded as bf16.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::rt {

struct QuantConfig {
  std::string method = "gptq";  // quant_method: "gptq" or "compressed-tensors"
  std::string format;           // compressed-tensors: "pack-quantized"
  std::string actorder;         // compressed-tensors: "" (none), "group" (g_idx) or "weight" (no g_idx)
  int bits = 4;
  int group_size = 128;  // -1: one group over the whole input dim
  bool sym = true;
  bool desc_act = false;  // act order: the checkpoint's g_idx permutes the groups
  // Modules left dense (HF names or suffixes: "lm_head", "model.layers.0.mlp.gate"). The LM head, the
  // embedding, norms and MoE routers are always read dense.
  // compressed-tensors' `ignore` lands here too; its "re:<pattern>" entries go to ignore_regex (the
  // pattern, matched from the start of the module name as Python's re.match does).
  std::vector<std::string> modules_to_not_convert;
  std::vector<std::string> ignore_regex;
  std::string path;  // the file it came from, for messages

  // Whether the linear module `prefix` ("model.layers.3.self_attn.q_proj") is stored quantized.
  [[nodiscard]] bool quantizes(const std::string& prefix) const;
  // "gptq 4-bit, group 128, sym, desc_act" (or "compressed-tensors pack-quantized 4-bit, ...") for logs.
  [[nodiscard]] std::string describe() const;
};

// `q` is a quantization_config object (or a quantize_config.json's top level) read from `path`.
// Errors name the file, the key, the value and what this build loads.
Result<QuantConfig> parse_quant_config(const nlohmann::json& q, const std::string& path);

// config.json's quantization_config when present, else `dir`/quantize_config.json when that file exists,
// else nullopt (an unquantized checkpoint). `config` is config.json's parsed top level.
Result<std::optional<QuantConfig>> find_quant_config(const nlohmann::json& config,
                                                     const std::string& config_path, const std::string& dir);

}  // namespace spk::rt
