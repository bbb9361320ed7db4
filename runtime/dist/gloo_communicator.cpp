#include "runtime/dist/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <atomic>

namespace spk::rt::dist {

namespace {

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx,
                   std::shared_ptr<gloo::transport::Device> dev)
      : ctx_(std::move(ctx)), dev_(std::move(dev)) {}
  int rank() const override { return ctx_->rank; }
  int world() const override { return ctx_->size; }
  std::string_view name() const override { return "gloo"; }

  Status all_reduce_sum(float* data, size_t count, void*) override {
    if (broken_) return broken_error();
    if (count == 0) return {};
    try {
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(data, count);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(tag_++);
      gloo::allreduce(opts);
    } catch (const std::exception& e) {
      return fail("all_reduce_sum", e.what());
    }
    return {};
  }

  Status all_gather(const float* in, float* out, size_t count, void*) override {
    if (broken_) return broken_error();
    if (count == 0) return {};
    try {
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(const_cast<float*>(in), count);
      opts.setOutput(out, count * static_cast<size_t>(ctx_->size));
      opts.setTag(tag_++);
      gloo::allgather(opts);
    } catch (const std::exception& e) {
      return fail("all_gather", e.what());
    }
    return {};
  }

 private:
  Error fail(const char* op, const std::string& what) {
    broken_ = true;
    why_ = std::string("gloo ") + op + " on rank " + std::to_string(ctx_->rank) + " failed: " + what;
    return broken_error();
  }
  Error broken_error() const {
    return make_error(why_.empty() ? "communicator is unusable after an earlier error" : why_,
                      "a peer rank was lost or timed out; restart the group");
  }
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  std::shared_ptr<gloo::transport::Device> dev_;
  uint32_t tag_ = 1;
  bool broken_ = false;
  std::string why_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_gloo_communicator(StoreClient& store, int rank, int world,
                                                             const std::string& local_host,
                                                             std::chrono::milliseconds timeout) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = local_host;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
    ctx->setTimeout(timeout);
    ctx->connectFullMesh(store, dev);
    return std::unique_ptr<Communicator>(new GlooCommunicator(std::move(ctx), std::move(dev)));
  } catch (const std::exception& e) {
    return make_error(
        "rank " + std::to_string(rank) + ": gloo full-mesh connect on " + local_host + " failed: " + e.what(),
        "check that every rank can reach the others' fabric addresses");
  }
}

}  // namespace spk::rt::dist
