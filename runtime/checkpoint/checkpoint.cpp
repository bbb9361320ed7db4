// Checkpoint directory: model.safetensors or an index + shards; both at once is refused (one is stale).
// The index is untrusted too: size cap, shard names must be plain file names inside the directory.
#include "runtime/checkpoint/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "runtime/checkpoint/safetensors_limits.h"
#include "runtime/checkpoint/utf8_safe.h"

namespace spk::rt {

namespace {

namespace fs = std::filesystem;

bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

}  // namespace

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  Checkpoint c;
  c.dir_ = dir;
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  std::error_code ec;
  // Both layouts at once is a stale leftover of a layout change (a reused directory re-exported with
  // another shard size, a worker staged before the head's checkpoint moved to shards): which one is the
  // head's cannot be told from here, and loading either could differ from what the other ranks load.
  if (fs::exists(single, ec) && fs::exists(index, ec))
    return make_error(dir +
                          " holds both model.safetensors and model.safetensors.index.json (one is stale "
                          "from an earlier layout)",
                      "remove the stale one (the file the source checkpoint does not have), or stage the "
                      "lane again: `sparkctl stage LANE` makes each node's copy equal to the head's");
  if (fs::is_regular_file(single, ec)) {
    SPK_ASSIGN(auto f, SafetensorsFile::open(single));
    std::shared_ptr<SafetensorsFile> sf(std::move(f));
    for (const auto& t : sf->tensors()) c.where_.emplace(t.name, 0);
    c.files_.push_back(std::move(sf));
    return c;
  }
  if (!fs::is_regular_file(index, ec)) {
    if (!fs::is_directory(dir, ec))
      return make_error("checkpoint directory " + dir + " does not exist", "check the model path");
    return make_error(
        "no model.safetensors or model.safetensors.index.json in " + dir,
        "point at a Hugging Face checkpoint directory, or make one with `sparkctl dev synth-model`");
  }
  const auto size = fs::file_size(index, ec);
  if (ec || size > kMaxIndexBytes)
    return make_error(
        index + ": " +
            (ec ? ec.message()
                : "size " + std::to_string(size) + " exceeds the cap of " + std::to_string(kMaxIndexBytes)),
        "re-download the checkpoint");
  SPK_ASSIGN(std::string text, read_file(index));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return make_error(index + ": not valid JSON: " + utf8_safe(e.what()), "re-download the checkpoint");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return make_error(index + ": missing object \"weight_map\"", "re-download the checkpoint");
  std::unordered_map<std::string, size_t> shard_of;  // shard file name -> index into files_
  for (const auto& [name, shard_j] : j["weight_map"].items()) {
    if (!shard_j.is_string())
      return make_error(index + ": weight_map entry for tensor '" + name + "' is not a string",
                        "re-download the checkpoint");
    const std::string shard = shard_j.get<std::string>();
    if (!plain_file_name(shard))
      return make_error(index + ": tensor '" + name + "' maps to '" + shard +
                            "', not a file name in the checkpoint directory",
                        "re-download the checkpoint");
    auto it = shard_of.find(shard);
    if (it == shard_of.end()) {
      const std::string p = dir + "/" + shard;
      if (!fs::is_regular_file(p, ec))
        return make_error("shard " + p + " (named by " + index + " for tensor '" + name + "') is missing",
                          "finish the download: a partial checkpoint cannot load");
      SPK_ASSIGN(auto f, SafetensorsFile::open(p));
      c.files_.push_back(std::shared_ptr<SafetensorsFile>(std::move(f)));
      it = shard_of.emplace(shard, c.files_.size() - 1).first;
    }
    if (c.files_[it->second]->find(name) == nullptr)
      return make_error(
          "tensor '" + name + "' is not in shard " + dir + "/" + shard + " although " + index + " says so",
          "re-download the checkpoint");
    c.where_.emplace(name, it->second);
  }
  return c;
}

bool Checkpoint::has(std::string_view name) const { return where_.count(std::string(name)) != 0; }

const TensorInfo* Checkpoint::info(std::string_view name) const {
  auto it = where_.find(std::string(name));
  return it == where_.end() ? nullptr : files_[it->second]->find(name);
}

Result<TensorView> Checkpoint::tensor(std::string_view name) const {
  auto it = where_.find(std::string(name));
  if (it == where_.end())
    return make_error("tensor '" + std::string(name) + "' not found in checkpoint " + dir_,
                      "is this the right architecture?");
  const SafetensorsFile& f = *files_[it->second];
  return f.view(*f.find(name));
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [n, i] : where_) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, i] : where_) n += files_[i]->find(name)->nbytes();
  return n;
}

}  // namespace spk::rt
