// Internal: the Gloo engine (CPU backend). Builds a full-mesh gloo context over the rendezvous store.
#pragma once

#include <chrono>
#include <memory>

#include "runtime/dist/communicator.h"
#include "runtime/dist/tcp_store.h"

namespace spk::rt::dist {

// `local_host`: the address peers reach this rank on; `timeout` bounds every collective.
Result<std::unique_ptr<Communicator>> make_gloo_communicator(StoreClient& store, int rank, int world,
                                                             const std::string& local_host,
                                                             std::chrono::milliseconds timeout);

}  // namespace spk::rt::dist
