// What a backend must hold ready before the KV pool takes the rest of the device: the largest step the
// scheduler may run (StepShapes, from max_num_batched_tokens / max_num_seqs and the model's widths), and
// the counters that show whether a step allocated after that (MemoryCounters).
//
// The contract (issue 44): Backend::reserve_scratch(shapes) allocates every internal buffer a step within
// `shapes` can need; Backend::scratch_bytes(shapes) is the same sum without allocating (the memory plan's
// input); after Backend::seal_memory() any device allocation is an error that names the buffer and the
// knob, never a bare allocator failure (on unified memory a late allocation can wedge the host).
#pragma once

#include <cstdint>

namespace spk {

struct StepShapes {
  int max_tokens = 0;             // new tokens in one step (max_num_batched_tokens)
  int max_seqs = 0;               // sequences in one step, and logit rows (max_num_seqs)
  int64_t max_table_entries = 0;  // block-table entries of one step: max_seqs x ceil(max_model_len / block)
  int hidden = 0;                 // residual width
  int max_linear_in = 0;          // the widest input of any linear layer (K of the GEMMs)
  int q_heads = 0, kv_heads = 0, head_dim = 0;  // this rank's attention
  // Mixture of experts (0 experts: dense): the widest layer's expert count (shared experts included),
  // routed slots per token and widest expert.
  int moe_experts = 0, moe_slots = 0, moe_max_inter = 0;
  int moe_layers = 0;          // layers with experts (a backend may keep a table per layer)
  bool moe_quantized = false;  // some expert is in a quantized format (its kernels may need more scratch)
};

struct MemoryCounters {
  uint64_t live_bytes = 0;          // backend allocations alive now (weights copied to it included)
  uint64_t peak_bytes = 0;          // their high-water mark
  uint64_t allocations = 0;         // count of allocations so far
  uint64_t sealed_allocations = 0;  // allocations asked for after seal_memory() (each one refused)
  bool sealed = false;
  // What the device reports (cudaMemGetInfo; 0 on CPU): used - live_bytes is what others hold (the CUDA
  // context, libraries, the allocator's page rounding).
  uint64_t device_free = 0, device_total = 0;
};

}  // namespace spk
