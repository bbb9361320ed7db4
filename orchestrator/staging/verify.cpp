#include "orchestrator/staging/verify.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "kernels/base/fs.h"
#include "orchestrator/staging/hub/sha256.h"
#include "orchestrator/transport/file_hash.h"

namespace spk::staging {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool regular(const std::string& p, std::uint64_t* size = nullptr) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (size) *size = static_cast<std::uint64_t>(st.st_size);
  return true;
}

// A safetensors file is 8 bytes of header length N, N bytes of JSON, then the tensor data; its size
// must be 8 + N + the largest data_offsets end.
std::string safetensors_problem(const std::string& path, std::uint64_t size) {
  std::ifstream f(path, std::ios::binary);
  std::uint64_t n = 0;
  if (!f.read(reinterpret_cast<char*>(&n), 8)) return "shorter than a safetensors header";
  if (n > (100ull << 20) || 8 + n > size)
    return "header length " + std::to_string(n) + " runs past the file end";
  std::string h(n, '\0');
  if (!f.read(h.data(), static_cast<std::streamsize>(n))) return "header cannot be read";
  json j = json::parse(h, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "header is not JSON";
  std::uint64_t end = 0;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    if (!it.value().is_object()) return "header entry '" + it.key() + "' is not an object";
    const auto o = it.value().find("data_offsets");
    if (o != it.value().end() && o->is_array() && o->size() == 2 && (*o)[1].is_number_unsigned())
      end = std::max(end, (*o)[1].get<std::uint64_t>());
  }
  if (8 + n + end != size)
    return "size " + std::to_string(size) + " bytes but its header says " + std::to_string(8 + n + end) +
           " (truncated or partial download)";
  return {};
}

// `p` (found under `dir`) relative to `dir`, lexically: fs::relative resolves a file symlink first, so a
// hub snapshot's config.json (a link into blobs/) would come out as ../../blobs/<etag>.
std::string rel_path(const fs::path& p, const std::string& dir) {
  return p.lexically_relative(dir).generic_string();
}

// Files under `dir` the head's manifest does not list: removed (prune) or reported.
void extra_files(const std::string& dir, const std::vector<ManifestEntry>& expected, bool prune,
                 VerifyReport& r) {
  std::set<std::string> want;
  for (const auto& e : expected) want.insert(e.path);
  std::vector<std::string> extra;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code sec;
    const auto st = it->symlink_status(sec);
    if (sec || fs::is_directory(st)) continue;
    // A symlink to a directory is neither descended (the iterator does not follow it) nor listed by
    // the head's manifest; one to a file (a hub snapshot's blob link) or a dangling one counts.
    if (fs::is_symlink(st) && fs::is_directory(it->path(), sec)) continue;
    std::string rel = rel_path(it->path(), dir);
    if (rel.empty() || rel.ends_with(".sparkctl-partial")) continue;
    if (!want.count(rel)) extra.push_back(std::move(rel));
  }
  if (ec) {
    r.problems.push_back(dir + ": cannot list it to compare with the head's files: " + ec.message());
    return;
  }
  std::sort(extra.begin(), extra.end());
  for (const auto& rel : extra) {
    if (prune) {
      std::error_code rec;
      if (fs::remove(dir + "/" + rel, rec) || !fs::exists(fs::symlink_status(dir + "/" + rel))) {
        r.removed.push_back(rel);
        continue;
      }
      r.problems.push_back(
          rel + ": only on this node (the head has no such file) and it cannot be removed: " + rec.message() +
          " (remove it by hand: a stale file can be loaded instead of the head's)");
      continue;
    }
    r.problems.push_back(rel +
                         ": only on this node, the head has no such file (a stale file can be loaded instead "
                         "of the head's: `sparkctl stage LANE` removes it from a staged cache dir; in a "
                         "lane's own model path, remove it by hand)");
  }
}

}  // namespace

json VerifyReport::to_json() const {
  json j{{"dir", dir}, {"complete", complete()}, {"files", files}, {"bytes", bytes}, {"problems", problems}};
  if (!removed.empty()) j["removed"] = removed;
  return j;
}

VerifyReport VerifyReport::from_json(const json& j) {
  VerifyReport r;
  if (!j.is_object()) {
    r.problems.push_back("stage-verify answered " + std::string(j.type_name()) + ", not an object");
    return r;
  }
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; };
  auto u64 = [&](const char* k) {
    return j.contains(k) && j[k].is_number_unsigned() ? j[k].get<std::uint64_t>() : std::uint64_t{0};
  };
  r.dir = str("dir");
  r.files = u64("files");
  r.bytes = u64("bytes");
  if (j.contains("problems") && j["problems"].is_array())
    for (const auto& p : j["problems"]) r.problems.push_back(p.is_string() ? p.get<std::string>() : p.dump());
  if (j.contains("removed") && j["removed"].is_array())
    for (const auto& p : j["removed"])
      if (p.is_string()) r.removed.push_back(p.get<std::string>());
  return r;
}

VerifyReport verify_model_dir(const std::string& dir, const std::vector<ManifestEntry>& expected,
                              bool hash_blobs, bool prune) {
  VerifyReport r;
  r.dir = dir;
  auto problem = [&](const std::string& file, const std::string& what) {
    r.problems.push_back(file + ": " + what);
  };
  if (!fs::is_directory(dir)) {
    problem(dir, "no such directory (stage the model first: sparkctl stage LANE)");
    return r;
  }
  // First, so that the checks below see the tree as pruned (a stale index would name stale shards).
  if (!expected.empty()) extra_files(dir, expected, prune, r);
  auto check_file = [&](const std::string& rel, std::uint64_t* size) {
    if (!regular(dir + "/" + rel, size)) {
      problem(rel, "missing");
      return false;
    }
    ++r.files;
    return true;
  };
  std::uint64_t sz = 0;
  if (check_file("config.json", &sz)) {
    auto text = read_file(dir + "/config.json");
    if (!text.ok() || json::parse(*text, nullptr, false).is_discarded())
      problem("config.json", "not valid JSON");
  }
  if (!regular(dir + "/tokenizer.json") && !regular(dir + "/tokenizer.model"))
    problem("tokenizer.json", "missing (and no tokenizer.model)");
  check_file("tokenizer_config.json", nullptr);

  std::set<std::string> shards;
  const std::string index = "model.safetensors.index.json";
  if (regular(dir + "/" + index)) {
    auto text = read_file(dir + "/" + index);
    json j = text.ok() ? json::parse(*text, nullptr, false) : json();
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      problem(index, "not JSON with a weight_map");
    else
      for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it)
        if (it.value().is_string()) shards.insert(it.value().get<std::string>());
    if (shards.empty()) problem(index, "names no shard");
    if (fs::exists(fs::symlink_status(dir + "/model.safetensors")))
      problem("model.safetensors",
              "stale beside " + index +
                  ": the loader refuses a dir with both (remove the one the head does not have, or stage "
                  "again)");
  } else if (regular(dir + "/model.safetensors")) {
    shards.insert("model.safetensors");
  } else {
    problem("model.safetensors", "missing (and no " + index + ")");
  }
  for (const auto& s : shards) {
    if (s.find("..") != std::string::npos || s.starts_with("/")) {
      problem(index, "names a shard outside the directory: " + s);
      continue;
    }
    std::uint64_t size = 0;
    if (!check_file(s, &size)) continue;
    r.bytes += size;
    if (auto p = safetensors_problem(dir + "/" + s, size); !p.empty()) problem(s, p);
    std::error_code ec;
    fs::path target = fs::read_symlink(dir + "/" + s, ec);
    std::string name = ec ? std::string() : target.filename().string();
    if (hash_blobs && name.size() == 64 && name.find_first_not_of("0123456789abcdef") == std::string::npos) {
      auto h = sha256_file_hex(dir + "/" + s);
      if (!h.ok())
        problem(s, h.error().message);
      else if (*h != name)
        problem(s, "sha256 " + *h + " but its hub blob is named " + name +
                       " (corrupted; delete the blob and stage again)");
    }
  }
  for (const auto& e : expected) {
    std::uint64_t size = 0;
    if (e.path.empty() || e.path.front() == '/' || e.path.find("..") != std::string::npos) {
      problem(e.path, "refused: not a path inside the model dir");
      continue;
    }
    if (!regular(dir + "/" + e.path, &size)) {
      problem(e.path, "missing (the head has it)");
      continue;
    }
    if (size != e.size) {
      problem(e.path, "size " + std::to_string(size) + " bytes, the head's is " + std::to_string(e.size));
      continue;
    }
    if (e.xxh3.empty()) continue;
    auto h = file_xxh3_hex(dir + "/" + e.path);
    if (!h.ok())
      problem(e.path, h.error().message);
    else if (*h != e.xxh3)
      problem(e.path, "content differs from the head's (xxh3 " + *h + ", head " + e.xxh3 + ")");
  }
  return r;
}

Result<std::vector<ManifestEntry>> build_manifest(const std::string& dir, bool hash) {
  std::vector<ManifestEntry> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::string rel = rel_path(it->path(), dir);
    if (rel.ends_with(".sparkctl-partial")) continue;
    ManifestEntry e{rel, 0, {}};
    regular(it->path().string(), &e.size);
    if (hash) {
      SPK_ASSIGN(e.xxh3, file_xxh3_hex(it->path().string()));
    }
    out.push_back(std::move(e));
  }
  if (ec) return make_error("cannot list " + dir + ": " + ec.message(), "check the model dir");
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

json manifest_to_json(const std::vector<ManifestEntry>& m) {
  json a = json::array();
  for (const auto& e : m) a.push_back({{"path", e.path}, {"size", e.size}, {"xxh3", e.xxh3}});
  return a;
}

Result<std::vector<ManifestEntry>> manifest_from_json(const json& j) {
  std::vector<ManifestEntry> out;
  if (!j.is_array()) return make_error("manifest must be a list", "fix the caller");
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("path") || !e["path"].is_string() || !e.contains("size") ||
        !e["size"].is_number_unsigned())
      return make_error("manifest entry " + e.dump() + " needs path and size", "fix the caller");
    if (e.contains("xxh3") && !e["xxh3"].is_string())
      return make_error("manifest entry for '" + e["path"].get<std::string>() + "': xxh3 is not a string",
                        "fix the caller");
    out.push_back({e["path"].get<std::string>(), e["size"].get<std::uint64_t>(), e.value("xxh3", "")});
  }
  return out;
}

}  // namespace spk::staging
