#include "kernels/cuda/weight_loader.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace spk::cuda {

WeightLoader::WeightLoader(int threads, size_t chunk) : chunk_(std::max<size_t>(chunk, 1 << 20)) {
  if (threads <= 0) threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  for (int i = 0; i < threads; ++i) {
    workers_.push_back(std::make_unique<Worker>());
    Worker* w = workers_.back().get();
    w->thread = std::thread([this, w] { run(*w); });
  }
}

WeightLoader::~WeightLoader() {
  (void)wait();
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) {
    w->thread.join();
    release(*w);
    if (w->stream) cudaStreamDestroy(w->stream);
  }
}

void WeightLoader::copy(void* dst, const void* host, size_t bytes, std::shared_ptr<void> keepalive) {
  {
    std::lock_guard l(mu_);
    for (size_t off = 0; off < bytes; off += chunk_)
      jobs_.push_back(Job{static_cast<char*>(dst) + off, static_cast<const char*>(host) + off,
                          std::min(chunk_, bytes - off), keepalive});
  }
  cv_.notify_all();
}

void WeightLoader::release(Worker& w) {
  for (int b = 0; b < 2; ++b) {
    if (w.pinned[b]) cudaFreeHost(w.pinned[b]);
    if (w.done[b]) cudaEventDestroy(w.done[b]);
    w.pinned[b] = nullptr;
    w.done[b] = nullptr;
  }
}

Status WeightLoader::copy_chunk(Worker& w, const Job& j) {
  if (!w.stream) SPK_CUDA_CHECK(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
  const int b = w.next;
  w.next ^= 1;
  if (!w.pinned[b]) {
    SPK_CUDA_CHECK(cudaMallocHost(&w.pinned[b], chunk_));
    SPK_CUDA_CHECK(cudaEventCreateWithFlags(&w.done[b], cudaEventDisableTiming));
  } else {
    SPK_CUDA_CHECK(cudaEventSynchronize(w.done[b]));  // its previous H2D has left the buffer
  }
  std::memcpy(w.pinned[b], j.src, j.bytes);
  SPK_CUDA_CHECK(cudaMemcpyAsync(j.dst, w.pinned[b], j.bytes, cudaMemcpyHostToDevice, w.stream));
  SPK_CUDA_CHECK(cudaEventRecord(w.done[b], w.stream));
  return ok_status();
}

void WeightLoader::run(Worker& w) {
  while (true) {
    Job j;
    {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop_
      j = std::move(jobs_.front());
      jobs_.pop_front();
      ++busy_;
    }
    Status st = copy_chunk(w, j);  // the source bytes are in the pinned buffer now: `j` may go
    std::lock_guard l(mu_);
    if (!st.ok() && !error_) error_ = st.error();
    if (--busy_ == 0 && jobs_.empty()) idle_cv_.notify_all();
  }
}

Status WeightLoader::wait() {
  std::unique_lock l(mu_);
  idle_cv_.wait(l, [&] { return jobs_.empty() && busy_ == 0; });
  for (auto& w : workers_) {
    if (w->stream) {
      const cudaError_t e = cudaStreamSynchronize(w->stream);
      if (e != cudaSuccess && !error_)
        error_ = cuda_error(e, "cudaStreamSynchronize(weight loader)", __FILE__, __LINE__);
    }
    release(*w);
  }
  if (error_) {
    Error e = *error_;
    error_.reset();
    return e;
  }
  return ok_status();
}

}  // namespace spk::cuda
