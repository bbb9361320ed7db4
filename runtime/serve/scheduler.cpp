#include "runtime/serve/scheduler.h"

#include <algorithm>

namespace spk::rt {

void Scheduler::add(std::shared_ptr<Sequence> seq) {
  seq->state = SeqState::waiting;
  waiting_.push_back(std::move(seq));
}

void Scheduler::remove(uint64_t id) {
  auto match = [id](const std::shared_ptr<Sequence>& s) { return s->id == id; };
  if (auto it = std::find_if(running_.begin(), running_.end(), match); it != running_.end()) {
    blocks_.release((*it)->block_table);
    (*it)->state = SeqState::finished;
    running_.erase(it);
    return;
  }
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), match); it != waiting_.end()) {
    blocks_.release((*it)->block_table);  // empty: waiting sequences hold no blocks
    (*it)->state = SeqState::finished;
    waiting_.erase(it);
  }
}

void Scheduler::preempt(const std::shared_ptr<Sequence>& s) {
  blocks_.release(s->block_table);
  s->num_keyed_blocks = 0;
  s->num_computed = 0;  // recompute prompt + generated tokens on readmission
  s->state = SeqState::waiting;
  ++s->num_preemptions;
  ++preemptions_;
  waiting_.push_front(s);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = cfg_.max_num_batched_tokens;

  // 1. Running sequences, oldest first. Only the newest (back) can be a victim, and it is never one
  //    that was already scheduled this step, because we walk from the front.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    auto s = running_[i];
    int n = std::min(s->num_uncomputed(), budget);
    if (n <= 0) {  // nothing to compute (cannot happen after commit + sample); skip defensively
      ++i;
      continue;
    }
    bool self_preempted = false;
    while (!blocks_.can_grow(s->block_table, s->num_computed + n)) {
      auto victim = running_.back();
      running_.pop_back();
      preempt(victim);
      out.preempted.push_back(victim->id);
      if (victim == s) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    blocks_.grow(s->block_table, s->num_computed + n);
    out.scheduled.push_back({s, n, s->num_computed + n == s->num_tokens()});
    budget -= n;
    ++i;
  }

  // 2. Admission, strictly FIFO: the head of the queue blocks everyone behind it.
  if (out.preempted.empty()) {
    while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < cfg_.max_num_seqs) {
      auto s = waiting_.front();
      const int before = static_cast<int>(out.scheduled.size());
      if (!admit(s, budget, out)) break;
      waiting_.pop_front();
      s->state = SeqState::running;
      running_.push_back(s);
      budget -= out.scheduled[static_cast<size_t>(before)].num_tokens;
    }
  }
  out.num_batched_tokens = cfg_.max_num_batched_tokens - budget;
  return out;
}

bool Scheduler::admit(const std::shared_ptr<Sequence>& s, int budget, SchedulerOutput& out) {
  std::vector<int32_t> hits;
  if (blocks_.prefix_caching()) {
    // Full blocks only, and never the last token: at least one token is computed so logits exist.
    const int bs = blocks_.block_size();
    const int max_blocks = (s->num_tokens() - 1) / bs;
    extend_block_hashes(s->block_keys, s->tokens, max_blocks * bs, bs);
    hits = blocks_.find_cached(s->block_keys, s->tokens, max_blocks);
  }
  const int cached = static_cast<int>(hits.size()) * blocks_.block_size();
  const int n = std::min(s->num_tokens() - cached, budget);
  if (!blocks_.allocate(s->block_table, hits, cached + n)) return false;
  s->num_computed = cached;
  s->num_keyed_blocks = static_cast<int>(hits.size());
  if (s->num_cached_tokens < 0) {  // first admission: what the request reports and /metrics counts
    s->num_cached_tokens = cached;
    if (blocks_.prefix_caching()) {
      out.prefix_queries += s->num_tokens();
      out.prefix_hits += cached;
    }
  }
  out.scheduled.push_back({s, n, s->num_computed + n == s->num_tokens()});
  return true;
}

void Scheduler::cache_full_blocks(Sequence& s) {
  const int bs = blocks_.block_size();
  const int full = std::min(s.num_computed / bs, static_cast<int>(s.block_table.size()));
  if (full <= s.num_keyed_blocks) return;
  extend_block_hashes(s.block_keys, s.tokens, full * bs, bs);
  for (int i = s.num_keyed_blocks; i < full; ++i)
    blocks_.cache_block(s.block_table[static_cast<size_t>(i)], s.block_keys[static_cast<size_t>(i)],
                        s.tokens.data() + static_cast<size_t>(i) * bs);
  s.num_keyed_blocks = full;
}

StepBatch Scheduler::build_batch(const SchedulerOutput& out) const {
  StepBatch b;
  b.tokens.reserve(static_cast<size_t>(out.num_batched_tokens));
  b.positions.reserve(static_cast<size_t>(out.num_batched_tokens));
  for (const auto& sc : out.scheduled) {
    const Sequence& s = *sc.seq;
    SeqSlice sl;
    sl.q_start = static_cast<int32_t>(b.tokens.size());
    sl.q_len = sc.num_tokens;
    sl.ctx_len = s.num_computed + sc.num_tokens;
    sl.block_table.assign(s.block_table.begin(), s.block_table.begin() + blocks_.blocks_for(sl.ctx_len));
    for (int p = s.num_computed; p < sl.ctx_len; ++p) {
      b.tokens.push_back(s.tokens[static_cast<size_t>(p)]);
      b.positions.push_back(p);
    }
    if (sc.sample) b.logit_rows.push_back(sl.q_start + sl.q_len - 1);
    b.seqs.push_back(std::move(sl));
  }
  return b;
}

void Scheduler::commit(const SchedulerOutput& out) {
  for (const auto& sc : out.scheduled) {
    sc.seq->num_computed += sc.num_tokens;
    if (blocks_.prefix_caching()) cache_full_blocks(*sc.seq);
  }
}

}  // namespace spk::rt
