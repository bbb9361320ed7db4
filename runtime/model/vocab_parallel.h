// Vocab-parallel embedding and LM head. Rank r owns vocab rows plan.vocab (vocab_per_rank = ceil(V /
// world) rows per rank, the last rank fewer). World 1: the whole table in place and a plain lookup /
// linear, exactly the single-rank code.
//   Embedding (world > 1): table [vocab_per_rank + 1, H], this rank's rows, zero rows after them; ids
//     of other ranks map to the last (zero) row, so the all-reduce of the lookups is the full lookup.
//   LM head (world > 1): w [vocab_per_rank, H] (zero rows past the vocab; tied: the embedding's first
//     vocab_per_rank rows); each rank computes its logit columns, all_gather collects them and every
//     rank gets the full [m, V] logits (rank order = vocab order; padding columns dropped).
#pragma once

#include <vector>

#include "runtime/dist/communicator.h"
#include "runtime/model/linear.h"

namespace spk::rt {

struct VocabParallelEmbedding {
  Tensor table;
  ShardRange vocab;
  int vocab_per_rank = 0;
  dist::Communicator* comm = nullptr;
  Status load(Backend& be, const WeightSource& src, const std::string& name, int64_t V, int64_t H,
              const TpShardPlan& plan, dist::Communicator& c);
  // Uploads the step's ids (host) into ids_dev [n] i32, as this rank's table rows.
  Status upload_ids(Backend& be, const std::vector<int32_t>& ids, Tensor& ids_dev) const;
  // ids_dev -> out [n, H] (summed over ranks).
  Status forward(Backend& be, const Tensor& ids_dev, Tensor& out) const;
  [[nodiscard]] uint64_t bytes() const { return table.nbytes(); }
};

struct VocabParallelLmHead {
  Tensor w;
  int64_t vocab = 0;  // full vocab size V
  int vocab_per_rank = 0;
  dist::Communicator* comm = nullptr;
  Status load(Backend& be, const WeightSource& src, const std::string& name, int64_t V, int64_t H,
              const TpShardPlan& plan, dist::Communicator& c);
  void tie(const VocabParallelEmbedding& e, int64_t V);
  // Columns of this rank's logits (the width of `local`).
  [[nodiscard]] int64_t local_width() const { return w.dim(0); }
  // x [m, H] -> full [m, V] logits on the backend. local [m, local_width()]; gathered
  // [world * m, local_width()]. World 1: pass `full` = `local` (the linear writes it; gathered unused).
  // World > 1 re-lays the gathered shards out through the host (TP runs on the cpu backend, where that
  // is a copy; a device permute would replace it for NCCL).
  Status forward(Backend& be, const Tensor& x, Tensor& local, Tensor& gathered, Tensor& full) const;
};

}  // namespace spk::rt
