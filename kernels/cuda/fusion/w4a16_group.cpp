// Fusion rule "W4A16 grouping" (off with the GEMV grouping: SPARKCTL_GEMV_GROUP=0): GPTQ int4 linears that
// read the same x one after the other (q, k, v; gate, up) run as one launch: one bias/zero pass over all
// their outputs and one GEMV grid over all their column blocks (linear/w4a16.cu). grouped == alone:
// tests/gpu/backend_ops_test.cpp (LinearGptqInt4Grouped, against the CPU twin).
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

// A W4A16 launch just queued alone (after launch(), which forgets the peepholes): later linears on the same x
// may join it.
void CudaBackend::remember_w4a16(const W4A16Op& op) { ph_.w4a16 = op; }

bool CudaBackend::fuse_w4a16_group(const W4A16Segment& seg, const float* x, int m) {
  W4A16Op& o = ph_.w4a16;
  if (grouping_off_ || o.g.n == 0 || o.g.n >= kW4A16MaxGroup || o.x != x || o.m != m) return false;
  const W4A16Weight& w0 = o.g.segs[0].w;
  if (seg.w.K != w0.K || seg.w.group_size != w0.group_size || seg.y == x) return false;
  // The launch writes every output before it reads any bias: no output may be another segment's bias.
  for (int i = 0; i < o.g.n; ++i)
    if (o.g.segs[i].y == seg.y || o.g.segs[i].bias == seg.y || o.g.segs[i].y == seg.bias) return false;
  o.g.segs[o.g.n++] = seg;
  relaunch(OpId::linear_w4a16, launch_w4a16, o, kStream);
  return true;
}

}  // namespace spk::cuda
