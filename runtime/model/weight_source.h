// Where a model's weights come from: a checkpoint directory (mmapped safetensors, zero-copy) or, in
// tests, tensors held in memory. Bytes stay valid while keepalive() lives.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/dtype.h"

namespace spk::rt {

struct HostWeight {
  const void* data = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  [[nodiscard]] virtual bool has(const std::string& name) const = 0;
  // Error names the tensor and where it was looked for.
  [[nodiscard]] virtual Result<HostWeight> get(const std::string& name) const = 0;
  [[nodiscard]] virtual std::shared_ptr<void> keepalive() const = 0;
};

// model.safetensors or an indexed set of shards in `dir`. Non-finite (NaN/Inf) weights are counted at
// open (runtime/checkpoint/nonfinite.h): a warning naming the count and the first tensor, or, with
// `refuse_nonfinite`, an error.
Result<std::shared_ptr<WeightSource>> open_checkpoint_weights(const std::string& dir,
                                                              bool refuse_nonfinite = false);

// The language model of a wrapper checkpoint (config.json with text_config): "model.X" is found under
// model.language_model.X (transformers 5) or language_model.model.X (4.x), "lm_head.weight" under
// language_model.lm_head.weight as well; other towers' tensors are never read.
std::shared_ptr<WeightSource> language_model_weights(std::shared_ptr<WeightSource> inner);

// Tensors in memory (tests, tools).
class MemoryWeights final : public WeightSource, public std::enable_shared_from_this<MemoryWeights> {
 public:
  void put_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values);
  // Stores the values rounded to bf16.
  void put_bf16(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values);
  // Stores the values rounded to f16.
  void put_f16(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values);

  [[nodiscard]] bool has(const std::string& name) const override { return t_.count(name) != 0; }
  [[nodiscard]] Result<HostWeight> get(const std::string& name) const override;
  [[nodiscard]] std::shared_ptr<void> keepalive() const override;

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Entry> t_;
};

}  // namespace spk::rt
