#include "runtime/tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "runtime/tokenizer/utf8.h"

namespace spk::rt {
namespace {

bool js_space(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace

std::string_view js_trim_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp;
    size_t n = utf8::decode(s, i, &cp);
    if (!js_space(cp)) break;
    i += n;
  }
  return s.substr(i);
}

std::string_view js_trim_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t b = end - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    uint32_t cp;
    utf8::decode(s, b, &cp);
    if (!js_space(cp)) break;
    end = b;
  }
  return s.substr(0, end);
}

AddedTokenSplitter::AddedTokenSplitter(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  by_first_byte_.resize(256);
  for (uint32_t i = 0; i < tokens_.size(); ++i)
    if (!tokens_[i].content.empty())
      by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  for (auto& v : by_first_byte_)
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

std::vector<Section> AddedTokenSplitter::split(std::string_view text) const {
  std::vector<Section> out;
  if (tokens_.empty()) {
    out.push_back({text, -1});
    return out;
  }
  std::vector<int32_t> which;  // token index per section, -1 for text
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const auto& cands = by_first_byte_[static_cast<unsigned char>(text[i])];
    const AddedToken* hit = nullptr;
    int32_t hit_index = -1;
    for (uint32_t k : cands) {
      const std::string& c = tokens_[k].content;
      if (c.size() <= text.size() - i && std::memcmp(text.data() + i, c.data(), c.size()) == 0) {
        hit = &tokens_[k];
        hit_index = static_cast<int32_t>(k);
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > start) {
      out.push_back({text.substr(start, i - start), -1});
      which.push_back(-1);
    }
    out.push_back({text.substr(i, hit->content.size()), hit->id});
    which.push_back(hit_index);
    i += hit->content.size();
    start = i;
  }
  if (start < text.size()) {
    out.push_back({text.substr(start), -1});
    which.push_back(-1);
  }
  for (size_t s = 0; s < out.size(); ++s) {
    if (which[s] < 0) continue;
    const AddedToken& t = tokens_[which[s]];
    if (t.lstrip && s > 0 && which[s - 1] < 0) out[s - 1].text = js_trim_end(out[s - 1].text);
    if (t.rstrip && s + 1 < out.size() && which[s + 1] < 0) out[s + 1].text = js_trim_start(out[s + 1].text);
  }
  return out;
}

}  // namespace spk::rt
