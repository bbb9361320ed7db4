// Internal: the NCCL engine (CUDA backend). Rank 0 makes the unique id and publishes it through the
// rendezvous store; every rank then joins the communicator on `cuda_device`. Built only when CUDA and
// NCCL are found (SPARKCTL_HAVE_NCCL); otherwise make_nccl_communicator says it is not built.
#pragma once

#include <memory>

#include "runtime/dist/communicator.h"
#include "runtime/dist/tcp_store.h"

namespace spk::rt::dist {

Result<std::unique_ptr<Communicator>> make_nccl_communicator(StoreClient& store, int rank, int world,
                                                             int cuda_device);

}  // namespace spk::rt::dist
