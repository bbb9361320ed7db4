// `sparkctl bench`: the measuring method built in. Against a warmed deployment: temperature 0, a unique
// nonce at the start of every prompt (no prefix cache can serve it), ignore_eos so every probe decodes
// exactly probe_tokens tokens, streamed so that TTFT and decode time are seen apart.
//   single stream: decode tok/s = (completion_tokens - 1) / (t_last - t_first), TTFT = t_first - t_sent.
//     The first request of the run is kept apart ("first after ready") and compared to the median of
//     the `repeats` that follow (steady state): warmup did its job when the gap is small (target 15%).
//   workloads: chat, JSON and code prompts, each single stream.
//   ladder: c concurrent probes for each level c; aggregate decode tok/s = sum(tokens_i - 1) /
//     (max t_last - min t_first) over the level, and the mean of the per-stream decode tok/s.
//   needle: a long filler prompt with one code in its middle; reports whether the answer holds it (a
//     synthetic checkpoint has random weights and is not expected to find it) and the long-prompt TTFT.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "orchestrator/bench/stream_client.h"

namespace spk::bench {

struct BenchOptions {
  Endpoint ep;
  int probe_tokens = 256;  // output length of every probe (--output-len)
  int input_tokens = 0;    // ladder prompt length, approximate (--input-len); 0 = the chat prompt
  int repeats = 3;         // steady-state samples of the single-stream probe
  std::vector<int> ladder{1, 2, 4, 8};  // concurrency levels
  int needle_tokens = 4096;             // approximate prompt tokens of the needle check; 0 = skip
  std::string run_id;                   // goes into every nonce
  std::function<void(const std::string&)> progress;  // one line per finished measurement
};

struct SampleStats {
  double ttft_s = 0;
  double decode_tok_s = 0;
  int completion_tokens = 0;
  int prompt_tokens = 0;
};

struct WorkloadResult {
  std::string name;  // "chat" | "json" | "code"
  std::vector<SampleStats> samples;
  double median_decode_tok_s = 0;
  double median_ttft_s = 0;
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
};
// Nearest-rank percentiles of `v` (sorted here); zeros when empty.
Percentiles percentiles(std::vector<double> v);

struct LevelResult {
  int concurrency = 0;
  int completed = 0;
  int failed = 0;
  std::string first_error;
  double aggregate_decode_tok_s = 0;
  double mean_stream_decode_tok_s = 0;
  double mean_ttft_s = 0;
  double wall_s = 0;
  // Distributions over the level (vLLM's bench names): TTFT per request, TPOT per request, ITL per gap
  // between text chunks of a stream; request throughput = completed / wall_s.
  Percentiles ttft, tpot, itl;
  double request_throughput = 0;
};

struct NeedleResult {
  bool ran = false;
  int prompt_tokens = 0;
  bool found = false;
  double ttft_s = 0;
  std::string needle;
  std::string answer;
};

struct BenchReport {
  std::string model;
  std::string endpoint;
  int probe_tokens = 0;
  SampleStats first_request;
  SampleStats steady;              // medians of the repeats
  double first_vs_steady_pct = 0;  // (steady - first) / steady x 100 on decode tok/s; > 0 = first slower
  std::vector<WorkloadResult> workloads;
  std::vector<LevelResult> ladder;
  NeedleResult needle;
};

// Every request must succeed except inside the ladder (a failed level is reported, not fatal).
Result<BenchReport> run_bench(const BenchOptions& opt);

// Aggregates of one ladder level from its samples (pure; tested on synthetic timings).
LevelResult summarize_level(int concurrency, const std::vector<StreamSample>& ok, int failed);

// 1, 2, 4, ... up to and including max (max itself added when it is not a power of two).
std::vector<int> doubling_ladder(int max);

}  // namespace spk::bench
