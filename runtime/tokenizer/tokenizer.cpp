// Tokenizer::load (tokenizer.json + optional tokenizer_config.json next to it) and the streaming
// IncrementalDecoder.
#include "runtime/tokenizer/tokenizer.h"

#include <filesystem>

#include "kernels/base/fs.h"
#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace spk::rt {

Result<std::shared_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  if (!fs::exists(file, ec))
    return make_error("tokenizer: " + file.string() + " does not exist",
                      "pass the model directory that holds tokenizer.json, or the file itself");
  // Untrusted files: a device or FIFO would be read forever; real tokenizer.json files are < 50 MB.
  constexpr uintmax_t kMaxBytes = 512ull << 20;
  auto checked_read = [&](const fs::path& f) -> Result<std::string> {
    if (!fs::is_regular_file(f, ec))
      return make_error("tokenizer: " + f.string() + " is not a regular file", "point at the real file");
    if (const auto n = fs::file_size(f, ec); !ec && n > kMaxBytes)
      return make_error("tokenizer: " + f.string() + " is " + std::to_string(n) + " bytes, over the cap of " +
                            std::to_string(kMaxBytes),
                        "check that this is a tokenizer file");
    return read_file(f.string());
  };
  SPK_ASSIGN(std::string text, checked_read(file));
  std::string config;
  fs::path cfg = file.parent_path() / "tokenizer_config.json";
  if (fs::exists(cfg, ec)) {
    SPK_ASSIGN(config, checked_read(cfg));
  }
  SPK_ASSIGN(auto tok, HfTokenizer::from_json(text, config, file.string()));
  return std::shared_ptr<Tokenizer>(std::move(tok));
}

IncrementalDecoder::IncrementalDecoder(std::shared_ptr<const Tokenizer> tok, bool skip_special_tokens)
    : tok_(std::move(tok)), skip_special_(skip_special_tokens) {}

// ids_ holds only the ids since the last point where all bytes were emitted, so each push costs
// O(pending bytes). Output never includes clean-up rewrites (they would need lookahead); for
// tokenizers without clean_up_tokenization_spaces the concatenation equals decode(all ids).
std::string IncrementalDecoder::push(int32_t id) {
  ids_.push_back(id);
  auto hf = std::dynamic_pointer_cast<const HfTokenizer>(tok_);
  if (!hf) {  // another implementation: hold text while it ends in U+FFFD (at most 4 ids)
    std::string s = tok_->decode(ids_, skip_special_);
    bool partial = s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0 && ids_.size() < 4;
    if (partial) return {};
    std::string out = s.substr(std::min(emitted_, s.size()));
    ids_.clear();
    emitted_ = 0;
    return out;
  }
  std::string raw = hf->decode_bytes(ids_, skip_special_);
  size_t complete = raw.size() - utf8::incomplete_tail(raw);
  std::string out = complete > emitted_
                        ? utf8::sanitize(std::string_view(raw).substr(emitted_, complete - emitted_))
                        : std::string();
  emitted_ = std::max(emitted_, complete);
  if (complete == raw.size()) {
    ids_.clear();
    emitted_ = 0;
  }
  return out;
}

std::string IncrementalDecoder::finish() {
  std::string out;
  if (auto hf = std::dynamic_pointer_cast<const HfTokenizer>(tok_)) {
    std::string raw = hf->decode_bytes(ids_, skip_special_);
    if (raw.size() > emitted_) out = utf8::sanitize(std::string_view(raw).substr(emitted_));
  } else if (!ids_.empty()) {
    std::string s = tok_->decode(ids_, skip_special_);
    out = s.substr(std::min(emitted_, s.size()));
  }
  ids_.clear();
  emitted_ = 0;
  return out;
}

}  // namespace spk::rt
