// When to stop generating: stop strings on streamed text (StopChecker) and stop/eos ids plus
// max_tokens on the token stream (check_stop_token).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler/sampler.h"

namespace spk::rt {

enum class FinishReason { none, stop, length };  // OpenAI "finish_reason": null, "stop", "length"

// After appending `token` as the `generated_count`-th generated token: stop when it is a stop id or an
// eos id (unless ignore_eos), length when generated_count reached max_tokens, else none. A stop/eos
// token is not part of the returned text (OpenAI semantics).
FinishReason check_stop_token(const SamplingParams& p, int32_t token, size_t generated_count,
                              const std::vector<int32_t>& eos_ids);

// Stop-string matching on streamed text: holds back text that could be the start of a stop string.
// The stop string itself and everything after it are never emitted (OpenAI semantics).
// Invariant: emitted text + held text == everything pushed, up to the first stop match.
class StopChecker {
 public:
  struct Out {
    std::string emit;      // safe to send now
    bool stopped = false;  // a stop string matched; `emit` is the final piece
  };

  explicit StopChecker(std::vector<std::string> stops);

  Out push(std::string_view text);
  // End of stream without a stop match: the held-back text is real output after all.
  std::string flush();

  [[nodiscard]] bool stopped() const { return stopped_; }
  [[nodiscard]] const std::string& matched() const { return matched_; }  // the stop string that hit
  [[nodiscard]] size_t held() const { return buf_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string buf_;
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace spk::rt
