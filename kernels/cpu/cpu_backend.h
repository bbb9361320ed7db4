// The CPU reference backend (internal header; users go through kernels/backend.h). fp32 math,
// weights read in their checkpoint dtype and converted in the inner loop; obviously correct first,
// then fast enough for a tiny model to decode at interactive speed.
#pragma once

#include <atomic>
#include <memory>

#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"

namespace spk::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}

  [[nodiscard]] std::string_view name() const override { return "cpu"; }
  [[nodiscard]] Device device() const override { return Device::cpu; }
  using Backend::supports;
  [[nodiscard]] bool supports(WeightFormat f) const override {
    return f == WeightFormat::dense || f == WeightFormat::gptq_int4;
  }
  // moe_ffn runs each expert through linear(), so every linear format is an expert format.
  [[nodiscard]] bool supports_experts(WeightFormat f) const override { return supports(f); }
  [[nodiscard]] bool supports(AttnKind) const override { return true; }  // causal, sliding, mla

  Result<Tensor> alloc(DType dtype, std::vector<int64_t> shape) override;
  Result<Tensor> import_weight(const void* host, DType src_dtype, std::vector<int64_t> shape,
                               std::shared_ptr<void> keepalive, DType want) override;
  Status upload(const Tensor& dst, const void* host, size_t bytes) override;
  Status download(const Tensor& src, void* host, size_t bytes) override;
  Status begin_step(const StepMeta& meta) override;

  Status embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  Status rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  Status add_rmsnorm(Tensor& residual, const Tensor& delta, const Tensor& w, float eps, Tensor& out) override;
  Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& y) override;
  Status rope(Tensor& q, Tensor& k, const Tensor& inv_freq) override;
  Status kv_write(const Tensor& k, const Tensor& v, KvCache& cache) override;
  Status attention(const Tensor& q, const KvCache& cache, const AttnSpec& spec, Tensor& out) override;
  Status mla_rope(Tensor& q, Tensor& k_pe, const Tensor& inv_freq, const AttnSpec& spec) override;
  Status mla_kv_write(const Tensor& latent, const Tensor& k_pe, KvCache& cache,
                      const AttnSpec& spec) override;
  Status mla_attention(const Tensor& q, const KvCache& cache, const Tensor& kv_b, const AttnSpec& spec,
                       Tensor& out) override;
  Status silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) override;
  Status gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  Status moe_ffn(const Tensor& x, const std::vector<ExpertWeights>& experts, const Tensor& ids,
                 const Tensor& w, Tensor& out) override;

  // Host RAM is this backend's device: alloc() and the MoE op's scratch are counted, and sealed.
  [[nodiscard]] uint64_t scratch_bytes(const StepShapes& shapes) const override;
  Status reserve_scratch(const StepShapes& shapes) override;
  void seal_memory() override { sealed_ = true; }
  [[nodiscard]] MemoryCounters memory_counters() const override;

  ThreadPool& pool() { return pool_; }

 private:
  ThreadPool pool_;
  StepMeta step_;
  std::vector<int32_t> token_seq_;  // per new token: index into step_.seqs
  bool have_step_ = false;
  std::vector<float> moe_scratch_;  // moe_ffn: one expert's gathered rows and intermediates
  bool sealed_ = false;
  // Shared with every allocation's deleter, which may run after the backend is gone.
  struct Counts {
    std::atomic<uint64_t> live{0}, peak{0}, allocations{0}, sealed{0};
  };
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();
};

std::unique_ptr<Backend> make_cpu_backend(int threads);

// Error "<op>: <what> (got <shapes>)" with the fix that applies to every shape error: a caller bug.
Error shape_error(std::string_view op, const std::string& what);
bool is_float(DType t);

// dst[0..n) = src elements [offset, offset+n) of a float tensor (f32/bf16/f16) as fp32.
inline void load_f32(const void* src, DType dt, int64_t offset, int64_t n, float* dst) {
  switch (dt) {
    case DType::f32: {
      const float* s = static_cast<const float*>(src) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      break;
    }
    case DType::bf16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      break;
    }
    case DType::f16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      break;
    }
    default:
      break;
  }
}

}  // namespace spk::cpu
