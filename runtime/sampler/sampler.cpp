#include "runtime/sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spk::rt {

namespace {

Error out_of_range(const char* field, double v, const char* range) {
  return make_error(
      std::string("sampling parameter ") + field + " = " + std::to_string(v) + " is out of range " + range,
      std::string("set ") + field + " in " + range);
}

// Descending by value, ties to the lower id: the order every truncation step uses.
bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace

Status validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return out_of_range("temperature", p.temperature, "[0, inf)");
  if (p.top_k < -1) return out_of_range("top_k", p.top_k, "{-1, 0 (off), 1, 2, ...}");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return out_of_range("top_p", p.top_p, "(0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return out_of_range("min_p", p.min_p, "[0, 1]");
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    return out_of_range("repetition_penalty", p.repetition_penalty, "(0, inf)");
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return out_of_range("presence_penalty", p.presence_penalty, "[-2, 2]");
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return out_of_range("frequency_penalty", p.frequency_penalty, "[-2, 2]");
  if (p.max_tokens < 1) return out_of_range("max_tokens", p.max_tokens, "[1, context length]");
  for (size_t i = 0; i < p.stop.size(); ++i)
    if (p.stop[i].empty())
      return make_error("sampling parameter stop[" + std::to_string(i) + "] is an empty string",
                        "remove it: an empty stop string would stop before the first token");
  for (int32_t id : p.stop_token_ids)
    if (id < 0) return out_of_range("stop_token_ids[]", id, "[0, vocab_size)");
  return ok_status();
}

Sampler::Sampler(const SamplingParams& p, uint64_t default_seed)
    : p_(p), state_(p.seed.value_or(default_seed)) {}

// splitmix64: a counter-based generator; identical on every platform.
double Sampler::next_uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(const float* logits, int vocab, const std::vector<int32_t>& history, float* logprob) {
  return sample_with(logits, vocab, history, logprob, nullptr);
}

SampleRow Sampler::device_row(bool want_logprob) {
  SampleRow r;
  r.want_logprob = want_logprob;
  if (p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    r.host = true;
    return r;
  }
  r.temperature = p_.temperature;
  r.top_k = p_.top_k;
  r.top_p = p_.top_p;
  r.min_p = p_.min_p;
  if (p_.temperature != 0.0f && p_.top_k != 1) r.u = next_uniform();
  return r;
}

int32_t Sampler::sample_drawn(const SampleRow& row, const float* logits, int vocab,
                              const std::vector<int32_t>& history, float* logprob) {
  if (row.host) return sample_with(logits, vocab, history, logprob, nullptr);  // nothing was drawn
  return sample_with(logits, vocab, history, logprob, &row.u);
}

int32_t Sampler::sample_with(const float* logits, int vocab, const std::vector<int32_t>& history,
                             float* logprob, const double* drawn) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  work_.assign(logits, logits + vocab);
  for (float& l : work_)
    if (std::isnan(l)) l = kNegInf;

  // Penalties. Repetition (HF/vLLM): each distinct seen token once, positive logits divided, negative
  // multiplied. Presence/frequency (OpenAI): l -= presence * [count > 0] + frequency * count.
  if (p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    std::vector<int32_t> seen(history.begin(), history.end());
    std::sort(seen.begin(), seen.end());
    if (p_.repetition_penalty != 1.0f) {
      for (size_t i = 0; i < seen.size(); ++i) {
        const int32_t id = seen[i];
        if ((i > 0 && seen[i - 1] == id) || id < 0 || id >= vocab) continue;
        float& l = work_[id];
        l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
      }
    }
    if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
      const size_t from = std::min(prompt_len_, history.size());
      std::vector<int32_t> gen(history.begin() + static_cast<std::ptrdiff_t>(from), history.end());
      std::sort(gen.begin(), gen.end());
      for (size_t i = 0; i < gen.size();) {
        size_t j = i;
        while (j < gen.size() && gen[j] == gen[i]) ++j;
        const int32_t id = gen[i];
        if (id >= 0 && id < vocab)
          work_[id] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(j - i);
        i = j;
      }
    }
  }

  float maxl = kNegInf;
  int32_t argmax = 0;
  for (int i = 0; i < vocab; ++i)
    if (work_[i] > maxl) maxl = work_[i], argmax = i;

  auto logprob_of = [&](int32_t id) {
    if (!std::isfinite(maxl)) return kNegInf;
    double s = 0;
    for (float l : work_) s += std::exp(static_cast<double>(l - maxl));
    return static_cast<float>(static_cast<double>(work_[id] - maxl) - std::log(s));
  };
  if (p_.temperature == 0.0f || !std::isfinite(maxl) || p_.top_k == 1) {
    if (logprob) *logprob = logprob_of(argmax);
    return argmax;
  }

  // Temperature, then top-k on logits.
  const float inv_t = 1.0f / p_.temperature;
  cand_.clear();
  cand_.reserve(vocab);
  for (int i = 0; i < vocab; ++i)
    if (work_[i] != kNegInf) cand_.emplace_back((work_[i] - maxl) * inv_t, i);
  bool sorted = false;
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < cand_.size()) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), better);
    cand_.resize(p_.top_k);
    sorted = true;
  }
  // Softmax over the survivors (the max logit is 0 after the shift, so exp never overflows).
  double sum = 0;
  for (auto& c : cand_) sum += (c.first = std::exp(c.first));
  for (auto& c : cand_) c.first = static_cast<float>(c.first / sum);

  // Top-p: the smallest prefix (by descending prob) whose mass reaches top_p; always >= 1 token.
  if (p_.top_p < 1.0f) {
    if (!sorted) std::sort(cand_.begin(), cand_.end(), better);
    sorted = true;
    double cum = 0;
    size_t keep = 0;
    while (keep < cand_.size() && (keep == 0 || cum < p_.top_p)) cum += cand_[keep++].first;
    cand_.resize(keep);
  }
  // Min-p: drop tokens below min_p x the top probability.
  if (p_.min_p > 0.0f) {
    float top = 0;
    for (const auto& c : cand_) top = std::max(top, c.first);
    const float floor = p_.min_p * top;
    std::erase_if(cand_, [&](const auto& c) { return c.first < floor; });
  }

  double mass = 0;
  for (const auto& c : cand_) mass += c.first;
  const double u = (drawn ? *drawn : next_uniform()) * mass;
  double cum = 0;
  int32_t chosen = cand_.back().second;
  for (const auto& c : cand_) {
    cum += c.first;
    if (u < cum) {
      chosen = c.second;
      break;
    }
  }
  if (logprob) *logprob = logprob_of(chosen);
  return chosen;
}

}  // namespace spk::rt
