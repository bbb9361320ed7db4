// Importing weights: the checkpoint's bytes into the dtype the kernels read (the repack hook of a
// weight format lands here).
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

// Weights are carved from slabs of kWeightSlab bytes (kWeightAlign-aligned) instead of one cudaMalloc each:
// cudaMalloc gives every allocation whole 2 MiB pages, so a checkpoint of many small tensors (Qwen3-30B-A3B:
// 18,432 expert matrices of 3 MiB) would spend a third more device memory than its bytes, which the memory
// plan does not see. Tensors of a quarter slab or more get their own allocation (under 4 % rounding).
Status CudaBackend::weight_storage(std::shared_ptr<void>& out, size_t bytes, const std::string& what) {
  if (bytes >= kWeightSlab / 4) return dev_alloc(out, bytes, what);
  size_t off = (slab_used_ + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
  if (!slab_ || off + bytes > kWeightSlab) {
    SPK_TRY(dev_alloc(slab_, kWeightSlab, "a weight slab (for " + what + ")"));
    off = 0;
  }
  slab_used_ = off + bytes;
  out = std::shared_ptr<void>(slab_, static_cast<char*>(slab_.get()) + off);  // keeps the slab alive
  return ok_status();
}

Result<Tensor> CudaBackend::import_weight(const void* host, DType src, std::vector<int64_t> shape,
                                          std::shared_ptr<void> keepalive, DType want) {
  const bool to_bf16 = want == DType::bf16 && (src == DType::f16 || src == DType::f32);
  if (want != src && want != DType::f32 && !to_bf16)
    return op_error("import_weight", std::string("cannot convert ") + std::string(dtype_name(src)) + " to " +
                                         std::string(dtype_name(want)));
  Tensor t;
  t.dtype = want;
  t.shape = std::move(shape);
  t.device = Device::cuda;
  SPK_TRY(
      weight_storage(t.storage, t.nbytes(), "weight " + describe(t)));  // no zero fill: the copy writes all
  t.data = t.storage.get();
  if (want == src) {
    // Parallel pinned copies; every sync point waits for them (flush()). Without a keepalive the
    // caller's bytes may go as soon as we return: wait here.
    if (!loader_) loader_ = std::make_unique<WeightLoader>();
    loader_->copy(t.data, host, t.nbytes(), keepalive);
    if (!keepalive) SPK_TRY(loader_->wait());
    return t;
  }
  if (to_bf16) {  // f16 / f32 checkpoint: the GEMV and GEMM kernels read bf16 weights
    if (!warned_conversion_)
      std::fprintf(stderr, "cuda backend: converting %s weights to bf16 at load (the kernels read bf16)\n",
                   std::string(dtype_name(src)).c_str());
    warned_conversion_ = true;
    std::vector<uint16_t> b(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = f32_to_bf16(src == DType::f32 ? static_cast<const float*>(host)[i]
                                           : f16_to_f32(static_cast<const uint16_t*>(host)[i]));
    SPK_CUDA_CHECK(cudaMemcpy(t.data, b.data(), t.nbytes(), cudaMemcpyHostToDevice));
    return t;
  }
  std::vector<float> f(static_cast<size_t>(t.numel()));
  const auto* h = static_cast<const uint16_t*>(host);
  for (size_t i = 0; i < f.size(); ++i) {
    if (src == DType::bf16)
      f[i] = bf16_to_f32(h[i]);
    else if (src == DType::f16)
      f[i] = f16_to_f32(h[i]);
    else
      return op_error("import_weight", "unsupported source dtype " + std::string(dtype_name(src)));
  }
  SPK_CUDA_CHECK(cudaMemcpy(t.data, f.data(), t.nbytes(), cudaMemcpyHostToDevice));
  return t;
}

}  // namespace spk::cuda
