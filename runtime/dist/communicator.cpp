#include "runtime/dist/communicator.h"

#include <cstring>

namespace spk::rt::dist {

namespace {
class SingleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  std::string_view name() const override { return "single"; }
  Status all_reduce_sum(float*, size_t, void*) override { return {}; }
  Status all_gather(const float* in, float* out, size_t count, void*) override {
    if (in != out && count) std::memmove(out, in, count * sizeof(float));
    return {};
  }
};

class OfflineCommunicator final : public Communicator {
 public:
  OfflineCommunicator(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string_view name() const override { return "offline"; }
  Status all_reduce_sum(float*, size_t, void*) override { return refuse(); }
  Status all_gather(const float*, float*, size_t, void*) override { return refuse(); }

 private:
  Error refuse() const {
    return make_error("rank " + std::to_string(rank_) + " has no process group (offline communicator)",
                      "join the group before running a step");
  }
  int rank_, world_;
};

Status check_f32(const Tensor& t, const char* what) {
  if (t.dtype != DType::f32)
    return make_error(std::string(what) + " must be f32", "convert before the collective");
  return {};
}
}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

std::unique_ptr<Communicator> make_offline_communicator(int rank, int world) {
  return std::make_unique<OfflineCommunicator>(rank, world);
}

Status all_reduce_sum(Backend& be, Communicator& comm, Tensor& t) {
  SPK_TRY(check_f32(t, "all_reduce_sum tensor"));
  float* p = t.ptr<float>();
  size_t n = static_cast<size_t>(t.numel());
  return be.enqueue_external([&comm, p, n](void* stream) { return comm.all_reduce_sum(p, n, stream); },
                             {0x41520000ull, reinterpret_cast<uint64_t>(p), n}, comm.stream_capturable());
}

Status all_gather_rows(Backend& be, Communicator& comm, const Tensor& in, Tensor& out) {
  SPK_TRY(check_f32(in, "all_gather_rows input"));
  SPK_TRY(check_f32(out, "all_gather_rows output"));
  if (out.numel() != in.numel() * comm.world())
    return make_error("all_gather_rows: out has " + std::to_string(out.numel()) +
                          " values, want world*in = " + std::to_string(in.numel() * comm.world()),
                      "size out as [world * n, ...]");
  const float* src = static_cast<const float*>(in.data);
  float* dst = out.ptr<float>();
  size_t n = static_cast<size_t>(in.numel());
  return be.enqueue_external(
      [&comm, src, dst, n](void* stream) { return comm.all_gather(src, dst, n, stream); },
      {0x41470000ull, reinterpret_cast<uint64_t>(src), reinterpret_cast<uint64_t>(dst), n},
      comm.stream_capturable());
}

}  // namespace spk::rt::dist
