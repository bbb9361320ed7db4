// What `sparkctl bench` leaves behind: a text table for people, one JSON document (schema below) and a
// PNG plot of tok/s vs concurrency, both written atomically under <state-dir>/bench/.
// JSON schema (schema_version 1): {schema_version, lane, model, endpoint, started_utc, probe_tokens,
//   first_request: {ttft_s, decode_tok_s, completion_tokens}, steady: {...}, first_vs_steady_pct,
//   workloads: [{name, median_decode_tok_s, median_ttft_s, samples: [{ttft_s, decode_tok_s,
//   completion_tokens, prompt_tokens}]}], ladder: [{concurrency, completed, failed, first_error,
//   aggregate_decode_tok_s, mean_stream_decode_tok_s, mean_ttft_s, wall_s}],
//   needle: {ran, prompt_tokens, found, ttft_s, needle, answer}}
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kernels/base/status.h"
#include "orchestrator/bench/bench_run.h"

namespace spk::bench {

inline constexpr int kBenchSchemaVersion = 1;

nlohmann::json to_json(const BenchReport& r, const std::string& lane, const std::string& started_utc);
std::string to_text(const BenchReport& r);

struct BenchFiles {
  std::string json_path, png_path;
};
// <dir>/<lane>-<stamp>.json and .png (stamp = started_utc without separators). The PNG (deflated): `title`
// on top, decode tok/s (aggregate and per stream) over concurrency on a log2 axis, then a TTFT p50/p99
// panel on the same axis.
Result<BenchFiles> write_bench_files(const std::string& dir, const std::string& lane,
                                     const std::string& stamp, const nlohmann::json& doc,
                                     const BenchReport& r, const std::string& title = {});
// "LANE  MODEL  BACKEND  YYYY-MM-DD HH:MM UTC" from a "YYYYMMDDTHHMMSSZ" stamp.
std::string bench_title(const std::string& lane, const std::string& model, const std::string& backend,
                        const std::string& stamp);

}  // namespace spk::bench
