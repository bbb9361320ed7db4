// A small, comparable record of one logits row (what scripts/hf_reference.py writes from Hugging Face
// and `sparkctl generate --dump-logits` writes from us), so golden files stay < 200 KB for a 150K vocab:
// the top-k (ids + values), every `stride`-th value from id 0 (~1024 values), argmax, and checksums.
//
//   {"vocab_size": V, "argmax": i, "max_abs": m, "sum": s, "sum_sq": q,
//    "top_k": {"ids": [...], "values": [...]}, "stride": k, "strided": [v_0, v_k, v_2k, ...]}
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace spk::rt {

inline constexpr int kSummaryTopK = 64;
inline constexpr int kSummaryStrided = 1024;

nlohmann::json summarize_logits(const float* logits, int vocab);

struct LogitsComparison {
  double max_rel_err = 0;  // max |ours - ref| over the recorded ids, divided by the ref's max |logit|
  int worst_id = -1;
  int compared = 0;     // values compared
  std::string problem;  // non-empty: the summaries cannot be compared (vocab differs, malformed)
};

// Compares a full row of our logits against a recorded summary.
LogitsComparison compare_logits(const nlohmann::json& ref_summary, const float* logits, int vocab);

}  // namespace spk::rt
