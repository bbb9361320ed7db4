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
    blocks_.release((*it)->block_table);  // empty unless a future prefix cache filled it
    (*it)->state = SeqState::finished;
    waiting_.erase(it);
  }
}

void Scheduler::preempt(const std::shared_ptr<Sequence>& s) {
  blocks_.release(s->block_table);
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
      int n = std::min(s->num_uncomputed(), budget);
      if (!blocks_.grow(s->block_table, s->num_computed + n)) break;
      waiting_.pop_front();
      s->state = SeqState::running;
      running_.push_back(s);
      out.scheduled.push_back({s, n, s->num_computed + n == s->num_tokens()});
      budget -= n;
    }
  }
  out.num_batched_tokens = cfg_.max_num_batched_tokens - budget;
  return out;
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
  for (const auto& sc : out.scheduled) sc.seq->num_computed += sc.num_tokens;
}

}  // namespace spk::rt
