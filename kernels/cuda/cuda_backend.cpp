#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/graph_queue.h"
#include "kernels/cuda/moe_ffn.h"
#include "kernels/cuda/moe_route.h"
#include "kernels/cuda/scratch_plan.h"
#include "kernels/cuda/weight_loader.h"

namespace spk::cuda {
namespace {

static_assert(kMaxSampleCandidates == kMaxDeviceSampleCandidates, "sample.cu's window is the seam's");

// Steps of more tokens than this (prefill chunks) are never captured as graphs.
constexpr int kMaxGraphTokens = 512;

// Small uploads (ids, rows, sampling parameters) go through a pinned arena and are queued in op order,
// so a decode step is one graph launch with its host inputs as memcpy nodes; larger ones sync.
constexpr size_t kArenaBytes = size_t{1} << 20;
// Decode batches up to this take the GEMV, larger ones cuBLASLt. Measured on the H200 (8B shapes,
// PERF_NOTES.md v2): batch 2 GEMV 5.47 vs cuBLASLt 5.93 ms/step; batch 4 6.78 vs 6.18; batch 8 13.8 vs
// 6.46 (the GEMV re-reads x per row group from L1 and falls to ~27 % of bandwidth at batch 8).
constexpr int kDefaultGemvMaxBatch = 2;
constexpr size_t kMaxQueuedUpload = size_t{64} << 10;
// Backend::submit() launches what is queued once a step has this many ops (first chunk, then later ones):
// about one layer, then about eight of an 8B model's.
constexpr size_t kFirstChunkOps = 8;
constexpr size_t kChunkOps = 64;

int env_int(const char* name, int def, int lo, int hi) {
  const char* e = std::getenv(name);
  if (!e || !*e) return def;
  const int v = std::atoi(e);
  return v < lo ? lo : v > hi ? hi : v;
}

uint64_t u(const void* p) { return reinterpret_cast<uint64_t>(p); }
uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

Error op_error(const char* op, const std::string& what) {
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

const char* const kStepKnob =
    "a step outgrew what startup reserved before the KV pool: raise --max-num-batched-tokens / "
    "--max-num-seqs "
    "(they size the reservation) or lower the step";

std::shared_ptr<void> device_alloc(size_t bytes, Status* st, const std::shared_ptr<DeviceCounts>& counts) {
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
      : queue_(std::getenv("SPARKCTL_CUDA_GRAPHS") == nullptr ||
               std::string(std::getenv("SPARKCTL_CUDA_GRAPHS")) != "0"),
        gemv_max_(env_int("SPARKCTL_GEMV_MAX_BATCH", kDefaultGemvMaxBatch, 0, kGemvMaxBatch)) {}
  ~CudaBackend() override {
    (void)flush();
    if (stats_)
      std::fprintf(stderr, "cuda backend: %llu eager flushes, %llu graph captures, %llu graph replays\n",
                   static_cast<unsigned long long>(queue_.stats().eager_flushes),
                   static_cast<unsigned long long>(queue_.stats().captures),
                   static_cast<unsigned long long>(queue_.stats().replays));
    auto median_of = [](std::vector<double> v) {
      std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
      return v[v.size() / 2];
    };
    if (stats_ && !host_us_.empty()) {
      std::fprintf(stderr,
                   "cuda backend: %zu sampled steps, median: host %.1f us from begin_step to the launch, "
                   "%.1f us from the launch to the sampled ids\n",
                   host_us_.size(), median_of(host_us_), median_of(device_us_));
    }
    if (stats_ && !gap_us_.empty())
      std::fprintf(stderr,
                   "cuda backend: median %.1f us from the sampled ids to the next step's first launch (%zu "
                   "steps launched in chunks)\n",
                   median_of(gap_us_), gap_us_.size());
    if (stream_) cudaStreamSynchronize(stream_);
    queue_.clear();
    gemm_.reset();
    loader_.reset();
    if (meta_h_) cudaFreeHost(meta_h_);
    if (arena_) cudaFreeHost(arena_);
    if (sample_h_) cudaFreeHost(sample_h_);
    if (staged_) cudaEventDestroy(staged_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init() {
    SPK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SPK_CUDA_CHECK(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
    SPK_CUDA_CHECK(cudaMallocHost(&arena_, kArenaBytes));
    int dev = 0;
    SPK_CUDA_CHECK(cudaGetDevice(&dev));
    SPK_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, dev));
    return dev_alloc(arena_d_, kArenaBytes, "the upload arena");
  }

  [[nodiscard]] std::string_view name() const override { return "cuda"; }
  [[nodiscard]] Device device() const override { return Device::cuda; }
  [[nodiscard]] DType kv_cache_dtype() const override { return DType::bf16; }

  Result<Tensor> alloc(DType dtype, std::vector<int64_t> shape) override {
    Tensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.device = Device::cuda;
    SPK_TRY(dev_alloc(t.storage, t.nbytes(), "tensor " + describe(t)));
    t.data = t.storage.get();
    SPK_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
    return t;
  }

  [[nodiscard]] DType weight_dtype(DType /*src*/) const override { return DType::bf16; }

  Result<Tensor> import_weight(const void* host, DType src, std::vector<int64_t> shape,
                               std::shared_ptr<void> keepalive, DType want) override {
    const bool to_bf16 = want == DType::bf16 && (src == DType::f16 || src == DType::f32);
    if (want != src && want != DType::f32 && !to_bf16)
      return op_error("import_weight", std::string("cannot convert ") + std::string(dtype_name(src)) +
                                           " to " + std::string(dtype_name(want)));
    Tensor t;
    t.dtype = want;
    t.shape = std::move(shape);
    t.device = Device::cuda;
    SPK_TRY(dev_alloc(t.storage, t.nbytes(), "weight " + describe(t)));  // no zero fill: the copy writes all
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

  Status upload(const Tensor& dst, const void* host, size_t bytes) override {
    if (bytes > dst.nbytes())
      return op_error("upload", std::to_string(bytes) + " bytes into " + describe(dst));
    if (bytes == 0) return ok_status();
    const size_t slot = (arena_used_ + 15) / 16 * 16;
    if (queued_uploads_ && bytes <= kMaxQueuedUpload && slot + bytes <= kArenaBytes) {
      // Copied now (the caller may reuse `host`); the H2D runs in op order, inside the step's graph:
      // pinned arena -> device arena (a memcpy node between two allocations the backend owns for its
      // lifetime), then a copy kernel to `dst`. A memcpy node straight into `dst` breaks graph replay
      // once `dst` is freed and another allocation lands at its address (seen on the H200: the
      // backend test crashed on its first replay after reallocating its tensors).
      char* src = static_cast<char*>(arena_) + slot;
      char* mid = static_cast<char*>(arena_d_.get()) + slot;
      std::memcpy(src, host, bytes);
      arena_used_ = slot + bytes;
      void* d = dst.data;
      push(
          [=](cudaStream_t s) -> Status {
            SPK_CUDA_CHECK(cudaMemcpyAsync(mid, src, bytes, cudaMemcpyHostToDevice, s));
            return copy_device(mid, d, static_cast<int64_t>(bytes), s);
          },
          {9, u(d), u(src), u(int64_t(bytes)), gen_});
      return ok_status();
    }
    SPK_TRY(flush());
    SPK_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, bytes, cudaMemcpyHostToDevice, stream_));
    SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `host` may be reused by the caller right away
    return ok_status();
  }

  Status download(const Tensor& src, void* host, size_t bytes) override {
    if (bytes > src.nbytes())
      return op_error("download", std::to_string(bytes) + " bytes from " + describe(src));
    SPK_TRY(flush());
    SPK_CUDA_CHECK(cudaMemcpyAsync(host, src.data, bytes, cudaMemcpyDeviceToHost, stream_));
    SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return ok_status();
  }

  Status enqueue_external(std::function<Status(void*)> fn, std::vector<uint64_t> fingerprint,
                          bool capturable = true) override {
    if (!capturable) {  // the ops before it run (graphs as usual), then fn on the stream, eagerly
      SPK_TRY(flush());
      return fn(static_cast<void*>(stream_));
    }
    // Fingerprint op id 0xE7 + the caller's values (pointers/sizes) keep graph replay exact.
    uint64_t h = 0xE7;
    for (uint64_t v : fingerprint) h = h * 0x100000001b3ULL ^ v;
    push([fn = std::move(fn)](cudaStream_t s) { return fn(static_cast<void*>(s)); }, {0xE7, h});
    return ok_status();
  }

  Status submit() override {
    // The first chunk is small so the GPU starts early; later ones are larger (each graph launch and
    // boundary costs a few microseconds, and no fusion spans one).
    const size_t want = step_chunks_ == 0 ? first_chunk_ops_ : kChunkOps;
    if (!chunking_ || queue_.size() < want) return ok_status();
    if (stats_ && step_chunks_ == 0 && sampled_at_.time_since_epoch().count() != 0)
      gap_us_.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sampled_at_).count());
    ++step_chunks_;
    return flush();
  }

  Status synchronize() override {
    SPK_TRY(flush());
    SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return ok_status();
  }

  Status begin_step(const StepMeta& meta) override {
    step_t0_ = std::chrono::steady_clock::now();
    step_chunks_ = 0;
    SPK_TRY(flush());
    if (arena_used_ > 0) {  // the queued uploads of earlier steps must have left the arena
      SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));
      arena_used_ = 0;
    }
    SPK_ASSIGN(const std::vector<int32_t> token_seq, check_step_meta(meta));
    const size_t n = meta.positions.size();
    std::vector<int32_t> table_off(n);
    for (size_t i = 0; i < n; ++i) table_off[i] = meta.seqs[token_seq[i]].bt_offset;
    // Query tiles for the prefill kernel: runs of <= 64 consecutive new tokens of one sequence.
    std::vector<int32_t> tiles;
    max_q_len_ = 0;
    for (const SeqMeta& s : meta.seqs) {
      max_q_len_ = std::max(max_q_len_, s.q_len);
      for (int32_t r = 0; r < s.q_len; r += kPrefillTileQ) {
        tiles.push_back(s.q_start + r);
        tiles.push_back(std::min(kPrefillTileQ, s.q_len - r));
      }
    }
    n_tiles_ = static_cast<int>(tiles.size() / 2);
    block_size_ = meta.block_size;
    n_tokens_ = static_cast<int>(n);
    // The arrays go to one device buffer by one copy from its pinned mirror (the previous step's copy
    // must have left the mirror first).
    SPK_TRY(ensure_meta(n, tiles.size(), meta.block_tables.size()));
    SPK_CUDA_CHECK(cudaEventSynchronize(staged_));
    auto stage = [&](const int32_t* src, size_t count, int32_t* dst) {
      if (count > 0) std::memcpy(meta_h_ + (dst - meta_d_), src, count * 4);
    };
    stage(meta.positions.data(), n, positions_);
    stage(meta.slots.data(), n, slots_);
    stage(table_off.data(), n, table_off_);
    stage(tiles.data(), tiles.size(), tiles_);
    stage(meta.block_tables.data(), meta.block_tables.size(), tables_);
    const size_t words = static_cast<size_t>(tables_ - meta_d_) + meta.block_tables.size();
    SPK_CUDA_CHECK(cudaMemcpyAsync(meta_d_, meta_h_, words * 4, cudaMemcpyHostToDevice, stream_));
    SPK_CUDA_CHECK(cudaEventRecord(staged_, stream_));
    return ok_status();
  }

  Status embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    if (table.rank() != 2 || (table.dtype != DType::bf16 && table.dtype != DType::f32) ||
        ids.dtype != DType::i32 || out.numel() != ids.numel() * table.dim(1))
      return op_error("embedding", describe(table) + ", ids " + describe(ids) + ", out " + describe(out));
    const bool is_bf16 = table.dtype == DType::bf16;
    const int n = static_cast<int>(ids.numel()), d = static_cast<int>(table.dim(1)),
              v = static_cast<int>(table.dim(0));
    const void* tp = table.data;
    const int32_t* ip = ids.ptr<int32_t>();
    float* op = out.ptr<float>();
    push([=](cudaStream_t s) { return cuda::embedding(tp, is_bf16, ip, n, d, v, op, s); },
         {1, u(tp), u(ip), u(op), u(int64_t(n)), u(int64_t(d)), gen_});
    return ok_status();
  }

  Status rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    return norm(x, nullptr, w, eps, out);
  }

  Status add_rmsnorm(Tensor& residual, const Tensor& delta, const Tensor& w, float eps,
                     Tensor& out) override {
    if (residual.numel() != delta.numel())
      return op_error("add_rmsnorm", describe(residual) + " + " + describe(delta));
    return norm(delta, &residual, w, eps, out);
  }

  Status linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) override {
    if (w.rank() != 2 || w.dtype != DType::bf16)
      return make_error("cuda linear: weight " + describe(w) + " is not bf16",
                        "the CUDA backend runs bf16 checkpoints (synthesize with --dtype bf16)");
    const int64_t K = w.dim(1), N = w.dim(0);
    if (x.dtype != DType::f32 || x.numel() % K != 0 || y.numel() != x.numel() / K * N ||
        (bias && (bias->dtype != DType::f32 || bias->numel() != N)))
      return op_error("linear", "x " + describe(x) + ", w " + describe(w) + ", y " + describe(y));
    const int M = static_cast<int>(x.numel() / K);
    const bool gemv = M <= gemv_max_ && K % 8 == 0;
    if (!gemv) SPK_TRY(ensure_gemm(M, static_cast<int>(K)));
    const auto* wp = w.ptr<bf16>();
    const float* bp = bias ? bias->ptr<float>() : nullptr;
    const float* xp = x.ptr<float>();
    float* yp = y.ptr<float>();
    Gemm* g = gemm_.get();
    const int n = static_cast<int>(N), k = static_cast<int>(K);
    // Consecutive GEMMs on the same x (q/k/v, gate/up) share one fp32 -> bf16 staging pass: valid
    // while no other op ran in between (push() forgets it).
    const bool staged = staging_reuse_ && !gemv && staged_x_ == xp && staged_m_ == M && staged_k_ == k;
    // (A fused GEMV never writes what its blocks read: y must not be the x it reads.)
    if (gemv && !grouping_off_ && gemv_.n > 0 && gemv_.n < kGemvMaxGroup && gemv_.joins == xp &&
        gemv_.m == M && gemv_.k == k && !gemv_.f.accum && !gemv_.f.swiglu_out && yp != gemv_.x) {
      // The previous op is a GEMV on the same x (q then k then v; gate then up): one launch for all.
      gemv_.segs[gemv_.n++] = GemvSegment{wp, bp, yp, n};
      requeue_gemv();
      return ok_status();
    }
    if (gemv && norm_.out == xp && norm_.rows == M && norm_.dim == k && yp != norm_.x) {
      // The previous op is the rmsnorm that made x: the GEMV normalises on the fly (and still writes x).
      const NormOp nm = norm_;
      gemv_ = GemvOp::single(GemvSegment{wp, bp, yp, n}, M, k, nm.x, xp);
      gemv_.f.norm_w = nm.w, gemv_.f.norm_eps = nm.eps, gemv_.f.norm_out = nm.out;
      norm_ = NormOp{};
      requeue_gemv();
      return ok_status();
    }
    push(
        [=](cudaStream_t s) {
          if (gemv) return gemv_bf16(wp, bp, xp, M, n, k, yp, s);
          return g->linear(wp, bp, xp, M, n, k, yp, s, staged);
        },
        {3, u(wp), u(bp), u(xp), u(yp), u(int64_t(M)), u(int64_t(n)), u(int64_t(k)), u(int64_t(gemv)),
         u(int64_t(staged)), gen_});
    if (!gemv) staged_x_ = xp, staged_m_ = M, staged_k_ = k;
    if (gemv) {
      gemv_ = GemvOp::single(GemvSegment{wp, bp, yp, n}, M, k, xp, xp);
    }
    return ok_status();
  }

  Status rope(Tensor& q, Tensor& k, const Tensor& inv_freq) override {
    if (q.rank() != 3 || k.rank() != 3 || q.dim(0) != n_tokens_ || k.dim(0) != n_tokens_ ||
        inv_freq.numel() * 2 != q.dim(2))
      return op_error("rope", "q " + describe(q) + ", k " + describe(k) + ", inv_freq " + describe(inv_freq) +
                                  " for a step of " + std::to_string(n_tokens_) + " tokens");
    float* qp = q.ptr<float>();
    float* kp = k.ptr<float>();
    const float* fp = inv_freq.ptr<float>();
    const int32_t* pos = positions_;
    const int n = n_tokens_, hq = static_cast<int>(q.dim(1)), hk = static_cast<int>(k.dim(1)),
              d = static_cast<int>(q.dim(2));
    push(
        [=](cudaStream_t s) { return cuda::rope(qp, kp, pos, fp, n, hq, hk, d, s); },
        {4, u(qp), u(kp), u(fp), u(pos), u(int64_t(n)), u(int64_t(hq)), u(int64_t(hk)), u(int64_t(d)), gen_});
    rope_ = RopeOp{qp, kp, fp, hq, hk, d};  // a kv_write of this k right after joins it (rope_and_cache)
    return ok_status();
  }

  Status kv_write(const Tensor& k, const Tensor& v, Tensor& k_cache, Tensor& v_cache) override {
    if (k_cache.dtype != DType::bf16 || v_cache.dtype != DType::bf16 || k.rank() != 3 ||
        k.dim(0) != n_tokens_ || k_cache.rank() != 4 || k_cache.dim(2) != k.dim(1) ||
        k_cache.dim(3) != k.dim(2))
      return op_error("kv_write",
                      "k " + describe(k) + " into " + describe(k_cache) + " (caches must be bf16)");
    const float* kp = k.ptr<float>();
    const float* vp = v.ptr<float>();
    auto* kc = k_cache.ptr<bf16>();
    auto* vc = v_cache.ptr<bf16>();
    const int32_t* sl = slots_;
    const int n = n_tokens_, hk = static_cast<int>(k.dim(1)), d = static_cast<int>(k.dim(2));
    if (rope_fuse_ && rope_.k == kp && rope_.hk == hk &&
        rope_.d == d) {  // the previous op roped this k: fuse
      const RopeOp r = rope_;
      const int32_t* pos = positions_;
      queue_.replace_last(
          [=](cudaStream_t s) {
            return cuda::rope_and_cache(r.q, r.k, vp, pos, r.inv_freq, sl, n, r.hq, hk, d, kc, vc, s);
          },
          {45, u(r.q), u(kp), u(vp), u(pos), u(r.inv_freq), u(sl), u(int64_t(n)), u(int64_t(r.hq)),
           u(int64_t(hk)), u(int64_t(d)), u(kc), u(vc), gen_});
      rope_ = RopeOp{};
      rope_cache_ = DecodeRope{r.q, r.k, vp, r.inv_freq, sl, kc, vc};
      return ok_status();
    }
    push([=](cudaStream_t s) { return cuda::kv_write(kp, vp, sl, n, hk, d, kc, vc, s); },
         {5, u(kp), u(vp), u(kc), u(vc), u(sl), u(int64_t(n)), u(int64_t(hk)), u(int64_t(d)), gen_});
    return ok_status();
  }

  Status attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const AttnParams& params,
                   Tensor& out) override {
    if (q.rank() != 3 || q.dim(0) != n_tokens_ || k_cache.rank() != 4 || k_cache.dtype != DType::bf16 ||
        k_cache.dim(1) != block_size_ || k_cache.dim(3) != q.dim(2) || out.numel() != q.numel())
      return op_error("attention",
                      "q " + describe(q) + ", cache " + describe(k_cache) + ", out " + describe(out));
    const float* qp = q.ptr<float>();
    const auto* kc = k_cache.ptr<bf16>();
    const auto* vc = v_cache.ptr<bf16>();
    float* op = out.ptr<float>();
    const int32_t* to = table_off_;
    const int32_t* pos = positions_;
    const int32_t* tab = tables_;
    const int n = n_tokens_, hq = static_cast<int>(q.dim(1)), hk = static_cast<int>(k_cache.dim(2)),
              d = static_cast<int>(q.dim(2)), bs = block_size_, win = params.sliding_window;
    const float scale = params.scale;
    uint32_t scale_bits;
    std::memcpy(&scale_bits, &scale, 4);
    const AttnLaunch launch = attention_launch(attn_knobs(), n, max_q_len_, hq, hk, d);
    const bool tiled = launch.tiled, shared = launch.shared;
    const int splits = launch.splits;
    SPK_TRY(grow(partial_, launch.partial_bytes));
    SPK_TRY(grow(counters_, launch.counter_bytes, /*zero=*/true));  // kept zero by the kernels
    float* part = static_cast<float*>(partial_.get());
    int* ctr = shared && split_merge_ ? static_cast<int*>(counters_.get()) : nullptr;
    // Fingerprint: what both kernels read and write; each op adds its own id and inputs in front.
    std::vector<uint64_t> fp = {u(kc),
                                u(vc),
                                u(op),
                                u(to),
                                u(pos),
                                u(tab),
                                u(int64_t(n)),
                                u(int64_t(hq)),
                                u(int64_t(hk)),
                                u(int64_t(d)),
                                u(int64_t(bs)),
                                u(int64_t(win)),
                                scale_bits,
                                u(int64_t(splits)),
                                u(ctr),
                                u(part),
                                gen_};
    if (attn_rope_fuse_ && shared && !tiled && max_q_len_ == 1 && (splits == 1 || ctr) &&
        rope_cache_.q == qp && rope_cache_.k_cache == kc && rope_cache_.v_cache == vc) {
      // The previous op is the rope + cache write of this q at a decode step: the attention does it.
      const DecodeRope r = rope_cache_;
      fp.insert(fp.begin(), {46, u(r.q), u(r.k), u(r.v), u(r.inv_freq), u(r.slots)});
      queue_.replace_last(
          [=](cudaStream_t s) {
            return paged_attention_rope(r, to, pos, tab, n, hq, hk, d, bs, win, scale, op, s, splits, part,
                                        ctr);
          },
          fp);
      rope_cache_ = DecodeRope{};
      return ok_status();
    }
    const auto* tl = reinterpret_cast<const int2*>(tiles_);
    const int nt = n_tiles_;
    fp.insert(fp.begin(), {6, u(qp), u(tl), u(int64_t(tiled ? nt : -1)), u(int64_t(shared))});
    push(
        [=](cudaStream_t s) {
          if (tiled)
            return prefill_attention(qp, kc, vc, tl, nt, to, pos, tab, hq, hk, d, bs, win, scale, op, s);
          return paged_attention(qp, kc, vc, to, pos, tab, n, hq, hk, d, bs, win, scale, op, s, splits, part,
                                 shared, ctr);
        },
        fp);
    return ok_status();
  }

  Status silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) override {
    if (gate.numel() != up.numel() || out.numel() != gate.numel() || gate.dtype != DType::f32)
      return op_error("silu_mul", describe(gate) + " * " + describe(up) + " -> " + describe(out));
    const float* gp = gate.ptr<float>();
    const float* up_ = up.ptr<float>();
    float* op = out.ptr<float>();
    const int64_t n = gate.numel();
    if (swiglu_fuse_ && gemv_.n == 2 && gemv_.segs[0].y == gp && gemv_.segs[1].y == up_ &&
        gemv_.segs[0].N == gemv_.segs[1].N && int64_t{gemv_.segs[0].N} * gemv_.m == n && !gemv_.f.accum) {
      // The previous op is the gate/up GEMV pair that produced these: it forms the product too.
      gemv_.f.swiglu_out = op;
      requeue_gemv();
      gemv_.n = 0;
      return ok_status();
    }
    push([=](cudaStream_t s) { return cuda::silu_mul(gp, up_, n, op, s); },
         {7, u(gp), u(up_), u(op), u(n), gen_});
    return ok_status();
  }

  // Mixture-of-experts FFN (kernels/cuda/moe_ffn.cu, moe_gemm.cu). The experts' pointer table is built
  // once per expert list (the layer's vector lives as long as the model) and the scratch only grows.
  // Batches of SPARKCTL_MOE_GEMM_MIN_TOKENS tokens or more (default 64: prefill chunks, large decode
  // batches) run the expert GEMMs on tensor cores; smaller ones the grouped GEMV (fp32 activations).
  Status moe_ffn(const Tensor& x, const std::vector<ExpertWeights>& experts, const Tensor& ids,
                 const Tensor& w, Tensor& out) override {
    if (x.dtype != DType::f32 || x.rank() != 2 || out.dtype != DType::f32 || out.shape != x.shape ||
        ids.dtype != DType::i32 || ids.rank() != 2 || ids.dim(0) != x.dim(0) || w.dtype != DType::f32 ||
        w.shape != ids.shape || experts.empty())
      return op_error("moe_ffn", "x " + describe(x) + ", ids " + describe(ids) + ", w " + describe(w) +
                                     ", out " + describe(out) + ", " + std::to_string(experts.size()) +
                                     " experts");
    const int n = static_cast<int>(x.dim(0)), d = static_cast<int>(x.dim(1)),
              k = static_cast<int>(ids.dim(1));
    SPK_ASSIGN(const MoeTable* tab, moe_table(experts, d));
    const cuda::MoeShape sh{
        static_cast<int>(experts.size()), d, tab->max_inter,
        tab->vec && d % 8 == 0 && (reinterpret_cast<uintptr_t>(x.ptr<float>()) & 15) == 0};
    SPK_TRY(grow(moe_scratch_, cuda::moe::carve(nullptr, n * k, sh.n_experts, d, sh.max_inter, nullptr)));
    const bool tc = sh.vec && n >= moe_gemm_min_;
    const cuda::MoeExpert* te = tab->dev;
    const float* xp = x.ptr<float>();
    const int32_t* ip = ids.ptr<int32_t>();
    const float* wp = w.ptr<float>();
    void* sp = moe_scratch_.get();
    float* op = out.ptr<float>();
    push(
        [=](cudaStream_t s) { return cuda::moe_ffn_bf16(te, sh, xp, ip, wp, n, k, sp, tc, op, s); },
        {0x4D, u(te), u(xp), u(ip), u(wp), u(sp), u(op), u(int64_t(n)), u(int64_t(k)), u(int64_t(tc)), gen_});
    return ok_status();
  }

  // Grows a scratch buffer to `need` bytes (never shrinks; zero-filled when asked). Growing moves it: what
  // is queued runs first and gen_ moves on, so no captured graph keeps the old address.
  Status grow(Scratch& buf, size_t need, bool zero = false) {
    if (need <= buf.cap) return ok_status();
    SPK_TRY(before_move());
    buf.mem.reset();
    buf.cap = 0;
    SPK_TRY(dev_alloc(buf.mem, need, buf.name));
    if (zero) SPK_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0, need, stream_));
    buf.cap = need;
    return ok_status();
  }

  // Before an internal buffer moves: queued work may still read it, and captured graphs hold its address.
  Status before_move() {
    SPK_TRY(flush());
    SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ++gen_;
    queue_.clear();
    return ok_status();
  }

  // Every device allocation of the backend goes through here: counted, and refused once sealed (naming
  // the buffer and the knob), never a bare cudaMalloc failure late in a step.
  Status dev_alloc(std::shared_ptr<void>& out, size_t bytes, const std::string& what) {
    if (sealed_) {
      ++counts_->sealed;
      return make_error(
          "cuda backend: " + what + " needs " + std::to_string(bytes) + " bytes after the KV pool was sized",
          kStepKnob);
    }
    Status st;
    out = device_alloc(bytes, &st, counts_);
    if (!st.ok())
      return make_error("cuda backend: " + what + ": " + st.error().message,
                        "lower --gpu-memory-utilization, --max-num-batched-tokens or --max-num-seqs");
    return ok_status();
  }

  [[nodiscard]] AttnKnobs attn_knobs() const { return AttnKnobs{share_kv_, split_merge_, sm_count_}; }

 public:
  [[nodiscard]] uint64_t scratch_bytes(const StepShapes& shapes) const override {
    return plan_scratch(shapes, attn_knobs()).device_bytes();
  }

  Status reserve_scratch(const StepShapes& shapes) override {
    const ScratchNeeds need = plan_scratch(shapes, attn_knobs());
    SPK_TRY(grow(partial_, need.partial));
    SPK_TRY(grow(counters_, need.counters, /*zero=*/true));
    SPK_TRY(grow(moe_scratch_, need.moe));
    SPK_TRY(ensure_gemm(need.gemm_tokens, need.gemm_k));
    SPK_TRY(ensure_meta(need.meta_tokens, need.meta_tiles, need.meta_tables));
    SPK_TRY(ensure_sample(need.sample_rows));
    return synchronize();
  }

  Status prepare_experts(const std::vector<ExpertWeights>& experts) override {
    if (experts.empty() || experts[0].gate.rank() != 2) return ok_status();  // moe_ffn names the problem
    auto t = moe_table(experts, static_cast<int>(experts[0].gate.dim(1)));
    return t.ok() ? ok_status() : Status(t.error());
  }

  void seal_memory() override { sealed_ = true; }

  [[nodiscard]] MemoryCounters memory_counters() const override {
    MemoryCounters c{counts_->live, counts_->peak, counts_->allocations, counts_->sealed, sealed_};
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) c.device_free = free_b, c.device_total = total_b;
    return c;
  }

 private:
  // Routing on the device (kernels/cuda/moe_route.cu); specs the kernel does not cover go the host way.
  Status moe_route(const Tensor& logits, const MoeRouteSpec& sp, const Tensor* bias, Tensor& ids,
                   Tensor& w) override {
    const int64_t n = logits.rank() == 2 ? logits.dim(0) : -1;
    if (!cuda::moe_route_supported(sp) || logits.dtype != DType::f32 || logits.dim(-1) != sp.logit_cols() ||
        ids.dtype != DType::i32 || ids.numel() != n * sp.slots() || w.dtype != DType::f32 ||
        w.numel() != ids.numel() || (bias && (bias->dtype != DType::f32 || bias->numel() != sp.num_experts)))
      return Backend::moe_route(logits, sp, bias, ids, w);
    const float* lp = logits.ptr<float>();
    const float* bp = bias ? bias->ptr<float>() : nullptr;
    int32_t* ip = ids.ptr<int32_t>();
    float* wp = w.ptr<float>();
    const int nt = static_cast<int>(n);
    uint32_t scale_bits;
    std::memcpy(&scale_bits, &sp.scaling, 4);
    const uint64_t shape = (u(int64_t{sp.num_experts}) << 32) | (u(int64_t{sp.top_k}) << 16) |
                           (u(int64_t{sp.n_group}) << 8) | u(int64_t{sp.topk_group});
    const uint64_t flags = (u(int64_t{scale_bits}) << 8) | (sp.score == MoeScore::sigmoid ? 1 : 0) |
                           (sp.norm_topk_prob ? 2 : 0) | (sp.shared ? 4 : 0) | (sp.shared_gated ? 8 : 0);
    push([=](cudaStream_t s) { return cuda::moe_route(sp, lp, nt, bp, ip, wp, s); },
         {0x52, u(lp), u(bp), u(ip), u(wp), u(n), shape, flags, gen_});
    return ok_status();
  }

  Status gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    if (x.rank() < 1 || rows.dtype != DType::i32 || out.numel() != rows.numel() * (x.numel() / x.dim(0)))
      return op_error("gather_rows", describe(x) + " rows " + describe(rows) + " -> " + describe(out));
    const float* xp = x.ptr<float>();
    const int32_t* rp = rows.ptr<int32_t>();
    float* op = out.ptr<float>();
    const int m = static_cast<int>(rows.numel()), width = static_cast<int>(x.numel() / x.dim(0));
    push([=](cudaStream_t s) { return cuda::gather_rows(xp, rp, m, width, op, s); },
         {8, u(xp), u(rp), u(op), u(int64_t(m)), u(int64_t(width)), gen_});
    return ok_status();
  }

  Status sample(const Tensor& logits, const std::vector<SampleRow>& rows,
                std::vector<SampledToken>& out) override {
    const int m = static_cast<int>(rows.size());
    if (logits.dtype != DType::f32 || logits.device != Device::cuda || logits.rank() != 2 ||
        logits.dim(0) != m)
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
    unsigned long long* am = nullptr;
    if (argmax_fuse_ && gemv_.n == 1 && gemv_.segs[0].y == lp && gemv_.segs[0].N == vocab && gemv_.m == m &&
        !gemv_.f.accum && !gemv_.f.swiglu_out) {
      // The previous op is the GEMV that wrote these logits: it also leaves each row's argmax for the
      // sampler (greedy rows then skip the scan of the vocabulary).
      am = static_cast<unsigned long long*>(argmax_.get());
      gemv_.f.argmax = am;
      requeue_gemv();
    }
    push([=](cudaStream_t s) { return sample_rows(lp, m, vocab, ph, oh, s, am); },
         {10, u(lp), u(int64_t(m)), u(int64_t(vocab)), u(ph), u(am), gen_});
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

 private:
  // Every op is queued through here (it ends the window in which a GEMM's bf16 staging can be reused).
  template <class Fingerprint>
  void push(GraphQueue::Op op, const Fingerprint& fingerprint) {
    forget_peepholes();
    queue_.push(std::move(op), fingerprint);
  }
  void push(GraphQueue::Op op, std::initializer_list<uint64_t> fingerprint) {
    push<std::initializer_list<uint64_t>>(std::move(op), fingerprint);
  }

  // The peepholes' memory of the last queued op (staging reuse, GEMV fusions, rope + cache, rope into the
  // attention): a new op or a flush ends it.
  void forget_peepholes() {
    staged_x_ = nullptr;
    gemv_.n = 0;
    norm_ = NormOp{};
    rope_ = RopeOp{};
    rope_cache_ = DecodeRope{};
  }

  // Runs what is queued (graph replay when the step repeats) after pending weight copies landed.
  Status flush() {
    forget_peepholes();  // no fusion spans a flush
    if (loader_) SPK_TRY(loader_->wait());
    return queue_.flush(stream_, n_tokens_ <= kMaxGraphTokens);
  }

  Status norm(const Tensor& x, Tensor* residual, const Tensor& w, float eps, Tensor& out) {
    if (w.dtype != DType::f32 || x.dtype != DType::f32 || w.numel() == 0 || x.numel() % w.numel() != 0 ||
        out.numel() != x.numel())
      return op_error("rmsnorm", "x " + describe(x) + ", w " + describe(w) + ", out " + describe(out));
    const float* xp = x.ptr<float>();
    float* rp = residual ? residual->ptr<float>() : nullptr;
    const float* wp = w.ptr<float>();
    float* op = out.ptr<float>();
    const int dim = static_cast<int>(w.numel()), rows = static_cast<int>(x.numel() / w.numel());
    if (rp && rp != xp && norm_fuse_ && gemv_.n == 1 && gemv_.segs[0].y == xp && gemv_.segs[0].N == dim &&
        gemv_.m == rows && gemv_.x != rp && !gemv_.f.norm_w && !gemv_.f.swiglu_out && !gemv_.f.accum) {
      // residual += x where x is the previous GEMV's output (o_proj, down_proj): that GEMV adds into the
      // residual itself, and what is left is rmsnorm(residual), which the next GEMV may absorb.
      gemv_.f.accum = rp;
      requeue_gemv();
      xp = rp;
      rp = nullptr;
    }
    push([=](cudaStream_t s) { return cuda::rmsnorm(xp, rp, wp, rows, dim, eps, op, s); },
         {2, u(xp), u(rp), u(wp), u(op), u(int64_t(rows)), u(int64_t(dim)), gen_});
    if (norm_fuse_ && !rp && op != xp) norm_ = NormOp{xp, wp, eps, op, rows, dim};
    return ok_status();
  }

  // Re-queues the pending GEMV (gemv_) in place of the last op, with its segments and fusions.
  void requeue_gemv() {
    const GemvOp g = gemv_;
    uint32_t eps_bits;
    std::memcpy(&eps_bits, &g.f.norm_eps, 4);
    std::vector<uint64_t> fp = {
        3,        u(g.x),          u(int64_t(g.m)), u(int64_t(g.k)),   u(int64_t(g.n)), u(g.f.norm_w),
        eps_bits, u(g.f.norm_out), u(g.f.accum),    u(g.f.swiglu_out), u(g.f.argmax),   gen_};
    for (int i = 0; i < g.n; ++i)
      fp.insert(fp.end(), {u(g.segs[i].W), u(g.segs[i].bias), u(g.segs[i].y), u(int64_t(g.segs[i].N))});
    queue_.replace_last(
        [=](cudaStream_t s) { return gemv_bf16_fused(g.segs.data(), g.n, g.x, g.m, g.k, g.f, s); }, fp);
  }

  // Room for a step of n tokens, `tiles` tile words and `tables` block table entries in the metadata
  // buffer (and its pinned mirror): [positions | slots | table offsets : capacity n each | tiles | tables].
  Status ensure_meta(size_t n, size_t tiles, size_t tables) {
    const size_t tok = meta_capacity(n, tok_cap_), ti = meta_capacity(tiles, tiles_cap_),
                 ta = meta_capacity(tables, tables_cap_);
    if (meta_ && tok == tok_cap_ && ti == tiles_cap_ && ta == tables_cap_) return ok_status();
    SPK_TRY(before_move());  // queued work may still read the old arrays
    const size_t words = 3 * tok + ti + ta;
    meta_.reset();
    SPK_TRY(dev_alloc(meta_, words * 4,
                      "the step metadata (" + std::to_string(n) + " tokens, " + std::to_string(tables) +
                          " block-table entries)"));
    if (meta_h_) cudaFreeHost(meta_h_);
    meta_h_ = nullptr;
    SPK_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&meta_h_), words * 4));
    tok_cap_ = tok, tiles_cap_ = ti, tables_cap_ = ta;
    meta_d_ = static_cast<int32_t*>(meta_.get());
    positions_ = meta_d_;
    slots_ = positions_ + tok;
    table_off_ = slots_ + tok;
    tiles_ = table_off_ + tok;
    tables_ = tiles_ + ti;
    return ok_status();
  }

  // cuBLASLt's workspace and bf16 staging for GEMMs of up to M x K (gemm.h).
  Status ensure_gemm(int M, int K) {
    if (gemm_ && M <= gemm_tokens_ && K <= gemm_k_) return ok_status();
    const int tokens = std::max(M, gemm_tokens_), k = std::max(K, gemm_k_);
    if (sealed_) {
      ++counts_->sealed;
      return make_error("cuda backend: the GEMM staging for " + std::to_string(M) + " x " +
                            std::to_string(K) + " needs " + std::to_string(Gemm::bytes_for(tokens, k)) +
                            " bytes after the KV pool was sized",
                        kStepKnob);
    }
    SPK_TRY(before_move());
    if (gemm_) counts_->live -= Gemm::bytes_for(gemm_tokens_, gemm_k_);
    gemm_.reset();
    auto g = Gemm::create(tokens, k);
    if (!g.ok())
      return make_error("cuda backend: the GEMM staging for " + std::to_string(tokens) + " x " +
                            std::to_string(k) + ": " + g.error().message,
                        "lower --gpu-memory-utilization or --max-num-batched-tokens");
    gemm_.reset(*g);
    gemm_tokens_ = tokens, gemm_k_ = k;
    counts_->add(Gemm::bytes_for(tokens, k));
    return ok_status();
  }

  // sample()'s pinned rows (parameters and results, read and written by the kernel) and the lm_head
  // GEMV's argmax keys, for `rows` rows.
  Status ensure_sample(size_t rows) {
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

  cudaStream_t stream_ = nullptr;
  cudaEvent_t staged_ = nullptr;
  const float* staged_x_ = nullptr;  // x of the last queued GEMM, while its bf16 staging is current
  int staged_m_ = 0, staged_k_ = 0;
  // The last queued op when it is a GEMV (n > 0): later GEMVs on the same x join it (q/k/v, gate/up),
  // and a silu_mul of its outputs or a residual add of its output folds into it.
  struct GemvOp {
    std::array<GemvSegment, kGemvMaxGroup> segs{};
    int n = 0, m = 0, k = 0;
    const float* x = nullptr;      // what the kernel reads (the un-normalised x when f.norm_w is set)
    const float* joins = nullptr;  // the x of the linears that may join: x, or f.norm_out
    GemvFusion f;
    static GemvOp single(GemvSegment seg, int m, int k, const float* x, const float* joins) {
      GemvOp g;
      g.segs[0] = seg;
      g.n = 1, g.m = m, g.k = k, g.x = x, g.joins = joins;
      return g;
    }
  } gemv_;
  // The last queued op when it is an rmsnorm without residual (out == nullptr: it is not), which a GEMV
  // reading its output absorbs.
  struct NormOp {
    const float* x = nullptr;
    const float* w = nullptr;
    float eps = 0.0f;
    float* out = nullptr;
    int rows = 0, dim = 0;
  } norm_;
  bool grouping_off_ = env_int("SPARKCTL_GEMV_GROUP", 1, 0, 1) == 0;
  bool rope_fuse_ = env_int("SPARKCTL_ROPE_FUSE", 1, 0, 1) == 1;
  bool swiglu_fuse_ = env_int("SPARKCTL_SWIGLU_FUSE", 1, 0, 1) == 1;
  bool argmax_fuse_ = env_int("SPARKCTL_ARGMAX_FUSE", 1, 0, 1) == 1;
  bool norm_fuse_ = env_int("SPARKCTL_NORM_FUSE", 1, 0, 1) == 1;  // rmsnorm and residual add into GEMVs
  bool staging_reuse_ = env_int("SPARKCTL_STAGING_REUSE", 1, 0, 1) == 1;
  bool queued_uploads_ = env_int("SPARKCTL_QUEUED_UPLOADS", 1, 0, 1) == 1;
  // Decode attention: one block per kv head for its whole GQA group (1), or per q head (0).
  bool share_kv_ = env_int("SPARKCTL_SHARED_KV_ATTN", 1, 0, 1) == 1;
  // Its split-KV partials merged by the last split block (1) or by a second kernel (0).
  bool split_merge_ = env_int("SPARKCTL_SPLIT_MERGE", 1, 0, 1) == 1;
  int sm_count_ = 132;
  bool chunking_ = env_int("SPARKCTL_STEP_CHUNKS", 1, 0, 1) == 1;  // honour submit() (else one launch a step)
  int step_chunks_ = 0;
  size_t first_chunk_ops_ =
      static_cast<size_t>(env_int("SPARKCTL_FIRST_CHUNK_OPS", kFirstChunkOps, 1, 1 << 20));
  // SPARKCTL_CUDA_STATS: where a sampled step's wall time goes (host op building vs launch to result).
  std::chrono::steady_clock::time_point step_t0_{};
  bool stats_ = [] {
    const char* e = std::getenv("SPARKCTL_CUDA_STATS");
    return e && std::string(e) == "1";
  }();
  std::vector<double> host_us_, device_us_, gap_us_;
  std::chrono::steady_clock::time_point sampled_at_{};  // when the last sampled ids reached the host
  struct RopeOp {  // the last queued op when it is a rope (k == nullptr: it is not)
    float* q = nullptr;
    float* k = nullptr;
    const float* inv_freq = nullptr;
    int hq = 0, hk = 0, d = 0;
  } rope_;
  // The last queued op when it is a rope + cache write (q == nullptr: it is not), which a decode step's
  // attention on that q absorbs (SPARKCTL_ATTN_ROPE_FUSE=0: it stays its own kernel).
  DecodeRope rope_cache_;
  bool attn_rope_fuse_ = env_int("SPARKCTL_ATTN_ROPE_FUSE", 1, 0, 1) == 1;
  std::unique_ptr<WeightLoader> loader_;
  bool warned_conversion_ = false;
  void* arena_ = nullptr;          // pinned, kArenaBytes: queued small uploads of the current step
  std::shared_ptr<void> arena_d_;  // its device mirror
  size_t arena_used_ = 0;
  void* sample_h_ = nullptr;  // pinned: [cap] DeviceSampleRow + [cap] DeviceSampleOut
  size_t sample_cap_ = 0;
  std::shared_ptr<void> argmax_;  // [cap][kArgmaxSlots] keys: the lm_head GEMV's argmax for the sampler
  GraphQueue queue_;
  int gemv_max_ = kDefaultGemvMaxBatch;  // decode batches up to this take the GEMV (SPARKCTL_GEMV_MAX_BATCH)
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
  struct MoeTable {
    std::shared_ptr<void> storage;
    const cuda::MoeExpert* dev = nullptr;
    std::vector<cuda::MoeExpert> host;  // what dev holds
    int max_inter = 0;
    bool vec = true;  // every expert row 16-byte aligned: the kernels' vector loads
  };
  // Keyed by the vector's address, checked against its contents on every call: a freed list whose
  // address a new one reuses (another model, a test) must not find the old pointers.
  Result<const MoeTable*> moe_table(const std::vector<ExpertWeights>& experts, int d) {
    std::vector<cuda::MoeExpert> host(experts.size());
    int max_inter = 0;
    bool vec = d % 8 == 0;
    auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
    for (size_t i = 0; i < experts.size(); ++i) {
      const ExpertWeights& e = experts[i];
      const bool ok = e.gate.rank() == 2 && e.gate.dtype == DType::bf16 && e.up.dtype == DType::bf16 &&
                      e.down.dtype == DType::bf16 && e.gate.dim(1) == d && e.up.shape == e.gate.shape &&
                      e.down.rank() == 2 && e.down.dim(0) == d && e.down.dim(1) == e.gate.dim(0);
      if (!ok)
        return op_error("moe_ffn", "expert " + std::to_string(i) + ": gate " + describe(e.gate) + ", up " +
                                       describe(e.up) + ", down " + describe(e.down) + " for width " +
                                       std::to_string(d) + " (bf16 [inter, d] / [d, inter] expected)");
      host[i] = {e.gate.ptr<bf16>(), e.up.ptr<bf16>(), e.down.ptr<bf16>(), static_cast<int>(e.gate.dim(0))};
      max_inter = std::max(max_inter, host[i].inter);
      vec = vec && host[i].inter % 8 == 0 && aligned(host[i].gate) && aligned(host[i].up) &&
            aligned(host[i].down);
    }
    MoeTable& t = moe_tables_[experts.data()];
    const auto same = [](const cuda::MoeExpert& a, const cuda::MoeExpert& b) {
      return a.gate == b.gate && a.up == b.up && a.down == b.down && a.inter == b.inter;
    };
    if (t.dev != nullptr && std::equal(host.begin(), host.end(), t.host.begin(), t.host.end(), same))
      return &t;
    if (t.dev != nullptr) SPK_TRY(before_move());  // replaced: nothing queued may still read the old table
    t.dev = nullptr;
    SPK_TRY(dev_alloc(t.storage, host.size() * sizeof(cuda::MoeExpert),
                      "the expert table of a " + std::to_string(host.size()) + "-expert layer"));
    SPK_CUDA_CHECK(cudaMemcpy(t.storage.get(), host.data(), host.size() * sizeof(cuda::MoeExpert),
                              cudaMemcpyHostToDevice));
    t.dev = static_cast<const cuda::MoeExpert*>(t.storage.get());
    t.host = std::move(host);
    t.max_inter = max_inter;
    t.vec = vec;
    return &t;
  }
  std::map<const ExpertWeights*, MoeTable> moe_tables_;
  Scratch moe_scratch_{"the mixture-of-experts scratch"};  // moe_ffn's plan, h and y (moe_plan.h)
  int moe_gemm_min_ = env_int("SPARKCTL_MOE_GEMM_MIN_TOKENS", 64, 1, 1 << 30);
  Scratch counters_{"the split-KV counters"};  // per (token, kv head), of the shared kernel; kept zero
  std::shared_ptr<DeviceCounts> counts_ = std::make_shared<DeviceCounts>();
  bool sealed_ = false;  // seal_memory(): every allocation from now on is refused
  int block_size_ = 0;
  int n_tokens_ = 0;
  uint64_t gen_ = 1;  // bumped whenever an internal buffer moves: captured graphs never see stale pointers
};

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend() {
  std::string why;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return make_error(
        std::string("no usable CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found"),
        "use --backend cpu, or check the driver and CUDA_VISIBLE_DEVICES");
  auto be = std::make_unique<CudaBackend>();
  SPK_TRY(be->init());
  return std::unique_ptr<Backend>(std::move(be));
}

}  // namespace spk::cuda
