#include "runtime/tokenizer/hf_tokenizer.h"

#include <deque>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/utf8.h"

namespace spk::rt {
namespace {

using nlohmann::json;

// j[key] when present, else null: by reference, never copying the (large) subtree.
const json& member(const json& j, const char* key) {
  static const json kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

Error bad(const std::string& origin, const std::string& what) {
  // `what` may quote the file's bytes (a JSON or regex error): kept valid UTF-8 for --json output.
  return make_error(origin + ": " + utf8::sanitize(what),
                    "sparkctl supports BPE tokenizer.json files: byte-level (Llama 3, Qwen2/3, DeepSeek-V3, "
                    "gpt-oss) and SentencePiece-style with byte fallback (Llama 2, Mistral v0.x, Gemma)");
}

// @huggingface/tokenizers' clean_up_tokenization: these replace-alls, in this order.
std::string clean_up(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) {
    std::string_view f(from);
    if (s.find(f) == std::string::npos) continue;
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    for (size_t j; (j = s.find(f, i)) != std::string::npos; i = j + f.size()) {
      out.append(s, i, j - i);
      out += to;
    }
    out.append(s, i);
    s.swap(out);
  }
  return s;
}

}  // namespace

// Untrusted input: every nlohmann access that can throw (at() on a missing key, get<> of a wrong type,
// value() on a non-object) ends here as an error naming the file, never as an exception.
Result<std::shared_ptr<HfTokenizer>> HfTokenizer::from_json(const std::string& tokenizer_json,
                                                            const std::string& config_json,
                                                            const std::string& origin) {
  try {
    auto r = from_json_unguarded(tokenizer_json, config_json, origin);
    if (!r.ok()) return make_error(utf8::sanitize(r.error().message), r.error().fix);  // may quote the file
    return r;
  } catch (const std::exception& e) {
    return bad(origin, std::string("malformed (") + e.what() + ")");
  }
}

Result<std::shared_ptr<HfTokenizer>> HfTokenizer::from_json_unguarded(const std::string& tokenizer_json,
                                                                      const std::string& config_json,
                                                                      const std::string& origin) {
  json j = json::parse(tokenizer_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad(origin, "not valid JSON");
  json cfg = config_json.empty() ? json::object() : json::parse(config_json, nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) cfg = json::object();
  auto t = std::make_shared<HfTokenizer>();

  const json& model = member(j, "model");
  if (!model.is_object() || model.value("type", "BPE") != "BPE")
    return bad(origin, "model type '" + (model.is_object() ? model.value("type", "?") : std::string("none")) +
                           "' is not supported (BPE)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(k) && model[k].is_string() && !model[k].get<std::string>().empty())
      return bad(origin, std::string("BPE ") + k + " is not supported");
  SPK_ASSIGN(t->decoder_, TokenDecoder::from_json(member(j, "decoder"), origin));
  const bool byte_level = t->decoder_.byte_level();
  SPK_ASSIGN(t->pre_, PreTokenizer::from_json(member(j, "pre_tokenizer")));
  if (t->pre_.has_byte_level() != byte_level)
    return bad(origin, std::string("the pre_tokenizer ") + (byte_level ? "lacks" : "has") +
                           " a ByteLevel step but the decoder " + (byte_level ? "is" : "is not") +
                           " ByteLevel: the vocabulary's alphabet is ambiguous");

  // Vocabulary. Every id is an integer in [0, kMaxTokenId) before anything converts it (a float id like
  // 5e98 would be undefined behaviour in the conversion, a huge one a huge allocation).
  const json& vocab = model.at("vocab");
  const json& added = member(j, "added_tokens");
  if (!vocab.is_object()) return bad(origin, "model.vocab is not an object of token: id");
  if (!added.is_null() && !added.is_array()) return bad(origin, "added_tokens is not an array");
  constexpr int64_t kMaxTokenId = int64_t{1} << 24;
  auto id_ok = [](const json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < kMaxTokenId;
  };
  size_t n = 0;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!id_ok(it.value()))
      return bad(origin, "token " + it.key().substr(0, 64) + " has id " + it.value().dump().substr(0, 32) +
                             ", not an integer in [0, " + std::to_string(kMaxTokenId) + ")");
    n = std::max<size_t>(n, it.value().get<int64_t>() + 1);
  }
  for (const auto& a : added) {
    if (!a.is_object() || !a.contains("id") || !id_ok(a["id"]))
      return bad(origin, "an added token's id is " +
                             (a.is_object() && a.contains("id") ? a["id"].dump().substr(0, 32) : "missing") +
                             ", not an integer in [0, " + std::to_string(kMaxTokenId) + ")");
    n = std::max<size_t>(n, a["id"].get<int64_t>() + 1);
  }
  t->pieces_.assign(n, {});
  t->bytes_.assign(n, {});
  t->flags_.assign(n, 0);
  std::vector<std::string> raw_vocab(n);
  t->piece_to_id_.reserve(n * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    auto id = it.value().get<int32_t>();
    if (id < 0) return bad(origin, "negative id for token " + it.key());
    t->pieces_[id] = it.key();
    std::string raw;
    if (!byte_level) {
      raw_vocab[id] = it.key();  // SentencePiece lineage: tokens are text ("▁" for a space)
    } else if (byte_level::decode(it.key(), &raw)) {
      raw_vocab[id] = raw;
    }  // else: not byte-level, never produced by BPE
    bool lead = false;
    t->bytes_[id] = t->decoder_.token_bytes(it.key(), false, &lead);
    if (lead) t->flags_[id] |= kLeadSpace;
    t->piece_to_id_[it.key()] = id;
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const json& jm = model.at("merges");
  merges.reserve(jm.size());
  for (const auto& m : jm) {
    std::string a, b;
    if (m.is_array() && m.size() == 2) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) return bad(origin, "merge '" + s + "' has no space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
      if (size_t sp2 = b.find(' '); sp2 != std::string::npos) b.resize(sp2);  // JS split(" ", 2)
    } else {
      return bad(origin, "merge " + m.dump() + " is neither \"a b\" nor [a, b]");
    }
    if (!byte_level) {
      merges.emplace_back(std::move(a), std::move(b));
      continue;
    }
    std::string ra, rb;
    if (!byte_level::decode(a, &ra) || !byte_level::decode(b, &rb))
      return bad(origin, "merge '" + a + " " + b + "' is not byte-level");
    merges.emplace_back(std::move(ra), std::move(rb));
  }
  int32_t unk = -1;
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = t->piece_to_id_.find(model["unk_token"].get<std::string>());
    if (it != t->piece_to_id_.end()) unk = it->second;
  }
  auto flag = [&](const char* k) {
    return model.contains(k) && model[k].is_boolean() && model[k].get<bool>();
  };
  BpeOptions opt{.char_level = !byte_level,
                 .byte_fallback = flag("byte_fallback"),
                 .fuse_unk = flag("fuse_unk"),
                 .ignore_merges = flag("ignore_merges"),
                 .unk_id = unk};
  if (opt.byte_fallback && byte_level)
    return bad(origin,
               "BPE byte_fallback with a ByteLevel decoder (byte-level vocabularies need no fallback)");
  std::string bad_merge;
  if (!t->bpe_.init(raw_vocab, merges, opt, &bad_merge))
    return bad(origin, bad_merge + " refers to a token that is not in the vocabulary");
  if (opt.byte_fallback) {
    for (int b = 0; b < 256; ++b)
      if (t->bpe_.byte_token(static_cast<uint8_t>(b)) < 0)
        return bad(origin, "BPE byte_fallback is on but the vocabulary lacks byte token <0x" +
                               std::string(1, "0123456789ABCDEF"[b >> 4]) + "0123456789ABCDEF"[b & 15] + ">");
  }

  SPK_ASSIGN(t->normalizer_, Normalizer::from_json(member(j, "normalizer"), origin));

  // Added tokens: they override the model's token strings (as the JS reference's maps do).
  std::vector<AddedToken> raw_split, norm_split;
  std::unordered_set<std::string> skip;
  for (const auto& a : added) {
    AddedToken at;
    at.content = a.at("content").get<std::string>();
    at.id = a.at("id").get<int32_t>();
    at.special = a.value("special", false);
    at.lstrip = a.value("lstrip", false);
    at.rstrip = a.value("rstrip", false);
    at.single_word = a.value("single_word", false);
    at.normalized = a.contains("normalized") ? a["normalized"].get<bool>() : !at.special;
    if (at.id < 0) return bad(origin, "negative id for added token " + at.content);
    t->pieces_[at.id] = at.content;
    bool lead = false;
    t->bytes_[at.id] = t->decoder_.token_bytes(at.content, true, &lead);
    t->flags_[at.id] =
        (t->flags_[at.id] & ~kLeadSpace) | kAdded | (at.special ? kSpecial : 0) | (lead ? kLeadSpace : 0);
    t->piece_to_id_[at.content] = at.id;
    if (at.special) skip.insert(at.content);
    if (at.normalized && t->normalizer_.present()) {
      if (!utf8::is_valid(at.content)) return bad(origin, "added token " + at.content + " is not UTF-8");
      SPK_ASSIGN(std::string c, t->normalizer_.apply(at.content));
      t->piece_to_id_.emplace(c, at.id);
      at.content = c;
      norm_split.push_back(std::move(at));
    } else {
      raw_split.push_back(std::move(at));
    }
  }
  t->split_raw_ = AddedTokenSplitter(std::move(raw_split));
  t->split_normalized_ = AddedTokenSplitter(std::move(norm_split));
  if (cfg.contains("additional_special_tokens") && cfg["additional_special_tokens"].is_array())
    for (const auto& s : cfg["additional_special_tokens"]) {
      if (s.is_string()) skip.insert(s.get<std::string>());
      if (s.is_object() && s.contains("content")) skip.insert(s["content"].get<std::string>());
    }
  for (size_t id = 0; id < n; ++id)
    if (skip.count(t->pieces_[id])) t->flags_[id] |= kSkip;
  t->clean_up_ =
      cfg.contains("clean_up_tokenization_spaces") && cfg["clean_up_tokenization_spaces"].is_boolean()
          ? cfg["clean_up_tokenization_spaces"].get<bool>()
          : true;  // the JS reference's default

  // Post-processor: ByteLevel (nothing) and TemplateProcessing (single), possibly in a Sequence.
  std::vector<json> procs;
  if (j.contains("post_processor") && !j["post_processor"].is_null()) {
    const json& pp = j["post_processor"];
    if (pp.value("type", "") == "Sequence")
      for (const auto& p : pp.value("processors", json::array())) procs.push_back(p);
    else
      procs.push_back(pp);
  }
  for (const json& p : procs) {
    std::string type = p.value("type", "");
    if (type == "ByteLevel") continue;
    if (type != "TemplateProcessing")
      return bad(origin,
                 "post_processor type '" + type + "' is not supported (ByteLevel, TemplateProcessing)");
    std::vector<int32_t> pre, post;
    bool seen_a = false;
    for (const auto& item : p.at("single")) {
      if (item.contains("Sequence")) {
        seen_a = true;
        continue;
      }
      std::string tok = item.at("SpecialToken").at("id").get<std::string>();
      int32_t id = t->token_to_id(tok);
      if (id < 0) return bad(origin, "TemplateProcessing token '" + tok + "' is not in the vocabulary");
      (seen_a ? post : pre).push_back(id);
    }
    pre.insert(pre.end(), t->prefix_ids_.begin(), t->prefix_ids_.end());
    t->prefix_ids_ = std::move(pre);
    t->suffix_ids_.insert(t->suffix_ids_.end(), post.begin(), post.end());
  }
  return t;
}

Status HfTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  for (const Section& s : split_raw_.split(text)) {
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    if (s.text.empty()) continue;
    if (auto it = piece_to_id_.find(s.text); it != piece_to_id_.end() && (flags_[it->second] & kAdded)) {
      out.push_back(it->second);
      continue;
    }
    // Metaspace's prepend_scheme "first": only the text that starts the input (Rust tokenizers'
    // offset-0 rule; the JS reference's section_index 0 is the same for these files).
    const bool section_at_start = s.text.data() == text.data();
    SPK_ASSIGN(std::string normalized, normalizer_.apply(s.text));
    if (normalized.empty()) continue;
    for (const Section& sub : split_normalized_.split(normalized)) {
      if (sub.id >= 0) {
        out.push_back(sub.id);
      } else if (!sub.text.empty()) {
        std::vector<std::string_view> pieces;
        std::deque<std::string> arena;
        SPK_TRY(
            pre_.split(sub.text, section_at_start && sub.text.data() == normalized.data(), pieces, arena));
        for (std::string_view p : pieces) bpe_.encode_word(p, out);
      }
    }
  }
  return ok_status();
}

Result<std::vector<int32_t>> HfTokenizer::try_encode(std::string_view text, bool add_special_tokens) const {
  std::string fixed;
  if (!utf8::is_valid(text)) {
    fixed = utf8::sanitize(text);
    text = fixed;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  SPK_TRY(encode_text(text, ids));
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  auto r = try_encode(text, add_special_tokens);
  return r.ok() ? std::move(r).value() : std::vector<int32_t>{};
}

std::string HfTokenizer::decode_bytes(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) continue;  // unknown ids decode to nothing
    if (skip_special_tokens && (flags_[id] & kSkip)) continue;
    out += bytes_[id];
  }
  return out;
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string s = utf8::sanitize(decode_bytes(ids, skip_special_tokens));
  if (decoder_.strips_start()) {
    bool first_lead = false;
    for (int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) continue;
      if (skip_special_tokens && (flags_[id] & kSkip)) continue;
      first_lead = flags_[id] & kLeadSpace;
      break;
    }
    s = decoder_.finish(std::move(s), first_lead);
  }
  return clean_up_ ? clean_up(std::move(s)) : s;
}

int32_t HfTokenizer::token_to_id(std::string_view token) const {
  auto it = piece_to_id_.find(token);
  return it == piece_to_id_.end() ? -1 : it->second;
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  return (id >= 0 && static_cast<size_t>(id) < pieces_.size()) ? pieces_[id] : std::string();
}

bool HfTokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < flags_.size() && (flags_[id] & (kSpecial | kSkip));
}

}  // namespace spk::rt
