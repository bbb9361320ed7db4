// NFC = canonical decomposition (recursive, Hangul algorithmic), canonical ordering of combining
// marks (stable sort by ccc), canonical composition of primary composites. Pure ASCII returns at
// once; otherwise work is per segment (a starter and its marks), ~50 ns per code point.
#include "runtime/tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/tokenizer/unicode_tables.h"
#include "runtime/tokenizer/utf8.h"

namespace spk::rt {
namespace {

namespace ut = unicode_tables;

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t ccc(uint32_t cp) {
  if (cp < 0x300) return 0;
  auto end = ut::kCcc + ut::kCccCount;
  auto it = std::lower_bound(ut::kCcc, end, cp, [](const ut::Ccc& e, uint32_t c) { return e.cp < c; });
  return (it != end && it->cp == cp) ? it->ccc : 0;
}

const ut::Decomp* find_decomp(uint32_t cp) {
  if (cp < 0xC0) return nullptr;
  auto end = ut::kDecomp + ut::kDecompCount;
  auto it = std::lower_bound(ut::kDecomp, end, cp, [](const ut::Decomp& e, uint32_t c) { return e.cp < c; });
  return (it != end && it->cp == cp) ? it : nullptr;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (const ut::Decomp* d = find_decomp(cp)) {
    decompose(d->first, out);
    if (d->second) decompose(d->second, out);
    return;
  }
  out.push_back(cp);
}

// 0 when the pair has no primary composite.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  uint64_t key = (uint64_t{a} << 21) | b;
  auto end = ut::kComp + ut::kCompCount;
  auto it = std::lower_bound(ut::kComp, end, key, [](const ut::Comp& e, uint64_t k) { return e.pair < k; });
  return (it != end && it->pair == key) ? it->composite : 0;
}

void normalize_run(std::vector<uint32_t>& cps, std::string& out) {
  if (cps.size() == 1) {  // a lone starter (most CJK text): nothing to reorder or compose
    utf8::append(out, cps[0]);
    return;
  }
  // Canonical ordering: bubble each mark back past marks of higher class (runs are short).
  for (size_t i = 1; i < cps.size(); ++i) {
    uint8_t c = ccc(cps[i]);
    if (c == 0) continue;
    for (size_t j = i; j > 0 && ccc(cps[j - 1]) > c; --j) std::swap(cps[j - 1], cps[j]);
  }
  // Canonical composition (UAX #15 sample algorithm): a mark composes with the last starter
  // unless a mark of the same or higher class sits between them.
  size_t starter = 0, len = 1;
  int last_class = ccc(cps[0]) ? 256 : 0;
  for (size_t i = 1; i < cps.size(); ++i) {
    uint32_t cp = cps[i];
    int cc = ccc(cp);
    uint32_t comp = compose(cps[starter], cp);
    if (comp && (last_class < cc || last_class == 0)) {
      cps[starter] = comp;
      continue;
    }
    if (cc == 0) starter = len;
    last_class = cc;
    cps[len++] = cp;
  }
  cps.resize(len);
  for (uint32_t cp : cps) utf8::append(out, cp);
}

// True when `cp` can be the second element of a composition, so it must stay in the segment of
// the starter before it: non-starters, Hangul V/T jamo, and the few ccc-0 second elements.
bool combines_backward(uint32_t cp) {
  if (ccc(cp) != 0) return true;
  if ((cp >= kVBase && cp < kVBase + kVCount) || (cp > kTBase && cp < kTBase + kTCount)) return true;
  if (cp < 0x300) return false;
  static const std::vector<uint32_t> seconds = [] {
    std::vector<uint32_t> v;
    for (size_t k = 0; k < ut::kCompCount; ++k)
      v.push_back(static_cast<uint32_t>(ut::kComp[k].pair & 0x1FFFFF));
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }();
  return std::binary_search(seconds.begin(), seconds.end(), cp);
}

// ccc 0, no decomposition, cannot combine backwards: the common case, one table load for the BMP.
bool stable(uint32_t cp) {
  static const std::vector<bool> bmp = [] {
    std::vector<bool> v(0x10000);
    for (uint32_t c = 0; c < 0x10000; ++c)
      v[c] = !combines_backward(c) && !find_decomp(c) && !(c >= kSBase && c < kSBase + kSCount);
    return v;
  }();
  if (cp < 0x10000) return bmp[cp];
  return !combines_backward(cp) && !find_decomp(cp);
}

}  // namespace

std::string nfc(std::string_view s) {
  size_t first = 0;
  while (first < s.size() && static_cast<unsigned char>(s[first]) < 0x80) ++first;
  if (first == s.size()) return std::string(s);  // ASCII is always NFC
  std::string out;
  out.reserve(s.size() + 16);
  // Segments start at a code point whose decomposition starts with a starter that cannot combine
  // backwards; only the pending segment (starter + marks) is reordered and composed.
  size_t seg = first > 0 ? first - 1 : 0;  // the last ASCII byte may take a combining mark
  out.append(s.data(), seg);
  std::vector<uint32_t> cps, tmp;
  for (size_t i = seg; i < s.size();) {
    uint32_t cp;
    size_t n = utf8::decode(s, i, &cp);
    if (stable(cp)) {
      // A starter without decomposition: ends the pending segment; copied as is unless the next
      // code point may combine with it.
      if (!cps.empty()) {
        normalize_run(cps, out);
        cps.clear();
      }
      size_t j = i + n;
      uint32_t next = 0;
      if (j < s.size()) utf8::decode(s, j, &next);
      if (j >= s.size() || next < 0x300 || !combines_backward(next)) {
        out.append(s.data() + i, n);
      } else {
        cps.push_back(cp);
      }
      i += n;
      continue;
    }
    i += n;
    tmp.clear();
    decompose(cp, tmp);
    if (!cps.empty() && ccc(tmp[0]) == 0 && !combines_backward(tmp[0])) {
      normalize_run(cps, out);
      cps.clear();
    }
    cps.insert(cps.end(), tmp.begin(), tmp.end());
  }
  if (!cps.empty()) normalize_run(cps, out);
  return out;
}

}  // namespace spk::rt
