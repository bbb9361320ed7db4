// The engine: one thread owns the model, the KV block manager and the scheduler and runs
//   schedule -> build StepBatch -> forward -> sample -> emit
// in a loop. HTTP threads submit sequences and read their tokens from a per-sequence channel (mutex +
// condition variable); abort() (client gone, stop string hit) frees the sequence's blocks on the next
// loop turn. Batching never changes results: each sequence has its own Sampler and the model computes
// each row independently, so greedy outputs equal single-request outputs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/model/model.h"
#include "runtime/sampler/sampler.h"
#include "runtime/sampler/stop_checker.h"
#include "runtime/serve/block_manager.h"
#include "runtime/serve/metrics.h"
#include "runtime/serve/scheduler.h"

namespace spk::rt {

struct EngineConfig {
  SchedulerConfig sched;
  int max_model_len = 0;
  std::vector<int32_t> eos_ids;
  uint64_t base_seed = 0;     // unseeded requests get base_seed + a per-sequence counter
  size_t max_waiting = 4096;  // queue bound; beyond it submit() is refused (HTTP 429)
  // Test instrument (runtime serve --scripted-output, only with --enable-test-instruments): the i-th
  // scripted sequence (in order of submission; a request with n choices submits n) emits
  // scripted_outputs[min(i, size - 1)] instead of sampling: its k-th generated token is that script's
  // k-th, then eos_ids[0] once the script is spent. So a script of several outputs answers successive
  // requests in turn and the last one repeats. The model still runs every step (same timing, same KV
  // traffic). Sequences submitted with SubmitRequest::scripted = false (warmup) sample as usual.
  std::vector<std::vector<int32_t>> scripted_outputs;
  // Automatic prefix caching (block_manager.h): a prompt's cached full blocks are reused, not recomputed.
  bool enable_prefix_caching = true;
};

// Tokens for one sequence since the last take(), plus how it ended.
struct SeqUpdate {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // parallel to tokens when logprobs were asked for
  int num_generated = 0;        // total generated so far (stop/eos token included)
  int cached_tokens = 0;        // prompt tokens the prefix cache supplied (known from the first token on)
  bool done = false;
  FinishReason finish = FinishReason::none;
  std::string error;  // non-empty: the step failed; the sequence is gone
};

class SeqChannel {
 public:
  // Waits up to `timeout` for news; moves everything pending into `out`. False on timeout.
  bool take(SeqUpdate& out, std::chrono::milliseconds timeout);
  void push(int32_t token, float logprob, int num_generated);
  // Set before the first push/close: the prompt tokens that came from the prefix cache.
  void set_cached_tokens(int n);
  // `num_generated` < 0 keeps the last count. A stop/eos token is counted but never pushed.
  void close(FinishReason why, std::string error = {}, int num_generated = -1);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  SeqUpdate pending_;
  bool news_ = false;
};

// The engine's own progress signal (for /health and the supervisor's liveness check): busy is not hung.
struct EngineProgress {
  uint64_t steps = 0;      // forward steps completed since start
  bool idle = true;        // no sequence to run: waiting for requests
  int64_t stalled_ms = 0;  // with work to do: time since the loop last completed a turn (0 when idle)
};

struct SubmitRequest {
  std::vector<int32_t> prompt;
  SamplingParams params;  // params.max_tokens already clamped to max_model_len - prompt
  bool logprobs = false;
  bool scripted = true;  // false: never given a scripted output (EngineConfig::scripted_outputs)
};

struct Submitted {
  uint64_t id = 0;
  std::shared_ptr<SeqChannel> channel;
};

class Engine {
 public:
  // The model's KV pool must already be allocated (allocate_kv); the engine uses all of its blocks.
  Engine(Model& model, EngineConfig cfg, Metrics* metrics);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();
  void stop();  // joins the thread; pending sequences are closed with an error

  // Refused (retryable) when the queue is full; invalid prompts (empty, too long) are refused too.
  Result<Submitted> submit(SubmitRequest req);
  void abort(uint64_t id);

  [[nodiscard]] Gauges gauges() const;
  [[nodiscard]] EngineProgress progress() const;
  [[nodiscard]] const EngineConfig& config() const { return cfg_; }
  [[nodiscard]] int kv_tokens() const { return blocks_.num_blocks() * blocks_.block_size(); }

 private:
  struct Live {
    std::shared_ptr<Sequence> seq;
    Sampler sampler;
    SamplingParams params;
    bool logprobs = false;
    std::shared_ptr<SeqChannel> channel;
    std::chrono::steady_clock::time_point arrival, last_token;
    const std::vector<int32_t>* script = nullptr;  // the scripted output this sequence emits, if any
  };

  void loop();
  void beat();
  void drain_inbox();  // engine thread, under mu_
  void finish(uint64_t id, FinishReason why, const std::string& error = {});
  void step();

  Model& model_;
  EngineConfig cfg_;
  Metrics* metrics_;
  BlockManager blocks_;
  Scheduler sched_;
  std::unordered_map<uint64_t, Live> live_;  // engine thread only
  std::vector<float> logits_;                // rows the backend left to the host sampler
  std::vector<SampledToken> sampled_;        // the step's tokens, one per sampled row

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::deque<Live> inbox_;
  std::vector<uint64_t> aborts_;
  uint64_t next_id_ = 1;
  size_t next_script_ = 0;  // index into cfg_.scripted_outputs of the next scripted sequence
  bool stop_ = false;
  Gauges gauges_;  // refreshed by the engine thread each step
  std::atomic<uint64_t> steps_{0};
  std::atomic<int64_t> beat_ns_{0};  // steady clock of the loop's last turn
  std::atomic<bool> idle_{true};
  std::thread thread_;
};

}  // namespace spk::rt
