// Continuous-batching scheduler (vLLM V1 policy). Each step gets a token budget of
// max_num_batched_tokens. Running sequences go first, in admission order: a decoding sequence costs one
// token, a sequence still prefilling takes a chunk of what is left of the budget (chunked prefill).
// Then waiting sequences are admitted strictly FIFO while the budget, max_num_seqs and the KV pool
// allow. When a running sequence needs a block and the pool is empty, the newest running sequence is
// preempted: its blocks are freed and it goes back to the FRONT of the waiting queue to be recomputed.
// No admission happens in a step that preempted. Not thread-safe: the engine thread owns it.
//
// Prefix caching (BlockManager built with it on): an admitted sequence first takes the longest run of
// cached full blocks of its tokens, capped so that its last token is always computed (its logits are
// sampled), and starts at num_computed = that many tokens; budget and pool only pay for the rest. After
// each step every block that became full is registered in the cache. Preemption drops the references
// (the blocks stay cached), so a readmission usually finds its own prefix again.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "runtime/model/step.h"
#include "runtime/serve/block_manager.h"
#include "runtime/serve/sequence.h"

namespace spk::rt {

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
};

struct ScheduledSeq {
  std::shared_ptr<Sequence> seq;
  int num_tokens = 0;   // new tokens computed this step: tokens[num_computed, num_computed + num_tokens)
  bool sample = false;  // this chunk reaches the end of the sequence: its last row's logits are sampled
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> scheduled;
  std::vector<uint64_t> preempted;  // ids preempted while building this step
  int num_batched_tokens = 0;
  // Prefix cache lookups of first admissions in this step (vLLM's counting: prompt tokens queried,
  // tokens found cached). Zero when caching is off.
  int prefix_queries = 0, prefix_hits = 0;
  [[nodiscard]] bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig cfg, BlockManager& blocks) : cfg_(cfg), blocks_(blocks) {}

  // Queues a sequence at the back of the waiting queue (FIFO).
  void add(std::shared_ptr<Sequence> seq);
  // Removes a sequence wherever it is and frees its blocks (finished, aborted, client gone). No-op
  // for unknown ids.
  void remove(uint64_t id);

  SchedulerOutput schedule();
  // Builds the model's flattened batch for `out` (step.h contract). Row i of the logits belongs to the
  // i-th scheduled sequence with sample == true.
  [[nodiscard]] StepBatch build_batch(const SchedulerOutput& out) const;
  // After a successful forward: marks the scheduled tokens as computed.
  void commit(const SchedulerOutput& out);

  [[nodiscard]] size_t num_waiting() const { return waiting_.size(); }
  [[nodiscard]] size_t num_running() const { return running_.size(); }
  [[nodiscard]] bool idle() const { return waiting_.empty() && running_.empty(); }
  [[nodiscard]] const std::vector<std::shared_ptr<Sequence>>& running() const { return running_; }
  [[nodiscard]] const std::deque<std::shared_ptr<Sequence>>& waiting() const { return waiting_; }
  [[nodiscard]] uint64_t total_preemptions() const { return preemptions_; }

 private:
  void preempt(const std::shared_ptr<Sequence>& s);
  // Admits the head of the queue with at most `budget` new tokens; false (nothing changed) when the pool
  // is too small.
  bool admit(const std::shared_ptr<Sequence>& s, int budget, SchedulerOutput& out);
  void cache_full_blocks(Sequence& s);

  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::deque<std::shared_ptr<Sequence>> waiting_;
  std::vector<std::shared_ptr<Sequence>> running_;  // admission order; back() is the newest
  uint64_t preemptions_ = 0;
};

}  // namespace spk::rt
