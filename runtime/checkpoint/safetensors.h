// Reading and writing safetensors files. The header is untrusted input: its 8-byte length is bounded,
// its JSON has depth/size caps, every tensor's [begin,end) lies inside the data section, tensors do not
// overlap, and dtype x shape = byte length. Each violation is an error naming the file and the tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/dtype.h"

namespace spk::rt {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets relative to the start of the data section
  uint64_t end = 0;
  [[nodiscard]] uint64_t numel() const;
  [[nodiscard]] uint64_t nbytes() const { return end - begin; }
};

// A read-only view of one tensor's bytes (inside an mmap that outlives it).
struct TensorView {
  const uint8_t* data = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  [[nodiscard]] uint64_t numel() const;
};

// One mmapped, validated .safetensors file.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::vector<TensorInfo>& tensors() const { return tensors_; }
  [[nodiscard]] const TensorInfo* find(std::string_view name) const;
  // The view's data pointer is 8-byte aligned when the writer padded the header (ours and HF's do) and
  // the tensor's offset is aligned; consumers that need alignment must check or memcpy.
  [[nodiscard]] TensorView view(const TensorInfo& t) const;
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;                     // start of the data section
  std::vector<TensorInfo> tensors_;                   // sorted by begin (file order)
  std::map<std::string, size_t, std::less<>> index_;  // name -> index into tensors_
  std::map<std::string, std::string> metadata_;
};

// Writing. Tensors are laid out in the given order; `fill` writes exactly nbytes into `dst`
// (so an 8B-shaped checkpoint never has to sit in memory whole). Written atomically (temp + rename).
struct TensorSpec {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
};
using FillFn = std::function<void(const TensorSpec&, uint8_t* dst, uint64_t nbytes)>;

Status write_safetensors(const std::string& path, const std::vector<TensorSpec>& tensors, const FillFn& fill,
                         const std::map<std::string, std::string>& metadata = {});

// Writes `model.safetensors` when everything fits in `max_shard_bytes`, else
// `model-0000K-of-0000N.safetensors` shards plus `model.safetensors.index.json` (HF layout).
Status write_checkpoint_shards(const std::string& dir, const std::vector<TensorSpec>& tensors,
                               const FillFn& fill, uint64_t max_shard_bytes);

}  // namespace spk::rt
