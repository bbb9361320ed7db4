// Parallel pinned host->device copies for weight loading. A checkpoint arrives as mmapped pageable
// memory; one cudaMemcpy per tensor from it runs at a few GB/s (the driver stages pageable memory
// itself, one copy at a time, and the page faults of the mapping land on one thread). Here copies are
// cut into chunks; each of `threads` workers copies a chunk into one of its two pinned buffers (taking
// the page faults in parallel) and queues an async H2D from it on its own stream, so host copies,
// faults and PCIe transfers overlap.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "kernels/base/status.h"

namespace spk::cuda {

class WeightLoader {
 public:
  // threads 0 = min(8, hardware threads); chunk = bytes per pinned buffer.
  explicit WeightLoader(int threads = 0, size_t chunk = size_t{32} << 20);
  ~WeightLoader();
  WeightLoader(const WeightLoader&) = delete;
  WeightLoader& operator=(const WeightLoader&) = delete;

  // Queues a copy of `bytes` from `host` to device `dst`. `host` must stay valid while `keepalive`
  // lives (it is held until the copy is done).
  void copy(void* dst, const void* host, size_t bytes, std::shared_ptr<void> keepalive);
  // Waits until every queued copy is on the device; returns the first error since the last wait.
  // Frees the pinned buffers (the loader goes idle until the next copy).
  Status wait();

 private:
  struct Job {
    char* dst;
    const char* src;
    size_t bytes;
    std::shared_ptr<void> keepalive;
  };
  struct Worker {
    std::thread thread;
    cudaStream_t stream = nullptr;
    void* pinned[2] = {nullptr, nullptr};
    cudaEvent_t done[2] = {nullptr, nullptr};
    int next = 0;
  };
  void run(Worker& w);
  Status copy_chunk(Worker& w, const Job& j);
  static void release(Worker& w);

  size_t chunk_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Job> jobs_;
  int busy_ = 0;
  bool stop_ = false;
  std::optional<Error> error_;
};

}  // namespace spk::cuda
