// Internal: the pre-tokenizer chain of tokenizer.json (Sequence of Split, ByteLevel and Metaspace, the
// steps the supported tokenizers use), producing the pieces (words) for the BPE model.
#pragma once

#include <deque>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/tokenizer/metaspace.h"
#include "runtime/tokenizer/regex_split.h"

namespace spk::rt {

class PreTokenizer {
 public:
  // `config` is tokenizer.json's "pre_tokenizer" (null: the whole section is one piece).
  static Result<PreTokenizer> from_json(const nlohmann::json& config);

  // Appends the pieces of `text` to `out`. Pieces view `text` or strings kept in `arena`.
  // `at_start`: `text` begins the whole input (Metaspace's prepend_scheme "first").
  Status split(std::string_view text, bool at_start, std::vector<std::string_view>& out,
               std::deque<std::string>& arena) const;
  [[nodiscard]] bool has_byte_level() const;

 private:
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  // Split delimiter behaviour as Rust `tokenizers` defines it (the JS reference treats the two Merged*
  // ones as Isolated; they agree whenever the pattern does not match, as in Gemma's files).
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };
  struct Step {
    Kind kind = Kind::kSplit;
    std::shared_ptr<const Regex> regex;  // Split pattern, or ByteLevel's GPT-2 regex when use_regex
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
    Metaspace metaspace;
  };
  static Status add_steps(const nlohmann::json& config, std::vector<Step>& steps);

  std::vector<Step> steps_;
};

}  // namespace spk::rt
