// Collectives for tensor parallelism: one interface, two engines (Gloo for the CPU backend, NCCL for
// CUDA). No hand-written collective algorithms live here; implementations wrap the libraries.
//
// Contracts:
// - Buffers live where the backend keeps activations: host memory for Gloo, device memory for NCCL.
// - `stream` is what Backend::enqueue_external hands over (nullptr on CPU, cudaStream_t on CUDA); NCCL
//   calls are stream-ordered there (and may be captured into a CUDA graph), Gloo calls block.
// - A failed or timed-out collective returns an error naming the peer rank when it is known; after an
//   error the communicator is unusable (the process group decides what happens next).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "kernels/backend.h"
#include "kernels/base/status.h"

namespace spk::rt::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int world() const = 0;
  [[nodiscard]] virtual std::string_view name() const = 0;  // "single" | "gloo" | "nccl"

  // In place: data[i] = sum over ranks of data[i]; `count` f32 values.
  virtual Status all_reduce_sum(float* data, size_t count, void* stream) = 0;
  // out = concat over ranks (rank order) of each rank's `in`; `count` f32 values per rank, so `out`
  // holds world * count values.
  virtual Status all_gather(const float* in, float* out, size_t count, void* stream) = 0;
  // False when a collective synchronizes the stream with the host (gloo-host): the backend then runs
  // it eagerly between captured parts of the step.
  [[nodiscard]] virtual bool stream_capturable() const { return true; }
};

// True when this binary has the NCCL communicator (CUDA and NCCL found at build time).
[[nodiscard]] bool nccl_built();

// world == 1: every collective is the identity (TP=1 runs the same layer code without a library).
std::unique_ptr<Communicator> make_single_communicator();
// Rank `rank` of `world` with no peers: loading a rank's shard works, every collective is an error
// (runtime serve --dry-run-memory sizes one rank without a group).
std::unique_ptr<Communicator> make_offline_communicator(int rank, int world);

// The layers' entry points: run the collective in the backend's op order (Backend::enqueue_external).
// t must be f32 and contiguous; all_gather_rows: out [world * n, ...] from in [n, ...].
Status all_reduce_sum(Backend& be, Communicator& comm, Tensor& t);
Status all_gather_rows(Backend& be, Communicator& comm, const Tensor& in, Tensor& out);

}  // namespace spk::rt::dist
