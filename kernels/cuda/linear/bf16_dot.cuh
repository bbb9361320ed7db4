// acc + w . [x0, x1] for eight bf16 weights in one 16-byte load and eight fp32 activations, fp32 FMAs in
// element order (the GEMV and the MoE GEMV share it, so their sums round alike).
#pragma once

#include <cuda_bf16.h>

namespace spk::cuda {

__device__ __forceinline__ float dot8(const uint4& w, const float4& x0, const float4& x1, float a) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
  const float2 w0 = __bfloat1622float2(h[0]), w1 = __bfloat1622float2(h[1]);
  const float2 w2 = __bfloat1622float2(h[2]), w3 = __bfloat1622float2(h[3]);
  a = fmaf(w0.x, x0.x, a);
  a = fmaf(w0.y, x0.y, a);
  a = fmaf(w1.x, x0.z, a);
  a = fmaf(w1.y, x0.w, a);
  a = fmaf(w2.x, x1.x, a);
  a = fmaf(w2.y, x1.y, a);
  a = fmaf(w3.x, x1.z, a);
  return fmaf(w3.y, x1.w, a);
}

}  // namespace spk::cuda
