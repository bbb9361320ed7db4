#include "runtime/tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/metaspace.h"
#include "runtime/tokenizer/normalizer.h"

namespace spk::rt {
namespace {

// Phases of a SentencePiece-lineage chain; a step may not come after a later phase.
enum Phase { kPerToken = 0, kAfterByteFallback = 1, kAfterFuse = 2, kAfterStrip = 3 };

Error unsupported(const std::string& origin, const std::string& what) {
  return make_error(origin + ": decoder " + what + " is not supported",
                    "sparkctl implements the ByteLevel decoder and the SentencePiece chain Replace/Metaspace "
                    "-> ByteFallback -> Fuse -> Strip of the Llama, Mistral and Gemma tokenizer.json files");
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Status TokenDecoder::add_steps(const nlohmann::json& c, const std::string& origin, TokenDecoder& d,
                               int& phase) {
  const std::string type = c.is_object() ? c.value("type", "") : "";
  auto out_of_order = [&]() { return unsupported(origin, "step " + c.dump() + " in this position"); };
  if (type == "Sequence") {
    for (const auto& sub : c.value("decoders", nlohmann::json::array()))
      SPK_TRY(add_steps(sub, origin, d, phase));
  } else if (type == "Replace") {
    if (phase != kPerToken) return out_of_order();
    const auto& pat = c.contains("pattern") ? c["pattern"] : nlohmann::json();
    if (!pat.is_object() || !pat.contains("String") || !pat["String"].is_string() ||
        pat["String"].get<std::string>().empty())
      return unsupported(origin, "Replace with pattern " + pat.dump() + " (only a non-empty String)");
    d.replace_.emplace_back(pat["String"].get<std::string>(), c.value("content", ""));
  } else if (type == "Metaspace") {
    if (phase != kPerToken) return out_of_order();
    SPK_ASSIGN(Metaspace m, Metaspace::from_json(c, origin));
    d.replace_.emplace_back(m.replacement, " ");
    d.metaspace_first_ = true;
  } else if (type == "ByteFallback") {
    if (phase != kPerToken) return out_of_order();
    d.byte_fallback_ = true;
    phase = kAfterByteFallback;
  } else if (type == "Fuse") {
    if (phase > kAfterFuse) return out_of_order();
    phase = kAfterFuse;
  } else if (type == "Strip") {
    if (phase != kAfterFuse) return unsupported(origin, "Strip before Fuse (it would strip every token)");
    d.strip_content_ = c.value("content", " ");
    d.strip_start_ = c.value("start", 0);
    d.strip_stop_ = c.value("stop", 0);
    phase = kAfterStrip;
  } else {
    return unsupported(origin, "type '" + type + "'");
  }
  return ok_status();
}

Result<TokenDecoder> TokenDecoder::from_json(const nlohmann::json& config, const std::string& origin) {
  TokenDecoder d;
  if (config.is_object() && config.value("type", "") == "ByteLevel") {
    d.byte_level_ = true;
    return d;
  }
  if (!config.is_object()) return unsupported(origin, config.dump());
  int phase = kPerToken;
  SPK_TRY(add_steps(config, origin, d, phase));
  return d;
}

std::string TokenDecoder::token_bytes(const std::string& piece, bool added, bool* lead_space) const {
  if (lead_space) *lead_space = false;
  if (byte_level_) {
    std::string raw;
    if (!added && byte_level::decode(piece, &raw)) return raw;
    return piece;  // added tokens, and model tokens outside the byte-level alphabet: verbatim
  }
  std::string s = piece;
  for (const auto& [from, to] : replace_)
    if (s.find(from) != std::string::npos) s = replace_all(s, from, to);
  if (lead_space) *lead_space = !s.empty() && s[0] == ' ';
  if (byte_fallback_ && s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') {
    int hi = hex(s[3]), lo = hex(s[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
  }
  return s;
}

std::string TokenDecoder::finish(std::string text, bool first_lead_space) const {
  if (metaspace_first_ && first_lead_space && !text.empty() && text[0] == ' ') text.erase(0, 1);
  if (!strip_content_.empty() && (strip_start_ > 0 || strip_stop_ > 0)) {
    const size_t n = strip_content_.size();
    size_t b = 0, e = text.size();
    for (int i = 0; i < strip_start_ && e - b >= n && text.compare(b, n, strip_content_) == 0; ++i) b += n;
    for (int i = 0; i < strip_stop_ && e - b >= n && text.compare(e - n, n, strip_content_) == 0; ++i) e -= n;
    text = text.substr(b, e - b);
  }
  return text;
}

}  // namespace spk::rt
