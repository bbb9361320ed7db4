// The CUDA backend's core: memory (every device allocation counted, sealed after the KV pool), the op
// stream (graph queue, chunked submit, flush), the step's metadata and the scratch reservation. The ops
// live in their families' folders (backend_impl.h lists them).
#include "kernels/cuda/cuda_backend.h"

#include <cstdio>

#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {
namespace {

// A small upload queued in op order (upload() says why through the device arena).
Status queued_upload(const char* src, char* mid, void* dst, size_t bytes, cudaStream_t s) {
  SPK_CUDA_CHECK(cudaMemcpyAsync(mid, src, bytes, cudaMemcpyHostToDevice, s));
  return copy_device(mid, dst, static_cast<int64_t>(bytes), s);
}

}  // namespace

CudaBackend::~CudaBackend() {
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

Status CudaBackend::init() {
  SPK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SPK_CUDA_CHECK(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
  SPK_CUDA_CHECK(cudaMallocHost(&arena_, kArenaBytes));
  int dev = 0;
  SPK_CUDA_CHECK(cudaGetDevice(&dev));
  SPK_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, dev));
  return dev_alloc(arena_d_, kArenaBytes, "the upload arena");
}

Result<Tensor> CudaBackend::alloc(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.device = Device::cuda;
  SPK_TRY(dev_alloc(t.storage, t.nbytes(), "tensor " + describe(t)));
  t.data = t.storage.get();
  SPK_CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
  return t;
}

Status CudaBackend::upload(const Tensor& dst, const void* host, size_t bytes) {
  if (bytes > dst.nbytes()) return op_error("upload", std::to_string(bytes) + " bytes into " + describe(dst));
  if (bytes == 0) return ok_status();
  const size_t slot = (arena_used_ + 15) / 16 * 16;
  if (queued_uploads_ && bytes <= kMaxQueuedUpload && slot + bytes <= kArenaBytes) {
    // Copied now (the caller may reuse `host`); the H2D runs in op order, inside the step's graph:
    // pinned arena -> device arena (a memcpy node between two allocations the backend owns for its
    // lifetime), then a copy kernel to `dst`. A memcpy node straight into `dst` breaks graph replay
    // once `dst` is freed and another allocation lands at its address (seen on the H200: the
    // backend test crashed on its first replay after reallocating its tensors).
    char* src = static_cast<char*>(arena_) + slot;
    std::memcpy(src, host, bytes);
    arena_used_ = slot + bytes;
    launch(OpId::upload, queued_upload, src, static_cast<char*>(arena_d_.get()) + slot, dst.data, bytes,
           kStream);
    return ok_status();
  }
  SPK_TRY(flush());
  SPK_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, bytes, cudaMemcpyHostToDevice, stream_));
  SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `host` may be reused by the caller right away
  return ok_status();
}

Status CudaBackend::download(const Tensor& src, void* host, size_t bytes) {
  if (bytes > src.nbytes())
    return op_error("download", std::to_string(bytes) + " bytes from " + describe(src));
  SPK_TRY(flush());
  SPK_CUDA_CHECK(cudaMemcpyAsync(host, src.data, bytes, cudaMemcpyDeviceToHost, stream_));
  SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ok_status();
}

Status CudaBackend::enqueue_external(std::function<Status(void*)> fn, std::vector<uint64_t> fingerprint,
                                     bool capturable) {
  if (!capturable) {  // the ops before it run (graphs as usual), then fn on the stream, eagerly
    SPK_TRY(flush());
    return fn(static_cast<void*>(stream_));
  }
  // The op id and a hash of the caller's values (pointers/sizes, any number of them) keep replay exact.
  uint64_t h = op_id(OpId::external);
  for (uint64_t v : fingerprint) h = h * 0x100000001b3ULL ^ v;
  Fingerprint fp;
  fp.add(op_id(OpId::external)), fp.add(h);
  push([fn = std::move(fn)](cudaStream_t s) { return fn(static_cast<void*>(s)); }, fp);
  return ok_status();
}

Status CudaBackend::submit() {
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

Status CudaBackend::synchronize() {
  SPK_TRY(flush());
  SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return ok_status();
}

Status CudaBackend::begin_step(const StepMeta& meta) {
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

// Grows a scratch buffer to `need` bytes (never shrinks; zero-filled when asked). Growing moves it: what
// is queued runs first and gen_ moves on, so no captured graph keeps the old address.
Status CudaBackend::grow(Scratch& buf, size_t need, bool zero) {
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
Status CudaBackend::before_move() {
  SPK_TRY(flush());
  SPK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  ++gen_;
  queue_.clear();
  return ok_status();
}

// Every device allocation of the backend goes through here: counted, and refused once sealed (naming
// the buffer and the knob), never a bare cudaMalloc failure late in a step.
Status CudaBackend::dev_alloc(std::shared_ptr<void>& out, size_t bytes, const std::string& what) {
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

uint64_t CudaBackend::scratch_bytes(const StepShapes& shapes) const {
  return plan_scratch(shapes, attn_knobs()).device_bytes();
}

Status CudaBackend::reserve_scratch(const StepShapes& shapes) {
  const ScratchNeeds need = plan_scratch(shapes, attn_knobs());
  SPK_TRY(grow(partial_, need.partial));
  SPK_TRY(grow(counters_, need.counters, /*zero=*/true));
  SPK_TRY(grow(moe_scratch_, need.moe));
  SPK_TRY(ensure_gemm(need.gemm_tokens, need.gemm_k));
  SPK_TRY(ensure_meta(need.meta_tokens, need.meta_tiles, need.meta_tables));
  SPK_TRY(ensure_sample(need.sample_rows));
  return synchronize();
}

MemoryCounters CudaBackend::memory_counters() const {
  MemoryCounters c{counts_->live, counts_->peak, counts_->allocations, counts_->sealed, sealed_};
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) c.device_free = free_b, c.device_total = total_b;
  return c;
}

// Runs what is queued (graph replay when the step repeats) after pending weight copies landed.
Status CudaBackend::flush() {
  forget_peepholes();  // no fusion spans a flush
  if (loader_) SPK_TRY(loader_->wait());
  return queue_.flush(stream_, n_tokens_ <= kMaxGraphTokens);
}

// Room for a step of n tokens, `tiles` tile words and `tables` block table entries in the metadata
// buffer (and its pinned mirror): [positions | slots | table offsets : capacity n each | tiles | tables].
Status CudaBackend::ensure_meta(size_t n, size_t tiles, size_t tables) {
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

Result<std::unique_ptr<Backend>> make_cuda_backend() {
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
