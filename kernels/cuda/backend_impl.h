// The CUDA backend's class (internal header): memory, stream, step metadata and flush/submit live in
// cuda_backend.cpp; each op family has its own file and folder beside its kernels:
//   linear/       linear_op.cpp (GEMV / cuBLASLt), weight_import.cpp (the load-time repack hook)
//   attention/    attention_op.cpp, select.cpp (which kernel, how many splits)
//   kv/           kv_op.cpp (rope, cache write)
//   moe/          moe_op.cpp (routing, expert FFN)
//   sample/       sample_op.cpp
//   elementwise/  elementwise_op.cpp (embedding, norms, silu_mul, gather)
//   fusion/       peepholes.h: the remembered state of the fusion rules
// Every op is queued (launch) with a fingerprint made of its launch arguments (fingerprint.h); the graph
// queue replays a step whose fingerprints repeat as one CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/fingerprint.h"
#include "kernels/cuda/fusion/peepholes.h"
#include "kernels/cuda/graph_queue.h"
#include "kernels/cuda/linear/gemm.h"
#include "kernels/cuda/moe/moe_ffn.h"
#include "kernels/cuda/op_ids.h"
#include "kernels/cuda/scratch_plan.h"
#include "kernels/cuda/weight_loader.h"
#include "kernels/knobs.h"

namespace spk::cuda {

static_assert(kMaxSampleCandidates == kMaxDeviceSampleCandidates, "sample.cu's window is the seam's");

// Steps of more tokens than this (prefill chunks) are never captured as graphs.
constexpr int kMaxGraphTokens = 512;

// Small uploads (ids, rows, sampling parameters) go through a pinned arena and are queued in op order,
// so a decode step is one graph launch with its host inputs as memcpy nodes; larger ones sync.
constexpr size_t kArenaBytes = size_t{1} << 20;
constexpr size_t kMaxQueuedUpload = size_t{64} << 10;
// Backend::submit() launches what is queued once a step has this many ops after its first chunk
// (SPARKCTL_FIRST_CHUNK_OPS, default 8: about one layer), about eight layers of an 8B model.
constexpr size_t kChunkOps = 64;

inline Error op_error(const char* op, const std::string& what) {
  return make_error(std::string("cuda ") + op + ": " + what,
                    "this is a caller bug; report it with the model");
}

// The backend's device bytes (alive, high-water mark, allocations, refusals after the seal); shared with
// every allocation's deleter, which may run after the backend is gone.
struct DeviceCounts {
  std::atomic<uint64_t> live{0}, peak{0}, allocations{0}, sealed{0};
  void add(uint64_t bytes) {
    const uint64_t now = live += bytes;
    ++allocations;
    for (uint64_t p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
  }
};

inline const char* const kStepKnob =
    "a step outgrew what startup reserved before the KV pool: raise --max-num-batched-tokens / "
    "--max-num-seqs "
    "(they size the reservation) or lower the step";

inline std::shared_ptr<void> device_alloc(size_t bytes, Status* st,
                                          const std::shared_ptr<DeviceCounts>& counts) {
  void* p = nullptr;
  if (bytes == 0) bytes = 1;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    *st = cuda_error(e, ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str(), __FILE__, __LINE__);
    return nullptr;
  }
  counts->add(bytes);
  return std::shared_ptr<void>(p, [counts, bytes](void* q) {
    cudaFree(q);
    counts->live -= bytes;
  });
}

// An internal buffer that steps grow (never shrinks); reserve_scratch sizes it before the KV pool.
struct Scratch {
  explicit Scratch(const char* what) : name(what) {}
  const char* name;
  std::shared_ptr<void> mem;
  size_t cap = 0;
  [[nodiscard]] void* get() const { return mem.get(); }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend()
      : queue_(knob(Knob::CUDA_GRAPHS) == 1),
        gemv_max_(std::min(knob(Knob::GEMV_MAX_BATCH), kGemvMaxBatch)) {}
  ~CudaBackend() override;
  Status init();

  [[nodiscard]] std::string_view name() const override { return "cuda"; }
  [[nodiscard]] Device device() const override { return Device::cuda; }
  // Variants this backend runs: dense bf16 weights (f16/f32 converted at load), bf16 KV, causal and
  // sliding-window attention.
  [[nodiscard]] KvFormat kv_format() const override { return KvFormat::bf16; }

  // ---- memory (cuda_backend.cpp; weights: linear/weight_import.cpp) ----
  Result<Tensor> alloc(DType dtype, std::vector<int64_t> shape) override;
  [[nodiscard]] DType weight_dtype(DType /*src*/) const override { return DType::bf16; }
  Result<Tensor> import_weight(const void* host, DType src, std::vector<int64_t> shape,
                               std::shared_ptr<void> keepalive, DType want) override;
  Status upload(const Tensor& dst, const void* host, size_t bytes) override;
  Status download(const Tensor& src, void* host, size_t bytes) override;
  [[nodiscard]] uint64_t scratch_bytes(const StepShapes& shapes) const override;
  Status reserve_scratch(const StepShapes& shapes) override;
  Status prepare_experts(const std::vector<ExpertWeights>& experts) override;
  void seal_memory() override { sealed_ = true; }
  [[nodiscard]] MemoryCounters memory_counters() const override;

  // ---- stream and step (cuda_backend.cpp) ----
  Status enqueue_external(std::function<Status(void*)> fn, std::vector<uint64_t> fingerprint,
                          bool capturable = true) override;
  Status submit() override;
  Status synchronize() override;
  Status begin_step(const StepMeta& meta) override;

  // ---- ops (one folder per family) ----
  Status embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  Status rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  Status add_rmsnorm(Tensor& residual, const Tensor& delta, const Tensor& w, float eps, Tensor& out) override;
  Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& y) override;
  Status rope(Tensor& q, Tensor& k, const Tensor& inv_freq) override;
  [[nodiscard]] bool supports(WeightFormat f) const override {
    return f == WeightFormat::dense || f == WeightFormat::gptq_int4;
  }
  // gptq-int4 experts on the int4 expert kernels (moe/moe_w4a16.cu) unless SPARKCTL_INT4_EXPERTS=0.
  [[nodiscard]] bool supports_experts(WeightFormat f) const override {
    return f == WeightFormat::dense || (f == WeightFormat::gptq_int4 && int4_experts_);
  }
  Status check_experts(const std::vector<ExpertWeights>& experts, int64_t d) const override;  // moe/
  Status kv_write(const Tensor& k, const Tensor& v, KvCache& cache) override;
  Status attention(const Tensor& q, const KvCache& cache, const AttnSpec& spec, Tensor& out) override;
  Status silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) override;
  Status gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  Status moe_ffn(const Tensor& x, const std::vector<ExpertWeights>& experts, const Tensor& ids,
                 const Tensor& w, Tensor& out) override;
  Status moe_route(const Tensor& logits, const MoeRouteSpec& sp, const Tensor* bias, Tensor& ids,
                   Tensor& w) override;
  Status sample(const Tensor& logits, const std::vector<SampleRow>& rows,
                std::vector<SampledToken>& out) override;

 private:
  // Every op is queued through here (it ends the window in which a GEMM's bf16 staging can be reused).
  void push(GraphQueue::Op op, const Fingerprint& fp) {
    forget_peepholes();
    queue_.push(std::move(op), fp.words());
  }
  // Queues kernel(args...), the queue's stream where kStream stands, under the fingerprint made of the op's
  // id, the same arguments and the step generation (fingerprint.h).
  template <class Kernel, class... Args>
  void launch(OpId id, Kernel kernel, const Args&... args) {
    push(bind_kernel(kernel, args...), fingerprint(id, args...));
  }
  // The same in place of the last queued op: a fusion rule folding that op into this one (fusion/).
  template <class Kernel, class... Args>
  void relaunch(OpId id, Kernel kernel, const Args&... args) {
    queue_.replace_last(bind_kernel(kernel, args...), fingerprint(id, args...).words());
  }
  template <class... Args>
  Fingerprint fingerprint(OpId id, const Args&... args) const {
    Fingerprint f;
    f.add(op_id(id));
    (fp_add(f, args), ...);
    f.add(gen_);
    return f;
  }
  template <class Kernel, class... Args>
  static GraphQueue::Op bind_kernel(Kernel kernel, const Args&... args) {
    return [=](cudaStream_t s) { return kernel(launch_arg(args, s)...); };
  }
  // The peepholes' memory of the last queued op (fusion/peepholes.h): a new op or a flush ends it.
  void forget_peepholes() { ph_.forget(); }
  // Runs what is queued (graph replay when the step repeats) after pending weight copies landed.
  Status flush();

  // Memory of the backend (cuda_backend.cpp).
  Status grow(Scratch& buf, size_t need, bool zero = false);
  Status before_move();
  Status dev_alloc(std::shared_ptr<void>& out, size_t bytes, const std::string& what);
  // A weight's bytes, carved from a slab (linear/weight_import.cpp).
  Status weight_storage(std::shared_ptr<void>& out, size_t bytes, const std::string& what);
  static constexpr size_t kWeightSlab = size_t{256} << 20, kWeightAlign = 256;
  Status ensure_meta(size_t n, size_t tiles, size_t tables);
  Status ensure_gemm(int M, int K);   // linear/linear_op.cpp
  Status ensure_sample(size_t rows);  // sample/sample_op.cpp
  [[nodiscard]] AttnKnobs attn_knobs() const { return AttnKnobs{share_kv_, split_merge_, sm_count_}; }

  // Op helpers.
  Status norm(const Tensor& x, Tensor* residual, const Tensor& w, float eps, Tensor& out);  // elementwise

  // ---- fusion rules (fusion/, one file each): each folds this op into the one queued before it when the
  // rule applies and its switch is on, and says whether it did ----
  void remember_gemv(const GemvSegment& seg, int m, int k, const float* x);
  bool fuse_gemv_group(const GemvSegment& seg, const float* x, int m, int k);
  void remember_w4a16(const W4A16Op& op);
  bool fuse_w4a16_group(const W4A16Segment& seg, const float* x, int m);
  void remember_rope(const RopeOp& r);
  void remember_norm(const float* x, const float* w, float eps, float* out, int rows, int dim);
  bool fuse_norm_into_gemv(const GemvSegment& seg, const float* x, int m, int k);
  bool fuse_residual_into_gemv(const float* x, float* residual, int rows, int dim);
  bool fuse_swiglu_into_gemv(const float* gate, const float* up, int64_t n, float* out);
  unsigned long long* fuse_argmax_into_gemv(const float* logits, int rows, int vocab);  // the argmax slots
  bool fuse_rope_cache(const float* k, const float* v, const int32_t* slots, int n, int hk, int d,
                       bf16* k_cache, bf16* v_cache);
  // What the decode attention kernels take besides the plan, q and the caches.
  struct AttnArgs {
    int n, hq, hk, d, window;
    float scale;
    float* out;
    float* partial;
    int* counters;
  };
  bool fuse_attention_rope(const AttnLaunch& plan, const float* q, const bf16* k_cache, const bf16* v_cache,
                           const AttnArgs& a);
  [[nodiscard]] bool staged_for(const float* x, int m, int k) const;
  void remember_staging(const float* x, int m, int k);
  void requeue_gemv();  // the pending GEMV (ph_.gemv) in place of the last op
  // One row of the linear chooser per quantized format, each in its own file (linear/<format>_op.cpp).
  Status linear_w4a16(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& y);
  struct MoeTable {
    std::shared_ptr<void> storage;
    const cuda::MoeExpert* dev = nullptr;    // bf16 experts
    std::vector<cuda::MoeExpert> host;       // what dev holds
    const cuda::MoeExpertQ* qdev = nullptr;  // gptq-int4 experts (moe_w4a16.cu)
    std::vector<cuda::MoeExpertQ> qhost;
    int group_size = 0, down_group_size = 0;  // int4 experts: the first expert's, for the K slices
    int max_inter = 0;
    bool vec = true;  // every expert row 16-byte aligned: the kernels' vector loads
  };
  Result<const MoeTable*> moe_table(const std::vector<ExpertWeights>& experts, int d);  // moe
  Result<const MoeTable*> moe_table_int4(const std::vector<ExpertWeights>& experts, int d);
  Status store_table(MoeTable& t, const void* host, size_t bytes, const std::string& what);

  cudaStream_t stream_ = nullptr;
  cudaEvent_t staged_ = nullptr;
  Peepholes ph_;  // fusion/peepholes.h
  bool grouping_off_ = knob(Knob::GEMV_GROUP) == 0;
  bool int4_experts_ = knob(Knob::INT4_EXPERTS) == 1;
  bool rope_fuse_ = knob(Knob::ROPE_FUSE) == 1;
  bool swiglu_fuse_ = knob(Knob::SWIGLU_FUSE) == 1;
  bool argmax_fuse_ = knob(Knob::ARGMAX_FUSE) == 1;
  bool norm_fuse_ = knob(Knob::NORM_FUSE) == 1;
  bool residual_fuse_ = knob(Knob::RESIDUAL_FUSE) == 1;
  bool staging_reuse_ = knob(Knob::STAGING_REUSE) == 1;
  bool queued_uploads_ = knob(Knob::QUEUED_UPLOADS) == 1;
  // Decode attention: one block per kv head for its whole GQA group (1), or per q head (0).
  bool share_kv_ = knob(Knob::SHARED_KV_ATTN) == 1;
  // Its split-KV partials merged by the last split block (1) or by a second kernel (0).
  bool split_merge_ = knob(Knob::SPLIT_MERGE) == 1;
  int sm_count_ = 132;
  bool chunking_ = knob(Knob::STEP_CHUNKS) == 1;  // honour submit() (else one launch a step)
  int step_chunks_ = 0;
  size_t first_chunk_ops_ = static_cast<size_t>(knob(Knob::FIRST_CHUNK_OPS));
  // SPARKCTL_CUDA_STATS: where a sampled step's wall time goes (host op building vs launch to result).
  std::chrono::steady_clock::time_point step_t0_{};
  bool stats_ = knob(Knob::CUDA_STATS) == 1;
  std::vector<double> host_us_, device_us_, gap_us_;
  std::chrono::steady_clock::time_point sampled_at_{};  // when the last sampled ids reached the host
  bool attn_rope_fuse_ = knob(Knob::ATTN_ROPE_FUSE) == 1;
  std::unique_ptr<WeightLoader> loader_;
  std::shared_ptr<void> slab_;  // the weight slab being filled
  size_t slab_used_ = 0;
  bool warned_conversion_ = false;
  void* arena_ = nullptr;          // pinned, kArenaBytes: queued small uploads of the current step
  std::shared_ptr<void> arena_d_;  // its device mirror
  size_t arena_used_ = 0;
  void* sample_h_ = nullptr;  // pinned: [cap] DeviceSampleRow + [cap] DeviceSampleOut
  size_t sample_cap_ = 0;
  std::shared_ptr<void> argmax_;  // [cap][kArgmaxSlots] keys: the lm_head GEMV's argmax for the sampler
  GraphQueue queue_;
  int gemv_max_ = 2;  // decode batches up to this take the GEMV (SPARKCTL_GEMV_MAX_BATCH, linear/select.h)
  std::unique_ptr<Gemm> gemm_;
  int gemm_tokens_ = 0, gemm_k_ = 0;
  // The step's metadata (begin_step): one device buffer at offsets that move only when it grows.
  std::shared_ptr<void> meta_;
  int32_t* meta_d_ = nullptr;
  int32_t* meta_h_ = nullptr;  // pinned mirror
  size_t tok_cap_ = 0, tiles_cap_ = 0, tables_cap_ = 0;
  int32_t *positions_ = nullptr, *slots_ = nullptr, *table_off_ = nullptr, *tiles_ = nullptr,
          *tables_ = nullptr;
  int max_q_len_ = 0, n_tiles_ = 0;
  Scratch partial_{"the split-KV attention partials"};
  // Keyed by the vector's address, checked against its contents on every call: a freed list whose
  // address a new one reuses (another model, a test) must not find the old pointers.
  std::map<const ExpertWeights*, MoeTable> moe_tables_;
  Scratch moe_scratch_{"the mixture-of-experts scratch"};  // moe_ffn's plan, h and y (moe_plan.h)
  int moe_gemm_min_ = knob(Knob::MOE_GEMM_MIN_TOKENS);
  Scratch counters_{"the split-KV counters"};  // per (token, kv head), of the shared kernel; kept zero
  std::shared_ptr<DeviceCounts> counts_ = std::make_shared<DeviceCounts>();
  bool sealed_ = false;  // seal_memory(): every allocation from now on is refused
  int block_size_ = 0;
  int n_tokens_ = 0;
  uint64_t gen_ = 1;  // bumped whenever an internal buffer moves: captured graphs never see stale pointers
};

}  // namespace spk::cuda
