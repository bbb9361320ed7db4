#include "runtime/dist/nccl_communicator.h"

#ifdef SPARKCTL_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <vector>
#endif

namespace spk::rt::dist {

#ifdef SPARKCTL_HAVE_NCCL

namespace {

Error nccl_error(ncclResult_t r, const char* what, int rank) {
  return make_error("rank " + std::to_string(rank) + ": " + what + " failed: " + ncclGetErrorString(r),
                    r == ncclSystemError || r == ncclRemoteError ? "a peer rank was lost; restart the group"
                                                                 : "check NCCL_DEBUG=WARN output");
}

// The one NCCL check macro: a failing call becomes an error naming the call and this rank.
#define SPK_NCCL_CHECK(expr, rank)                                               \
  do {                                                                           \
    ncclResult_t spk_nccl_r_ = (expr);                                           \
    if (spk_nccl_r_ != ncclSuccess) return nccl_error(spk_nccl_r_, #expr, rank); \
  } while (0)

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t c, int rank, int world) : c_(c), rank_(rank), world_(world) {}
  ~NcclCommunicator() override { ncclCommAbort(c_); }  // abort: never blocks on a lost peer
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string_view name() const override { return "nccl"; }
  Status all_reduce_sum(float* data, size_t count, void* stream) override {
    SPK_NCCL_CHECK(
        ncclAllReduce(data, data, count, ncclFloat32, ncclSum, c_, static_cast<cudaStream_t>(stream)), rank_);
    return {};
  }
  Status all_gather(const float* in, float* out, size_t count, void* stream) override {
    SPK_NCCL_CHECK(ncclAllGather(in, out, count, ncclFloat32, c_, static_cast<cudaStream_t>(stream)), rank_);
    return {};
  }

 private:
  ncclComm_t c_;
  int rank_, world_;
};

}  // namespace

bool nccl_built() { return true; }

Result<std::unique_ptr<Communicator>> make_nccl_communicator(StoreClient& store, int rank, int world,
                                                             int cuda_device) {
  if (cudaError_t e = cudaSetDevice(cuda_device); e != cudaSuccess)
    return make_error("rank " + std::to_string(rank) + ": cudaSetDevice(" + std::to_string(cuda_device) +
                          ") failed: " + cudaGetErrorString(e),
                      "check CUDA_VISIBLE_DEVICES for this rank");
  ncclUniqueId id;
  try {
    if (rank == 0) {
      SPK_NCCL_CHECK(ncclGetUniqueId(&id), rank);
      store.set("spk/nccl-id", std::vector<char>(id.internal, id.internal + sizeof id.internal));
    } else {
      std::vector<char> v = store.get("spk/nccl-id");
      if (v.size() != sizeof id.internal)
        return make_error("rank " + std::to_string(rank) + ": NCCL unique id of " + std::to_string(v.size()) +
                              " bytes from rank 0",
                          "run the same sparkctl build (same NCCL) on every rank");
      std::memcpy(id.internal, v.data(), v.size());
    }
  } catch (const std::exception& e) {
    return make_error("rank " + std::to_string(rank) + ": exchanging the NCCL unique id failed: " + e.what(),
                      "start every rank; check rank 0's log");
  }
  ncclComm_t c = nullptr;
  SPK_NCCL_CHECK(ncclCommInitRank(&c, world, id, rank), rank);
  return std::unique_ptr<Communicator>(new NcclCommunicator(c, rank, world));
}

#else

bool nccl_built() { return false; }

Result<std::unique_ptr<Communicator>> make_nccl_communicator(StoreClient&, int rank, int, int) {
  return make_error("rank " + std::to_string(rank) + ": the NCCL communicator is not built in this binary",
                    "build with CUDA and NCCL found, or use --backend cpu (Gloo)");
}

#endif

}  // namespace spk::rt::dist
