#include "runtime/tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

namespace spk::rt {
namespace {

// The GPT-2 pattern @huggingface/tokenizers' ByteLevel uses when use_regex is true (a native JS
// regex, so \s is JS whitespace: with U+FEFF, without U+0085).
constexpr const char* kJsSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}\\x{FEFF}";

std::string gpt2_pattern() {
  std::string s = kJsSpace;
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + s + "\\p{L}\\p{N}]+|[" + s + "]+(?![^" + s +
         "])|[" + s + "]+";
}

std::string quote(std::string_view lit) {
  std::string out = "\\Q";
  for (size_t i = 0; i < lit.size(); ++i) {
    if (lit.substr(i, 2) == "\\E") {
      out += "\\E\\\\E\\Q";
      ++i;
    } else {
      out += lit[i];
    }
  }
  return out + "\\E";
}

}  // namespace

Status PreTokenizer::add_steps(const nlohmann::json& c, std::vector<Step>& steps) {
  if (c.is_null()) return ok_status();
  std::string type = c.value("type", "");
  if (type == "Sequence") {
    for (const auto& sub : c.value("pretokenizers", nlohmann::json::array())) SPK_TRY(add_steps(sub, steps));
    return ok_status();
  }
  Step st;
  if (type == "Split") {
    st.kind = Kind::kSplit;
    const auto& pat = c.at("pattern");
    std::string pcre;
    if (pat.contains("Regex"))
      pcre = oniguruma_to_pcre2(pat.at("Regex").get<std::string>());
    else if (pat.contains("String"))
      pcre = quote(pat.at("String").get<std::string>());
    else
      return make_error("tokenizer.json: Split pattern " + pat.dump() + " has neither Regex nor String",
                        "use a tokenizer.json written by Hugging Face tokenizers");
    SPK_ASSIGN(st.regex, Regex::compile(pcre));
    std::string behavior = c.value("behavior", "Isolated");
    if (behavior == "Isolated")
      st.behavior = Behavior::kIsolated;
    else if (behavior == "Removed")
      st.behavior = Behavior::kRemoved;
    else if (behavior == "MergedWithPrevious")
      st.behavior = Behavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext")
      st.behavior = Behavior::kMergedWithNext;
    else
      return make_error("tokenizer.json: Split behavior '" + behavior +
                            "' is not supported (Isolated, Removed, MergedWithPrevious, MergedWithNext)",
                        "use a tokenizer whose Split behavior is one of those");
    st.invert = c.value("invert", false);
  } else if (type == "ByteLevel") {
    st.kind = Kind::kByteLevel;
    st.add_prefix_space = c.value("add_prefix_space", false);
    if (c.value("use_regex", true)) {
      SPK_ASSIGN(st.regex, Regex::compile(gpt2_pattern()));
    }
  } else if (type == "Metaspace") {
    st.kind = Kind::kMetaspace;
    SPK_ASSIGN(st.metaspace, Metaspace::from_json(c, "tokenizer.json"));
  } else {
    return make_error("tokenizer.json: pre_tokenizer type '" + type +
                          "' is not supported (Sequence, Split, ByteLevel, Metaspace)",
                      "use a BPE tokenizer of the Llama, Mistral, Qwen, Gemma, DeepSeek or gpt-oss families");
  }
  steps.push_back(std::move(st));
  return ok_status();
}

Result<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& config) {
  PreTokenizer p;
  SPK_TRY(add_steps(config, p.steps_));
  return p;
}

bool PreTokenizer::has_byte_level() const {
  for (const Step& st : steps_)
    if (st.kind == Kind::kByteLevel) return true;
  return false;
}

Status PreTokenizer::split(std::string_view text, bool at_start, std::vector<std::string_view>& out,
                           std::deque<std::string>& arena) const {
  std::vector<std::string_view> cur{text}, next;
  for (const Step& st : steps_) {
    next.clear();
    for (std::string_view piece : cur) {
      if (st.kind == Kind::kMetaspace) {
        // A piece starts the input when it starts where `text` does (pieces view `text` until a
        // Metaspace or ByteLevel step copies them into the arena).
        st.metaspace.apply(piece, at_start && piece.data() == text.data(), next, arena);
        continue;
      }
      if (st.kind == Kind::kByteLevel) {
        if (st.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
          arena.push_back(" " + std::string(piece));
          piece = arena.back();
        }
        if (!st.regex) {
          next.push_back(piece);
          continue;
        }
        SPK_TRY(st.regex->for_each_match(piece, [&](size_t b, size_t e) {
          if (e > b) next.push_back(piece.substr(b, e - b));
        }));
        continue;
      }
      size_t prev = 0;
      SPK_TRY(st.regex->for_each_match(piece, [&](size_t b, size_t e) {
        if (st.invert) {
          if (e > b) next.push_back(piece.substr(b, e - b));
          return;
        }
        switch (st.behavior) {
          case Behavior::kIsolated:  // an empty match still cuts here, as in the JS reference
            if (prev < b) next.push_back(piece.substr(prev, b - prev));
            if (e > b) next.push_back(piece.substr(b, e - b));
            prev = e;
            break;
          case Behavior::kRemoved:
            if (prev < b) next.push_back(piece.substr(prev, b - prev));
            prev = e;
            break;
          case Behavior::kMergedWithPrevious:  // "a b" -> "a ", "b"
            if (e == b) break;
            next.push_back(piece.substr(prev, e - prev));
            prev = e;
            break;
          case Behavior::kMergedWithNext:  // "a b" -> "a", " b"
            if (e == b) break;
            if (prev < b) next.push_back(piece.substr(prev, b - prev));
            prev = b;
            break;
        }
      }));
      if (!st.invert && prev < piece.size()) next.push_back(piece.substr(prev));
    }
    cur.swap(next);
  }
  for (auto p : cur)
    if (!p.empty()) out.push_back(p);
  return ok_status();
}

}  // namespace spk::rt
