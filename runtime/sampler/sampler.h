// Token sampling: penalties, temperature, top-k, top-p, min-p (applied in that order, as transformers'
// logits warpers do), then one draw from a seeded counter-based PRNG. Same seed + same logits + same
// history -> same token on every machine (no std:: distributions, whose output differs by library).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/base/status.h"

namespace spk::rt {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off (-1 is accepted as off too, as vLLM does)
  float top_p = 1.0f;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;
  float repetition_penalty = 1.0f;  // over prompt + generated (HF/vLLM)
  float presence_penalty = 0.0f;    // over generated tokens only (OpenAI)
  float frequency_penalty = 0.0f;   // over generated tokens only (OpenAI)
  int max_tokens = 16;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
};

// Names the bad field, its value and its allowed range.
Status validate(const SamplingParams&);

class Sampler {
 public:
  // The PRNG is seeded from p.seed when set, else from default_seed (the server picks one per request).
  Sampler(const SamplingParams& p, uint64_t default_seed);

  // history = prompt + generated ids (for penalties). Returns the chosen id; logprob of it if asked:
  // log-softmax of the logits after penalties, before temperature and truncation.
  // Greedy (temperature 0) = argmax, ties to the lowest id. NaN logits count as -inf.
  int32_t sample(const float* logits, int vocab, const std::vector<int32_t>& history,
                 float* logprob = nullptr);

  // The same request for Backend::sample (sampling on the device, only the id comes back). Takes the
  // draw from the PRNG exactly when sample() would (not for greedy / top_k 1), so the sequence of
  // tokens is the same whichever side samples. Penalties need the history: then the row is marked
  // host and nothing is drawn (call sample()). One exception: a row whose logits are all -inf/NaN is
  // greedy in sample() but has consumed a draw here.
  SampleRow device_row(bool want_logprob);
  // Finishes a row that device_row() prepared but the backend handed back (SampledToken::host):
  // sample() with the draw device_row() already took.
  int32_t sample_drawn(const SampleRow& row, const float* logits, int vocab,
                       const std::vector<int32_t>& history, float* logprob = nullptr);

  // How much of `history` is prompt. Presence/frequency penalties count history[prompt_length:];
  // default 0 = the whole history counts as generated.
  void set_prompt_length(size_t n) { prompt_len_ = n; }

  [[nodiscard]] const SamplingParams& params() const { return p_; }

 private:
  double next_uniform();  // [0, 1), 53 random bits
  // sample() with the draw given (u != nullptr) or taken from the PRNG when needed.
  int32_t sample_with(const float* logits, int vocab, const std::vector<int32_t>& history, float* logprob,
                      const double* u);

  SamplingParams p_;
  uint64_t state_;
  size_t prompt_len_ = 0;
  std::vector<float> work_;                      // penalized logits
  std::vector<std::pair<float, int32_t>> cand_;  // (prob or logit, id) candidates
};

}  // namespace spk::rt
