// A Hugging Face checkpoint directory as it is on disk: `model.safetensors`, or shards listed in
// `model.safetensors.index.json`. Every shard named by the index must exist and every tensor named
// must be in the shard the index says.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/checkpoint/safetensors.h"

namespace spk::rt {

class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& dir);

  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] bool has(std::string_view name) const;
  // Error names the tensor and the directory ("... (is this the right architecture?)").
  [[nodiscard]] Result<TensorView> tensor(std::string_view name) const;
  [[nodiscard]] const TensorInfo* info(std::string_view name) const;
  [[nodiscard]] std::vector<std::string> names() const;
  [[nodiscard]] uint64_t total_bytes() const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, size_t> where_;  // tensor name -> index into files_
};

}  // namespace spk::rt
