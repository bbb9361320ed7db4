// Internal: the pre-tokenizer chain of tokenizer.json (Sequence of Split and ByteLevel, the steps
// the supported tokenizers use), producing raw-byte pieces for the BPE model.
#pragma once

#include <deque>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/tokenizer/regex_split.h"

namespace spk::rt {

class PreTokenizer {
 public:
  // `config` is tokenizer.json's "pre_tokenizer" (null: the whole section is one piece).
  static Result<PreTokenizer> from_json(const nlohmann::json& config);

  // Appends the pieces of `text` to `out`. Pieces view `text` or strings kept in `arena`.
  Status split(std::string_view text, std::vector<std::string_view>& out,
               std::deque<std::string>& arena) const;

 private:
  enum class Kind { kSplit, kByteLevel };
  enum class Behavior { kIsolated, kRemoved };
  struct Step {
    Kind kind = Kind::kSplit;
    std::shared_ptr<const Regex> regex;  // Split pattern, or ByteLevel's GPT-2 regex when use_regex
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  static Status add_steps(const nlohmann::json& config, std::vector<Step>& steps);

  std::vector<Step> steps_;
};

}  // namespace spk::rt
