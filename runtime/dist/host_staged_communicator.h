// Internal: Gloo for CUDA ranks, through pinned host memory ("gloo-host"). A collective copies the device
// buffer to a pinned staging buffer on the backend's stream, waits for it, runs the Gloo collective on
// the host and queues the copy back. It synchronizes with the host, so the backend runs it eagerly
// between the captured parts of a step (stream_capturable() is false). It serves ranks that cannot share
// an NCCL communicator (several ranks on one GPU, as in the gpu tests) and hosts without an NCCL path.
//
// (Host functions, cudaLaunchHostFunc, would keep the collective inside the graph, but CUDA runs them
// on one internal thread per process: two ranks in one process would each block it waiting for the
// other.)
//
// Cost per collective: two copies, a stream sync and the Gloo TCP exchange; at decode sizes (hidden x
// batch floats, a few KiB) it is latency: ~10-30 us of copies and sync plus Gloo's loopback/TCP round
// trips, 2 collectives per layer. On GB10 (unified memory over NVLink-C2C) the copies are cheap, but the
// TCP path and the graph breaks dominate: NCCL over RoCE is what a Spark pair should run.
//
// Staging buffers are keyed by (device pointer, count) and live as long as the communicator.
#pragma once

#include <memory>

#include "runtime/dist/communicator.h"

namespace spk::rt::dist {

// Wraps `inner` (a Gloo communicator). Built only with CUDA; otherwise an error saying so.
Result<std::unique_ptr<Communicator>> make_host_staged_communicator(std::unique_ptr<Communicator> inner);

}  // namespace spk::rt::dist
