#include "runtime/tokenizer/metaspace.h"

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/normalizer.h"
#include "runtime/tokenizer/utf8.h"

namespace spk::rt {

Result<Metaspace> Metaspace::from_json(const nlohmann::json& c, const std::string& origin) {
  Metaspace m;
  if (c.contains("replacement")) {
    const auto& r = c["replacement"];
    if (!r.is_string() || r.get<std::string>().empty() ||
        utf8::valid_sequence_length(r.get<std::string>(), 0) != r.get<std::string>().size())
      return make_error(origin + ": Metaspace replacement " + r.dump() + " is not one character",
                        "use a tokenizer.json written by Hugging Face tokenizers (replacement \"\u2581\")");
    m.replacement = r.get<std::string>();
  }
  if (c.contains("prepend_scheme") && !c["prepend_scheme"].is_null()) {
    const auto& p = c["prepend_scheme"];
    const std::string s = p.is_string() ? p.get<std::string>() : p.dump();
    if (s == "always")
      m.prepend = Prepend::kAlways;
    else if (s == "first")
      m.prepend = Prepend::kFirst;
    else if (s == "never")
      m.prepend = Prepend::kNever;
    else
      return make_error(origin + ": Metaspace prepend_scheme '" + s + "' is not one of always, first, never",
                        "fix prepend_scheme in tokenizer.json");
  } else if (c.contains("add_prefix_space") && c["add_prefix_space"].is_boolean()) {
    // Files from tokenizers < 0.14: add_prefix_space true/false is always/never (as Rust reads them).
    m.prepend = c["add_prefix_space"].get<bool>() ? Prepend::kAlways : Prepend::kNever;
  }
  if (c.contains("split") && c["split"].is_boolean()) m.split = c["split"].get<bool>();
  return m;
}

void Metaspace::apply(std::string_view piece, bool at_start, std::vector<std::string_view>& out,
                      std::deque<std::string>& arena) const {
  std::string s = replace_all(piece, " ", replacement);
  bool starts = s.compare(0, replacement.size(), replacement) == 0;
  if (!starts && (prepend == Prepend::kAlways || (prepend == Prepend::kFirst && at_start)))
    s.insert(0, replacement);
  if (s.empty()) return;
  arena.push_back(std::move(s));
  std::string_view v = arena.back();
  if (!split) {
    out.push_back(v);
    return;
  }
  size_t begin = 0;
  for (size_t j = v.find(replacement, 1); j != std::string_view::npos; j = v.find(replacement, j + 1)) {
    if (j > begin) out.push_back(v.substr(begin, j - begin));
    begin = j;
  }
  out.push_back(v.substr(begin));
}

}  // namespace spk::rt
