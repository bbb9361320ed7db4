// GPTQ 4-bit weights (W4A16), the CPU twin of WeightFormat::gptq_int4: the layout exactly as GPTQ,
// AutoGPTQ and transformers write it, its checks, an exact dequantizer, a CPU linear and a round-to-nearest
// quantizer (for `sparkctl dev quantize` and tests).
//
// Layout of one linear layer W [out, in] (LinearWeight fields in brackets):
//   qweight [values] i32 [in/8, out]: packed along the input dim, low nibble first: input row c = 8*i + j
//                    of column o is bits [4j, 4j+4) of qweight[i][o].
//   qzeros  [zeros]  i32 [groups, out/8]: packed along out, low nibble first; stores zero - 1 (GPTQ v1
//                    checkpoints), so the zero point is stored + 1.
//   scales  [scales] f16 [groups, out].
//   g_idx   [g_idx]  i32 [in], optional (act-order / desc_act): the group of input column c; without it
//                    the group of c is c / group_size.
// groups = ceil(in / group_size); group_size -1 in config.json means one group (group_size = in here).
// Dequant: W[o][c] = scale[g][o] * (q[c][o] - (z[g][o] + 1)), g = g_idx[c]; the integer difference is
// exact, so the value is one fp32 multiply of the f16 scale: dequantize() and the linear agree bit for bit
// on W, and the linear equals x . dequantize(W)^T up to fp32 summation order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/formats/linear_weight.h"

namespace spk {
namespace cpu {
class ThreadPool;
}

// Scale groups of `in` input columns at `group_size` (<= 0: one group).
int64_t gptq_groups(int64_t in, int group_size);

// Shapes and dtypes of w's tensors against w.out, w.in, w.group_size (and g_idx's values against the
// group count). `name` is the module prefix ("model.layers.0.mlp.down_proj"); the error names the tensor,
// the format and the expected shape.
Status check_gptq_layout(const LinearWeight& w, const std::string& name);

// out[o * in + c] = W[o][c] in fp32 (w on the host; layout checked).
void gptq_dequantize(const LinearWeight& w, float* out);

// y[n, out] = x[n, in] . W^T (+ bias[out]); x, y, bias f32 on the host. Parallel over blocks of output
// columns: each block is dequantized once into a small per-thread fp32 buffer, then dotted with every row.
Status gptq_int4_linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& y,
                        cpu::ThreadPool& pool);

// A quantized layer as host vectors, in the checkpoint layout above.
struct GptqTensors {
  int64_t out = 0, in = 0;
  int group_size = 0;            // effective: `in` when asked for one group
  std::vector<int32_t> qweight;  // [in/8, out]
  std::vector<int32_t> qzeros;   // [groups, out/8]
  std::vector<uint16_t> scales;  // [groups, out] f16 bits
  std::vector<int32_t>
      g_idx;               // [in] (always written; the identity grouping c / group_size without act order)
  bool act_order = false;  // g_idx is a permuted grouping (desc_act)
  [[nodiscard]] int64_t groups() const { return gptq_groups(in, group_size); }
};

// Round-to-nearest 4-bit quantization of w [out, in] (fp32, row-major); out and in multiples of 8.
// group_size <= 0: one group. sym: zero 8 and scale 2*max|w|/15 (GPTQ's symmetric grid); else min/max
// (zero clamped to [1, 15] so zero - 1 fits the v1 nibble). act_order_perm: the columns are grouped in a
// fixed permuted order (column perm[k] joins group k / group_size), as desc_act checkpoints are.
GptqTensors gptq_quantize_rtn(const float* w, int64_t out, int64_t in, int group_size, bool sym,
                              bool act_order_perm);

// A LinearWeight{gptq_int4} viewing t's vectors (host tensors; t must outlive it). with_g_idx false
// leaves g_idx empty (the checkpoint has none: group = c / group_size).
LinearWeight gptq_host_weight(const GptqTensors& t, bool with_g_idx);

}  // namespace spk
