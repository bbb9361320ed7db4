// The linear chooser: decode batches up to `gemv_max` rows (SPARKCTL_GEMV_MAX_BATCH, default 2) take the
// GEMV, larger ones cuBLASLt. Measured on the H200 (8B shapes, PERF_NOTES.md v2): batch 2 GEMV 5.47 vs
// cuBLASLt 5.93 ms/step; batch 4 6.78 vs 6.18; batch 8 13.8 vs 6.46 (the GEMV re-reads x per row group
// from L1 and falls to ~27 % of bandwidth at batch 8). The GEMV needs K % 8 == 0 (16-byte loads).
#pragma once

namespace spk::cuda {

inline bool linear_uses_gemv(int M, long long K, int gemv_max) { return M <= gemv_max && K % 8 == 0; }

}  // namespace spk::cuda
