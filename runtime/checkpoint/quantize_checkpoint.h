// `sparkctl dev quantize`: a GPTQ 4-bit checkpoint, or the same weights as compressed-tensors pack-quantized
// (round-to-nearest, the layout GPTQ/AutoGPTQ/transformers write: kernels/formats/gptq_int4.h) from an
// unquantized Hugging Face checkpoint, and optionally the fp32 checkpoint whose linear weights are exactly
// the dequantized values, so a test can compare the quantized model with a dense one that must give the same
// logits to fp32 rounding.
//
// Quantized: every 2-D linear weight of attention (q/k/v/o_proj) and the MLP (gate/up/down_proj, MoE
// experts' and shared experts' gate/up/down_proj or w1/w2/w3) whose out and in are multiples of 8; others
// of that kind are left dense and listed in modules_to_not_convert. Kept as they are: embeddings, norms,
// lm_head, MoE routers, biases. Tokenizer and generation files are copied; config.json is written last.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base/status.h"

namespace spk::rt {

struct QuantizeOptions {
  std::string in_dir;
  std::string out_dir;
  std::string dequantized_out;  // "" = none
  // "gptq" (qweight/qzeros/scales/g_idx) or "compressed-tensors" (pack-quantized: weight_packed/
  // weight_scale/weight_shape[/weight_zero_point/weight_g_idx],
  // runtime/checkpoint/quantize_compressed_tensors.h)
  std::string format = "gptq";
  int group_size = 128;  // -1 = one group per row
  bool desc_act =
      false;        // emit an act-order g_idx (a fixed column permutation of the groups; actorder group)
  bool sym = true;  // false: min/max zero points
  uint64_t max_shard_bytes = 2ull << 30;
};

struct QuantizeReport {
  size_t quantized = 0;  // linear modules written as GPTQ
  size_t dense = 0;      // tensors copied as they are
  uint64_t bytes_in = 0, bytes_out = 0;
};

Result<QuantizeReport> quantize_checkpoint(const QuantizeOptions& o);

}  // namespace spk::rt
