// Internal: the Metaspace pre-tokenizer of SentencePiece-lineage tokenizer.json files (Mistral v0.3,
// Llama 2 files written with legacy=false): every " " becomes the replacement ("▁"), a replacement is
// prepended to the text (prepend_scheme "always", "first" = only where the piece starts the input, or
// "never"; older files say add_prefix_space true/false instead), and with split=true the text is cut in
// front of each replacement (Rust `tokenizers`' MergedWithNext: "▁a▁▁b" -> "▁a", "▁", "▁b").
// Note: @huggingface/tokenizers (the JS parity reference) ignores split; it agrees with Rust only for
// split=false, which is what current files write.
#pragma once

#include <deque>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"

namespace spk::rt {

struct Metaspace {
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement = "\xE2\x96\x81";  // U+2581 "▁"
  Prepend prepend = Prepend::kAlways;
  bool split = true;

  // From a {"type": "Metaspace", ...} object (pre-tokenizer or decoder).
  static Result<Metaspace> from_json(const nlohmann::json& c, const std::string& origin);

  // Appends the pieces of `piece`; `at_start`: the piece begins the whole input (for "first").
  void apply(std::string_view piece, bool at_start, std::vector<std::string_view>& out,
             std::deque<std::string>& arena) const;
};

}  // namespace spk::rt
