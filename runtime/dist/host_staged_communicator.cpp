#include "runtime/dist/host_staged_communicator.h"

#ifdef SPARKCTL_HAVE_CUDA
#include <cuda_runtime.h>

#include <map>
#include <utility>
#endif

namespace spk::rt::dist {

#ifdef SPARKCTL_HAVE_CUDA
namespace {

Error cuda_error(const char* what, cudaError_t e) {
  return make_error(std::string("gloo-host communicator: ") + what + ": " + cudaGetErrorString(e),
                    "check the GPU (nvidia-smi) and the rank's log");
}

#define SPK_HOST_STAGED_CHECK(what, call)               \
  do {                                                  \
    const cudaError_t e_ = (call);                      \
    if (e_ != cudaSuccess) return cuda_error(what, e_); \
  } while (0)

class HostStaged final : public Communicator {
 public:
  explicit HostStaged(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  ~HostStaged() override {
    for (auto& [k, p] : pinned_) cudaFreeHost(p);
  }

  [[nodiscard]] int rank() const override { return inner_->rank(); }
  [[nodiscard]] int world() const override { return inner_->world(); }
  [[nodiscard]] std::string_view name() const override { return "gloo-host"; }
  [[nodiscard]] bool stream_capturable() const override { return false; }

  Status all_reduce_sum(float* data, size_t count, void* stream) override {
    if (stream == nullptr) return inner_->all_reduce_sum(data, count, nullptr);  // host buffers
    auto s = static_cast<cudaStream_t>(stream);
    const size_t bytes = count * sizeof(float);
    SPK_ASSIGN(float* h, pinned(data, bytes));
    SPK_HOST_STAGED_CHECK("device-to-host copy", cudaMemcpyAsync(h, data, bytes, cudaMemcpyDeviceToHost, s));
    SPK_HOST_STAGED_CHECK("stream sync", cudaStreamSynchronize(s));
    SPK_TRY(inner_->all_reduce_sum(h, count, nullptr));
    // Queued, not waited for: the next collective's sync orders it before `h` is written again.
    SPK_HOST_STAGED_CHECK("host-to-device copy", cudaMemcpyAsync(data, h, bytes, cudaMemcpyHostToDevice, s));
    return ok_status();
  }

  Status all_gather(const float* in, float* out, size_t count, void* stream) override {
    if (stream == nullptr) return inner_->all_gather(in, out, count, nullptr);
    auto s = static_cast<cudaStream_t>(stream);
    const size_t bytes = count * sizeof(float), out_bytes = bytes * static_cast<size_t>(world());
    SPK_ASSIGN(float* hi, pinned(in, bytes));
    SPK_ASSIGN(float* ho, pinned(out, out_bytes));
    SPK_HOST_STAGED_CHECK("device-to-host copy", cudaMemcpyAsync(hi, in, bytes, cudaMemcpyDeviceToHost, s));
    SPK_HOST_STAGED_CHECK("stream sync", cudaStreamSynchronize(s));
    SPK_TRY(inner_->all_gather(hi, ho, count, nullptr));
    SPK_HOST_STAGED_CHECK("host-to-device copy",
                          cudaMemcpyAsync(out, ho, out_bytes, cudaMemcpyHostToDevice, s));
    return ok_status();
  }

 private:
  Result<float*> pinned(const void* key, size_t bytes) {
    void*& p = pinned_[{key, bytes}];
    if (p == nullptr) SPK_HOST_STAGED_CHECK("pinned staging buffer", cudaMallocHost(&p, bytes));
    return static_cast<float*>(p);
  }

  std::unique_ptr<Communicator> inner_;
  std::map<std::pair<const void*, size_t>, void*> pinned_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_host_staged_communicator(std::unique_ptr<Communicator> inner) {
  return std::unique_ptr<Communicator>(new HostStaged(std::move(inner)));
}
#else
Result<std::unique_ptr<Communicator>> make_host_staged_communicator(std::unique_ptr<Communicator>) {
  return make_error("the gloo-host communicator needs CUDA, and this build has none",
                    "use --backend cpu with gloo, or a build configured with nvcc");
}
#endif

}  // namespace spk::rt::dist
