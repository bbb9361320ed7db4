// Tensor-parallel serving: rank 0 runs the engine (HTTP, scheduler, sampler) and drives the other
// ranks through the process group's control channel; every rank runs the same forward.
//
// Messages from rank 0 (one per control frame, little-endian i32 fields):
//   'A' num_blocks block_size                         allocate the KV pool (same size on every rank)
//   'S' n_tok tokens positions n_seq {q_start q_len ctx_len n_bt block_table} n_rows logit_rows
//                                                     run this step (StepBatch)
// Rank 0 ends the group by closing it (ProcessGroup::close); the workers then leave with success.
// Sampling: all ranks get the full logits (vocab-parallel LM head + all_gather); only rank 0 samples and
// emits, the others drop them. A step's plan is broadcast before rank 0 runs its own forward, so the
// workers are already inside the same collectives.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/dist/process_group.h"
#include "runtime/model/model.h"

namespace spk::rt {

std::string encode_step(const StepBatch& b);
// Bounds-checked: a short or inconsistent message is an error, never a read past the end.
Result<StepBatch> decode_step(const std::string& msg);

// Rank 0: wraps the model so that allocate_kv and forward are broadcast first. `inner` and `group`
// must outlive the wrapper. A failed broadcast or step leaves the ranks out of step (the group is
// dead): `on_fatal` is called with the error (the CLI exits) before it is returned.
class LeaderModel final : public Model {
 public:
  LeaderModel(Model& inner, dist::ProcessGroup& group, std::function<void(const Error&)> on_fatal)
      : m_(inner), g_(group), on_fatal_(std::move(on_fatal)) {}
  const ModelConfig& config() const override { return m_.config(); }
  uint64_t weight_bytes() const override { return m_.weight_bytes(); }
  uint64_t decode_bytes(int batch) const override { return m_.decode_bytes(batch); }
  uint64_t kv_bytes_per_token() const override { return m_.kv_bytes_per_token(); }
  uint64_t activation_bytes(const StepLimits& l) const override { return m_.activation_bytes(l); }
  // Local to each rank (no collective): every rank reserves and seals its own memory.
  Status reserve_steps(const StepLimits& l) override { return m_.reserve_steps(l); }
  void seal_memory() override { m_.seal_memory(); }
  MemoryCounters memory_counters() const override { return m_.memory_counters(); }
  Status allocate_kv(int num_blocks, int block_size) override;
  int block_size() const override { return m_.block_size(); }
  int num_blocks() const override { return m_.num_blocks(); }
  Status forward(const StepBatch& batch, std::vector<float>& logits) override;

 private:
  Status fatal(Status st);
  Model& m_;
  dist::ProcessGroup& g_;
  std::function<void(const Error&)> on_fatal_;
};

// Ranks != 0: follows rank 0 until it closes the group (ok) or an error (rank 0 lost, bad message, failed
// step). `max_blocks` is what this rank's own memory plan allows; a bigger pool from rank 0 is refused naming
// both sizes.
Status follow_leader(Model& m, dist::ProcessGroup& group, int max_blocks);

}  // namespace spk::rt
