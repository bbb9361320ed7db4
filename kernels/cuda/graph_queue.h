// Lazy op queue with CUDA-graph replay. Backend ops are queued as closures together with a fingerprint
// (op id, every pointer and size they launch with, the backend's buffer generation). At a sync point
// the queue is flushed: a fingerprint seen before is captured once into a CUDA graph and replayed
// from then on; a new one runs eagerly. So decode steps (same batch size, same buffers, every step)
// become one graph launch each, with no change to the model code, and a step whose buffers moved can
// never replay a stale graph (its fingerprint differs).
//
// Napkin math: an 8B decode step is ~300 kernel launches; at ~4 us of launch gap each that is ~1.2 ms
// against a ~3.6 ms weight stream, which graph replay removes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/base/status.h"

namespace spk::cuda {

class GraphQueue {
 public:
  using Op = std::function<Status(cudaStream_t)>;

  explicit GraphQueue(bool graphs_enabled) : enabled_(graphs_enabled) {}
  ~GraphQueue();
  GraphQueue(const GraphQueue&) = delete;
  GraphQueue& operator=(const GraphQueue&) = delete;

  void push(Op op, std::span<const uint64_t> fingerprint);
  // Replaces the last queued op (and its fingerprint): peephole fusion of an op with the one before it.
  void replace_last(Op op, std::span<const uint64_t> fingerprint);
  [[nodiscard]] bool empty() const { return ops_.empty(); }
  [[nodiscard]] size_t size() const { return ops_.size(); }
  // Runs everything queued, in order, on `s` (graph replay when possible and `allow_graph`: large
  // prefill steps run eagerly, since their shapes rarely repeat and capture would only add latency).
  Status flush(cudaStream_t s, bool allow_graph = true);
  // Forget every captured graph (e.g. after the backend reallocated an internal buffer).
  void clear();

  struct Stats {
    uint64_t eager_flushes = 0, captures = 0, replays = 0;
  };
  [[nodiscard]] const Stats& stats() const { return stats_; }

 private:
  struct Entry {
    std::vector<uint64_t> fingerprint;
    cudaGraphExec_t exec = nullptr;
    int seen = 0;
  };
  Status run_eager(cudaStream_t s);
  Status capture(cudaStream_t s, Entry& e);

  bool enabled_;
  std::vector<Op> ops_;
  std::vector<uint64_t> fp_;
  size_t last_fp_ = 0;  // where the last op's fingerprint starts in fp_
  std::unordered_map<uint64_t, Entry> cache_;
  Stats stats_;
};

}  // namespace spk::cuda
