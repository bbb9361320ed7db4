// A small fixed pool for the CPU backend's data-parallel loops (linear over output rows, attention over
// (token, head) pairs). The calling thread works too, so threads = 1 means no extra thread at all.
// parallel_for returns when every chunk ran, not when every worker woke: on a loaded machine a worker
// that is scheduled late finds no work left and costs the caller nothing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spk::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // 0 = std::thread::hardware_concurrency()
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  [[nodiscard]] int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) split into chunks of at least `grain` items; returns when all ran.
  // Not reentrant: fn must not call parallel_for.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  // Current job.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  int64_t next_ = 0;     // next chunk start, under mu_
  int64_t pending_ = 0;  // chunks handed out or not yet taken and not finished; 0 = job done
};

}  // namespace spk::cpu
