// CPU backend: memory, host transfer, per-step metadata. The ops live in one file each.
#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace spk::cpu {

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

Error shape_error(std::string_view op, const std::string& what) {
  return make_error(std::string(op) + ": " + what, "this is a caller bug in the model graph: report it");
}

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

Result<Tensor> CpuBackend::alloc(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  for (int64_t d : t.shape)
    if (d < 0) return shape_error("alloc", "negative dimension in " + describe(t));
  const size_t bytes = std::max<size_t>(t.nbytes(), 1);
  if (sealed_) {
    ++counts_->sealed;
    return make_error("cpu backend: " + describe(t) + " allocated after the KV pool was sized",
                      "a step outgrew the buffers reserved at startup: raise --max-num-batched-tokens or "
                      "--max-num-seqs (they size them), or report the op");
  }
  // 64-byte aligned for vector loads; zero-filled so a fresh KV pool reads as zeros.
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p)
    return make_error("cpu backend: out of memory allocating " + describe(t),
                      "use a smaller model, fewer KV blocks or a shorter batch");
  std::memset(p, 0, bytes);
  Counts& c = *counts_;
  const uint64_t live = c.live += bytes;  // the tensor's bytes, as the memory plan counts them
  ++c.allocations;
  for (uint64_t peak = c.peak.load(); live > peak && !c.peak.compare_exchange_weak(peak, live);) {
  }
  t.storage = std::shared_ptr<void>(p, [counts = counts_, bytes](void* q) {
    std::free(q);
    counts->live -= bytes;
  });
  t.data = p;
  t.device = Device::cpu;
  return t;
}

// The MoE op's host scratch at its worst: every token of the step in one expert of the widest width
// (gathered rows, gate, up, act, out), plus the (token, slot) buckets.
uint64_t CpuBackend::scratch_bytes(const StepShapes& s) const {
  if (s.moe_experts == 0) return 0;
  const uint64_t n = static_cast<uint64_t>(std::max(s.max_tokens, 0));
  return n * (2ull * s.hidden + 3ull * s.moe_max_inter) * sizeof(float) + n * s.moe_slots * sizeof(int64_t);
}

Status CpuBackend::reserve_scratch(const StepShapes& s) {
  if (s.moe_experts == 0) return ok_status();
  const size_t floats =
      static_cast<size_t>(std::max(s.max_tokens, 0)) * (2ull * s.hidden + 3ull * s.moe_max_inter);
  moe_scratch_.reserve(floats);
  return ok_status();
}

MemoryCounters CpuBackend::memory_counters() const {
  const uint64_t moe = moe_scratch_.capacity() * sizeof(float);
  return {counts_->live + moe, std::max<uint64_t>(counts_->peak, counts_->live + moe), counts_->allocations,
          counts_->sealed, sealed_};
}

Result<Tensor> CpuBackend::import_weight(const void* host, DType src_dtype, std::vector<int64_t> shape,
                                         std::shared_ptr<void> keepalive, DType want) {
  // I32: packed quantized weights (GPTQ qweight/qzeros/g_idx), referenced as they are.
  if (!is_float(src_dtype) && !(src_dtype == DType::i32 && want == DType::i32))
    return make_error(
        "import_weight: dtype " + std::string(dtype_name(src_dtype)) + " is not a float type",
        "the checkpoint must hold F32, BF16 or F16 weights (I32 only as packed quantized weights)");
  if (want == src_dtype) {  // reference the (mmapped) bytes in place
    Tensor t;
    t.data = const_cast<void*>(host);
    t.dtype = src_dtype;
    t.shape = std::move(shape);
    t.storage = std::move(keepalive);
    return t;
  }
  if (want != DType::f32)
    return make_error("import_weight: cannot convert " + std::string(dtype_name(src_dtype)) + " to " +
                          std::string(dtype_name(want)),
                      "the CPU backend holds weights as checkpoint dtype or f32");
  SPK_ASSIGN(Tensor t, alloc(DType::f32, std::move(shape)));
  load_f32(host, src_dtype, 0, t.numel(), t.ptr<float>());
  return t;
}

Status CpuBackend::upload(const Tensor& dst, const void* host, size_t bytes) {
  if (bytes > dst.nbytes())
    return shape_error("upload", std::to_string(bytes) + " bytes into " + describe(dst));
  std::memcpy(dst.data, host, bytes);
  return ok_status();
}

Status CpuBackend::download(const Tensor& src, void* host, size_t bytes) {
  if (bytes > src.nbytes())
    return shape_error("download", std::to_string(bytes) + " bytes from " + describe(src));
  std::memcpy(host, src.data, bytes);
  return ok_status();
}

Status CpuBackend::begin_step(const StepMeta& meta) {
  have_step_ = false;
  SPK_ASSIGN(token_seq_, check_step_meta(meta));
  step_ = meta;
  have_step_ = true;
  return ok_status();
}

}  // namespace spk::cpu
