#include "runtime/tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/nfc.h"

namespace spk::rt {

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  for (size_t j; (j = s.find(from, i)) != std::string_view::npos; i = j + from.size()) {
    out.append(s, i, j - i);
    out.append(to);
  }
  out.append(s, i);
  return out;
}

Status Normalizer::add_steps(const nlohmann::json& c, const std::string& origin, std::vector<Step>& steps) {
  const std::string type = c.is_object() ? c.value("type", "") : "";
  auto unsupported = [&](const std::string& what) {
    return make_error(origin + ": normalizer " + what + " is not supported (NFC, Prepend, Replace, Sequence)",
                      "sparkctl implements the normalizers of the Llama, Mistral, Qwen, Gemma and "
                      "DeepSeek tokenizer.json files; use one of those or report the type");
  };
  Step st;
  if (type == "Sequence") {
    for (const auto& sub : c.value("normalizers", nlohmann::json::array()))
      SPK_TRY(add_steps(sub, origin, steps));
    return ok_status();
  }
  if (type == "NFC") {
    st.kind = Kind::kNfc;
  } else if (type == "Prepend") {
    st.kind = Kind::kPrepend;
    if (!c.contains("prepend") || !c["prepend"].is_string())
      return make_error(origin + ": Prepend normalizer " + c.dump() + " has no \"prepend\" string",
                        "use a tokenizer.json written by Hugging Face tokenizers");
    st.literal = c["prepend"].get<std::string>();
  } else if (type == "Replace") {
    st.kind = Kind::kReplace;
    const auto& pat = c.contains("pattern") ? c["pattern"] : nlohmann::json();
    if (!c.contains("content") || !c["content"].is_string())
      return make_error(origin + ": Replace normalizer " + c.dump() + " has no \"content\" string",
                        "use a tokenizer.json written by Hugging Face tokenizers");
    st.content = c["content"].get<std::string>();
    if (pat.is_object() && pat.contains("String") && pat["String"].is_string()) {
      st.literal = pat["String"].get<std::string>();
      if (st.literal.empty())
        return make_error(origin + ": Replace normalizer has an empty String pattern",
                          "use a tokenizer.json written by Hugging Face tokenizers");
    } else if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string()) {
      SPK_ASSIGN(st.regex, Regex::compile(oniguruma_to_pcre2(pat["Regex"].get<std::string>())));
    } else {
      return make_error(
          origin + ": Replace normalizer pattern " + pat.dump() + " has neither String nor Regex",
          "use a tokenizer.json written by Hugging Face tokenizers");
    }
  } else {
    return unsupported("type '" + type + "'");
  }
  steps.push_back(std::move(st));
  return ok_status();
}

Result<Normalizer> Normalizer::from_json(const nlohmann::json& config, const std::string& origin) {
  Normalizer n;
  if (config.is_null()) return n;
  n.present_ = true;
  SPK_TRY(add_steps(config, origin, n.steps_));
  return n;
}

Result<std::string> Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Kind::kNfc:
        s = nfc(s);
        break;
      case Kind::kPrepend:
        // The reference prepends to every non-empty section (empty sections never get here).
        if (!s.empty()) s = st.literal + s;
        break;
      case Kind::kReplace:
        if (!st.regex) {
          if (s.find(st.literal) != std::string::npos) s = replace_all(s, st.literal, st.content);
          break;
        }
        {
          std::string out;
          size_t prev = 0;
          SPK_TRY(st.regex->for_each_match(s, [&](size_t b, size_t e) {
            out.append(s, prev, b - prev);
            out += st.content;
            prev = e;
          }));
          out.append(s, prev);
          s.swap(out);
        }
        break;
    }
  }
  return s;
}

}  // namespace spk::rt
