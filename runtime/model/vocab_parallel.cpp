#include "runtime/model/vocab_parallel.h"

#include <algorithm>

namespace spk::rt {

Status VocabParallelEmbedding::load(Backend& be, const WeightSource& src, const std::string& name, int64_t V,
                                    int64_t H, const TpShardPlan& plan, dist::Communicator& c) {
  comm = &c;
  vocab = plan.vocab;
  vocab_per_rank = plan.vocab_per_rank;
  if (plan.world == 1) {
    SPK_ASSIGN(table, load_weight(be, src, name, {V, H}, false));
  } else {
    SPK_ASSIGN(table, load_weight_rows(be, src, name, {V, H}, plan.vocab, false, plan.vocab_per_rank + 1));
  }
  return ok_status();
}

Status VocabParallelEmbedding::upload_ids(Backend& be, const std::vector<int32_t>& ids,
                                          Tensor& ids_dev) const {
  const size_t n = ids.size();
  if (comm == nullptr || comm->world() == 1) return be.upload(ids_dev, ids.data(), n * sizeof(int32_t));
  std::vector<int32_t> local(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t l = ids[i] - vocab.begin;
    local[i] = l >= 0 && l < vocab.count ? l : vocab_per_rank;  // the zero row
  }
  return be.upload(ids_dev, local.data(), n * sizeof(int32_t));
}

Status VocabParallelEmbedding::forward(Backend& be, const Tensor& ids_dev, Tensor& out) const {
  SPK_TRY(be.embedding(table, ids_dev, out));
  if (comm == nullptr || comm->world() == 1) return ok_status();
  return dist::all_reduce_sum(be, *comm, out);
}

Status VocabParallelLmHead::load(Backend& be, const WeightSource& src, const std::string& name, int64_t V,
                                 int64_t H, const TpShardPlan& plan, dist::Communicator& c) {
  comm = &c;
  vocab = V;
  vocab_per_rank = plan.vocab_per_rank;
  if (plan.world == 1) {
    SPK_ASSIGN(w, load_weight(be, src, name, {V, H}, false));
  } else {
    SPK_ASSIGN(w, load_weight_rows(be, src, name, {V, H}, plan.vocab, false, plan.vocab_per_rank));
  }
  return ok_status();
}

void VocabParallelLmHead::tie(const VocabParallelEmbedding& e, int64_t V) {
  comm = e.comm;
  vocab = V;
  vocab_per_rank = e.vocab_per_rank;
  w = (comm == nullptr || comm->world() == 1) ? e.table : e.table.rows(0, e.vocab_per_rank);
}

Status VocabParallelLmHead::forward(Backend& be, const Tensor& x, Tensor& local, Tensor& gathered,
                                    Tensor& full) const {
  if (comm == nullptr || comm->world() == 1) return be.linear(x, w, nullptr, full);
  SPK_TRY(be.linear(x, w, nullptr, local));
  SPK_TRY(dist::all_gather_rows(be, *comm, local, gathered));
  SPK_TRY(be.synchronize());
  const int world = comm->world();
  const int64_t m = x.dim(0), vpr = vocab_per_rank;
  std::vector<float> g(static_cast<size_t>(world * m * vpr)), f(static_cast<size_t>(m * vocab));
  SPK_TRY(be.download(gathered, g.data(), g.size() * sizeof(float)));
  for (int r = 0; r < world; ++r) {
    const int64_t cols = std::min<int64_t>(vpr, vocab - r * vpr);
    for (int64_t i = 0; i < m && cols > 0; ++i)
      std::copy_n(g.data() + (r * m + i) * vpr, cols, f.data() + i * vocab + r * vpr);
  }
  return be.upload(full, f.data(), f.size() * sizeof(float));
}

}  // namespace spk::rt
