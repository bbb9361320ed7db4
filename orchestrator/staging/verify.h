// Completeness of a checkpoint directory, not mere presence: config.json parses, the tokenizer and its
// config are there, and every weight file the index names (or model.safetensors) exists with the size
// its own safetensors header implies (a truncated or partial shard fails). With a reference manifest
// (the head's files), every listed file must also match its size and, when hashed, its XXH3 digest.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::staging {

struct ManifestEntry {
  std::string path;  // relative to the model dir
  std::uint64_t size = 0;
  std::string xxh3;  // 16 hex digits; empty = not hashed
};

struct VerifyReport {
  std::string dir;
  std::uint64_t files = 0;  // weight/config files checked
  std::uint64_t bytes = 0;
  std::vector<std::string> problems;  // each names the file and what is wrong; empty = complete
  std::vector<std::string> removed;   // files only on this node that `prune` removed (relative paths)

  [[nodiscard]] bool complete() const { return problems.empty(); }
  [[nodiscard]] nlohmann::json to_json() const;
  static VerifyReport from_json(const nlohmann::json& j);
};

// Checks `dir`; `expected` (may be empty) adds size/digest checks against the head's files, and every
// file under `dir` that `expected` does not list (the head has no such file) is a problem: a stale file
// can be loaded instead of the head's (an old model.safetensors beside the head's new shards). `prune`
// (only with a non-empty `expected`): those files are removed instead, listed in `removed`; one that
// cannot be removed stays a problem. Not followed: directory symlinks, *.sparkctl-partial (a push's
// resumable leftovers, never loaded). A dir holding both model.safetensors and its index is incomplete.
// `hash_blobs`: a file that is a symlink into a hub cache blob named by its SHA-256 (an LFS blob) must
// hash to that name (reads it once, ~300 MB/s).
VerifyReport verify_model_dir(const std::string& dir, const std::vector<ManifestEntry>& expected = {},
                              bool hash_blobs = false, bool prune = false);

// Every regular file under `dir` (symlinks followed, *.sparkctl-partial skipped), sorted, with size and,
// when `hash`, its XXH3 digest.
Result<std::vector<ManifestEntry>> build_manifest(const std::string& dir, bool hash);

nlohmann::json manifest_to_json(const std::vector<ManifestEntry>& m);
Result<std::vector<ManifestEntry>> manifest_from_json(const nlohmann::json& j);

}  // namespace spk::staging
