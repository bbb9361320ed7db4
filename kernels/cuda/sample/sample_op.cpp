// Sampling on the device: only ids (and logprobs) come back; rows it cannot decide go back to the host.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

Status CudaBackend::sample(const Tensor& logits, const std::vector<SampleRow>& rows,
                           std::vector<SampledToken>& out) {
  const int m = static_cast<int>(rows.size());
  if (logits.dtype != DType::f32 || logits.device != Device::cuda || logits.rank() != 2 || logits.dim(0) != m)
    return op_error("sample", "logits " + describe(logits) + " for " + std::to_string(m) + " rows");
  const int vocab = static_cast<int>(logits.dim(1));
  out.assign(rows.size(), SampledToken{});
  if (m == 0) return ok_status();
  SPK_TRY(ensure_sample(static_cast<size_t>(m)));
  // Parameters and results live in pinned host memory at fixed addresses, which the kernel reads and
  // writes itself (unified addressing): the step's graph ends with it, no copy nodes around it.
  auto* ph = static_cast<DeviceSampleRow*>(sample_h_);
  auto* oh = reinterpret_cast<DeviceSampleOut*>(ph + sample_cap_);
  for (int i = 0; i < m; ++i) {
    const SampleRow& r = rows[i];
    ph[i] = DeviceSampleRow{r.temperature,          r.top_k,       r.top_p, r.min_p, r.u,
                            r.want_logprob ? 1 : 0, r.host ? 1 : 0};
  }
  const float* lp = logits.ptr<float>();
  unsigned long long* am = fuse_argmax_into_gemv(lp, m, vocab);  // greedy rows read it
  launch(OpId::sample, sample_rows, lp, m, vocab, ph, oh, kStream, am);
  const auto t1 = std::chrono::steady_clock::now();
  SPK_TRY(flush());
  SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const auto t2 = std::chrono::steady_clock::now();
  if (stats_) {
    host_us_.push_back(std::chrono::duration<double, std::micro>(t1 - step_t0_).count());
    device_us_.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    sampled_at_ = std::chrono::steady_clock::now();
  }
  for (int i = 0; i < m; ++i) out[i] = SampledToken{oh[i].id, oh[i].logprob, oh[i].host != 0};
  return ok_status();
}

// sample()'s pinned rows (parameters and results, read and written by the kernel) and the lm_head
// GEMV's argmax keys, for `rows` rows.
Status CudaBackend::ensure_sample(size_t rows) {
  if (rows <= sample_cap_) return ok_status();
  const size_t cap = sample_capacity(rows);
  SPK_TRY(before_move());  // the step's graph may read the old rows
  argmax_.reset();
  SPK_TRY(dev_alloc(argmax_, cap * kArgmaxSlots * sizeof(unsigned long long),
                    "the sampler's rows for " + std::to_string(rows) + " sequences"));
  SPK_CUDA_CHECK(cudaMemset(argmax_.get(), 0, cap * kArgmaxSlots * sizeof(unsigned long long)));
  if (sample_h_) cudaFreeHost(sample_h_);
  sample_h_ = nullptr;
  SPK_CUDA_CHECK(cudaMallocHost(&sample_h_, cap * (sizeof(DeviceSampleRow) + sizeof(DeviceSampleOut))));
  sample_cap_ = cap;
  return ok_status();
}

}  // namespace spk::cuda
