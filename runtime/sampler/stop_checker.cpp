#include "runtime/sampler/stop_checker.h"

#include <algorithm>

namespace spk::rt {

FinishReason check_stop_token(const SamplingParams& p, int32_t token, size_t generated_count,
                              const std::vector<int32_t>& eos_ids) {
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end())
    return FinishReason::stop;
  if (!p.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end())
    return FinishReason::stop;
  if (generated_count >= static_cast<size_t>(std::max(p.max_tokens, 0))) return FinishReason::length;
  return FinishReason::none;
}

StopChecker::StopChecker(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopChecker::Out StopChecker::push(std::string_view text) {
  Out out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  buf_.append(text);
  // Earliest match wins; on equal positions the longer stop string (it covers more).
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = buf_.find(s);
    if (at != std::string::npos && (at < best || (at == best && s.size() > matched_.size()))) {
      best = at;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    out.emit = buf_.substr(0, best);
    out.stopped = stopped_ = true;
    buf_.clear();
    return out;
  }
  // Hold back the longest suffix of buf_ that is a proper prefix of some stop string. No full match is
  // in buf_, so held text is always shorter than the longest stop string: O(len) memory.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(s.size() - 1, buf_.size()); k > hold; --k) {
      if (buf_.compare(buf_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  out.emit = buf_.substr(0, buf_.size() - hold);
  buf_.erase(0, buf_.size() - hold);
  return out;
}

std::string StopChecker::flush() {
  std::string rest;
  rest.swap(buf_);
  return stopped_ ? std::string() : rest;
}

}  // namespace spk::rt
