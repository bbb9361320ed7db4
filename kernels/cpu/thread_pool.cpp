#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace spk::cpu {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  std::unique_lock<std::mutex> lk(mu_);
  while (fn_ != nullptr && next_ < n_) {
    const int64_t begin = next_;
    next_ += chunk_;
    const auto* fn = fn_;
    const int64_t end = std::min(n_, begin + chunk_);
    lk.unlock();
    (*fn)(begin, end);
    lk.lock();
    if (--pending_ == 0) done_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t threads = size();
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  // ~4 chunks per thread balances uneven rows without much locking.
  const int64_t chunk = std::max(grain, (n + threads * 4 - 1) / (threads * 4));
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_ = 0;
    pending_ = (n + chunk - 1) / chunk;
    ++generation_;
  }
  wake_.notify_all();
  run_chunks();
  std::unique_lock<std::mutex> lk(mu_);
  done_.wait(lk, [&] { return pending_ == 0; });
  fn_ = nullptr;
}

}  // namespace spk::cpu
