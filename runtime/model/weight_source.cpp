#include "runtime/model/weight_source.h"

#include <cstring>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/nonfinite.h"

namespace spk::rt {
namespace {

class CheckpointWeights final : public WeightSource {
 public:
  explicit CheckpointWeights(std::shared_ptr<Checkpoint> c) : c_(std::move(c)) {}
  bool has(const std::string& name) const override { return c_->has(name); }
  Result<HostWeight> get(const std::string& name) const override {
    SPK_ASSIGN(TensorView v, c_->tensor(name));
    return HostWeight{v.data, v.dtype, v.shape};
  }
  std::shared_ptr<void> keepalive() const override { return c_; }

 private:
  std::shared_ptr<Checkpoint> c_;
};

}  // namespace

Result<std::shared_ptr<WeightSource>> open_checkpoint_weights(const std::string& dir, bool refuse_nonfinite) {
  SPK_ASSIGN(Checkpoint c, Checkpoint::open(dir));
  SPK_TRY(check_nonfinite(c, refuse_nonfinite ? NonFinitePolicy::refuse : NonFinitePolicy::warn));
  return std::shared_ptr<WeightSource>(
      std::make_shared<CheckpointWeights>(std::make_shared<Checkpoint>(std::move(c))));
}

void MemoryWeights::put_f32(const std::string& name, std::vector<int64_t> shape,
                            const std::vector<float>& values) {
  Entry e{DType::f32, std::move(shape), std::vector<uint8_t>(values.size() * 4)};
  std::memcpy(e.bytes.data(), values.data(), e.bytes.size());
  t_[name] = std::move(e);
}

void MemoryWeights::put_bf16(const std::string& name, std::vector<int64_t> shape,
                             const std::vector<float>& values) {
  Entry e{DType::bf16, std::move(shape), std::vector<uint8_t>(values.size() * 2)};
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = f32_to_bf16(values[i]);
    std::memcpy(e.bytes.data() + 2 * i, &h, 2);
  }
  t_[name] = std::move(e);
}

void MemoryWeights::put_f16(const std::string& name, std::vector<int64_t> shape,
                            const std::vector<float>& values) {
  Entry e{DType::f16, std::move(shape), std::vector<uint8_t>(values.size() * 2)};
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = f32_to_f16(values[i]);
    std::memcpy(e.bytes.data() + 2 * i, &h, 2);
  }
  t_[name] = std::move(e);
}

Result<HostWeight> MemoryWeights::get(const std::string& name) const {
  auto it = t_.find(name);
  if (it == t_.end())
    return make_error("tensor '" + name + "' is not among the in-memory weights",
                      "is this the right architecture?");
  return HostWeight{it->second.bytes.data(), it->second.dtype, it->second.shape};
}

std::shared_ptr<void> MemoryWeights::keepalive() const {
  return std::const_pointer_cast<MemoryWeights>(shared_from_this());
}

namespace {

class LanguageModelWeights final : public WeightSource {
 public:
  explicit LanguageModelWeights(std::shared_ptr<WeightSource> inner) : inner_(std::move(inner)) {}
  [[nodiscard]] bool has(const std::string& name) const override { return inner_->has(resolve(name)); }
  [[nodiscard]] Result<HostWeight> get(const std::string& name) const override {
    return inner_->get(resolve(name));
  }
  [[nodiscard]] std::shared_ptr<void> keepalive() const override { return inner_->keepalive(); }

 private:
  [[nodiscard]] std::string resolve(const std::string& name) const {
    std::vector<std::string> candidates;
    if (name.rfind("model.", 0) == 0) {
      const std::string rest = name.substr(6);
      candidates = {"model.language_model." + rest, "language_model.model." + rest};
    } else if (name.rfind("lm_head.", 0) == 0) {
      candidates = {"language_model." + name};
    }
    for (const auto& c : candidates)
      if (inner_->has(c)) return c;
    return name;  // as stored (an error from get() names it)
  }
  std::shared_ptr<WeightSource> inner_;
};

}  // namespace

std::shared_ptr<WeightSource> language_model_weights(std::shared_ptr<WeightSource> inner) {
  return std::make_shared<LanguageModelWeights>(std::move(inner));
}

}  // namespace spk::rt
