#include "kernels/cuda/graph_queue.h"

#include "kernels/cuda/cuda_check.h"

namespace spk::cuda {
namespace {

// One per step chunk (Backend::submit), decode batch size and buffer set; cleared when exceeded.
constexpr size_t kMaxGraphs = 1024;
constexpr size_t kMinOpsForGraph = 4;

uint64_t hash_of(const std::vector<uint64_t>& v) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t x : v) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

GraphQueue::~GraphQueue() { clear(); }

void GraphQueue::clear() {
  for (auto& [h, e] : cache_)
    if (e.exec) cudaGraphExecDestroy(e.exec);
  cache_.clear();
}

void GraphQueue::push(Op op, std::span<const uint64_t> fingerprint) {
  ops_.emplace_back();
  last_fp_ = fp_.size();
  replace_last(std::move(op), fingerprint);
}

void GraphQueue::replace_last(Op op, std::span<const uint64_t> fingerprint) {
  ops_.back() = std::move(op);
  fp_.resize(last_fp_);
  fp_.push_back(0xfeedull ^ fingerprint.size());
  fp_.insert(fp_.end(), fingerprint.begin(), fingerprint.end());
}

Status GraphQueue::run_eager(cudaStream_t s) {
  for (auto& op : ops_) SPK_TRY(op(s));
  return ok_status();
}

Status GraphQueue::capture(cudaStream_t s, Entry& e) {
  SPK_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  Status st = run_eager(s);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (!st.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return st;
  }
  if (end != cudaSuccess) return cuda_error(end, "cudaStreamEndCapture", __FILE__, __LINE__);
  const cudaError_t inst = cudaGraphInstantiate(&e.exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    e.exec = nullptr;
    return cuda_error(inst, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  ++stats_.captures;
  return ok_status();
}

Status GraphQueue::flush(cudaStream_t s, bool allow_graph) {
  if (ops_.empty()) return ok_status();
  Status st = ok_status();
  if (!enabled_ || !allow_graph || ops_.size() < kMinOpsForGraph) {
    st = run_eager(s);
    ++stats_.eager_flushes;
  } else {
    const uint64_t h = hash_of(fp_);
    auto it = cache_.find(h);
    if (it != cache_.end() && it->second.fingerprint != fp_) it = cache_.end();  // hash collision: eager
    if (it == cache_.end()) {
      if (cache_.size() >= kMaxGraphs) clear();
      if (cache_.find(h) == cache_.end()) cache_[h] = Entry{fp_, nullptr, 1};
      st = run_eager(s);
      ++stats_.eager_flushes;
    } else if (!it->second.exec) {
      st = capture(s, it->second);  // second sighting: capture, then launch below
      if (st.ok()) {
        const cudaError_t e = cudaGraphLaunch(it->second.exec, s);
        if (e != cudaSuccess) st = cuda_error(e, "cudaGraphLaunch", __FILE__, __LINE__);
        ++stats_.replays;
      }
    } else {
      const cudaError_t e = cudaGraphLaunch(it->second.exec, s);
      if (e != cudaSuccess) st = cuda_error(e, "cudaGraphLaunch", __FILE__, __LINE__);
      ++stats_.replays;
    }
  }
  ops_.clear();
  fp_.clear();
  return st;
}

}  // namespace spk::cuda
