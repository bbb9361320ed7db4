#include "runtime/serve/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/serve/stats_logger.h"  // access line per request

namespace spk::rt {

using Clock = std::chrono::steady_clock;

bool SeqChannel::take(SeqUpdate& out, std::chrono::milliseconds timeout) {
  std::unique_lock l(mu_);
  if (!cv_.wait_for(l, timeout, [&] { return news_; })) return false;
  out.tokens.insert(out.tokens.end(), pending_.tokens.begin(), pending_.tokens.end());
  out.logprobs.insert(out.logprobs.end(), pending_.logprobs.begin(), pending_.logprobs.end());
  out.num_generated = pending_.num_generated;
  out.cached_tokens = pending_.cached_tokens;
  out.done = pending_.done;
  out.finish = pending_.finish;
  out.error = pending_.error;
  pending_.tokens.clear();
  pending_.logprobs.clear();
  news_ = false;
  return true;
}

void SeqChannel::push(int32_t token, float logprob, int num_generated) {
  {
    std::lock_guard l(mu_);
    pending_.tokens.push_back(token);
    pending_.logprobs.push_back(logprob);
    pending_.num_generated = num_generated;
    news_ = true;
  }
  cv_.notify_all();
}

void SeqChannel::set_cached_tokens(int n) {
  std::lock_guard l(mu_);
  pending_.cached_tokens = n;
}

void SeqChannel::close(FinishReason why, std::string error, int num_generated) {
  {
    std::lock_guard l(mu_);
    if (num_generated >= 0) pending_.num_generated = num_generated;
    pending_.done = true;
    pending_.finish = why;
    pending_.error = std::move(error);
    news_ = true;
  }
  cv_.notify_all();
}

Engine::Engine(Model& model, EngineConfig cfg, Metrics* metrics)
    : model_(model),
      cfg_(std::move(cfg)),
      metrics_(metrics),
      blocks_(model.num_blocks(), model.block_size(), cfg_.enable_prefix_caching),
      sched_(cfg_.sched, blocks_) {
  gauges_.kv_blocks_total = blocks_.num_blocks();
}

Engine::~Engine() { stop(); }

void Engine::start() {
  std::lock_guard l(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& l : inbox_) l.channel->close(FinishReason::none, "server shutting down");
  inbox_.clear();
  for (auto& [id, l] : live_) l.channel->close(FinishReason::none, "server shutting down");
  live_.clear();
}

Result<Submitted> Engine::submit(SubmitRequest req) {
  const int n = static_cast<int>(req.prompt.size());
  if (n == 0) return make_error("prompt is empty", "send at least one token");
  if (n >= cfg_.max_model_len)
    return make_error(
        "prompt has " + std::to_string(n) + " tokens, max_model_len is " + std::to_string(cfg_.max_model_len),
        "shorten the prompt or raise --max-model-len");
  // The whole sequence must fit the pool, else it could never finish even alone (planner guarantees
  // kv_tokens >= max_model_len; this guards direct users).
  const int64_t upto = static_cast<int64_t>(n) + std::max(0, req.params.max_tokens);  // no int overflow
  if (blocks_.blocks_for(static_cast<int>(std::min<int64_t>(cfg_.max_model_len, upto))) >
      blocks_.num_blocks())
    return make_error("sequence of up to " + std::to_string(upto) + " tokens does not fit the KV pool of " +
                          std::to_string(kv_tokens()) + " tokens",
                      "lower max_tokens");
  std::lock_guard l(mu_);
  if (stop_) return make_error("server is shutting down", "", true);
  if (inbox_.size() + static_cast<size_t>(gauges_.waiting) >= cfg_.max_waiting)
    return make_error("request queue is full (" + std::to_string(cfg_.max_waiting) + " waiting)",
                      "retry later", true);
  uint64_t id = next_id_++;
  auto seq = std::make_shared<Sequence>();
  seq->id = id;
  seq->tokens = std::move(req.prompt);
  seq->prompt_len = n;
  Sampler sampler(req.params, cfg_.base_seed + id);
  sampler.set_prompt_length(static_cast<size_t>(n));
  auto ch = std::make_shared<SeqChannel>();
  const std::vector<int32_t>* script = nullptr;
  if (req.scripted && !cfg_.scripted_outputs.empty())
    script = &cfg_.scripted_outputs[std::min(next_script_++, cfg_.scripted_outputs.size() - 1)];
  inbox_.push_back(Live{seq, std::move(sampler), req.params, req.logprobs, ch, Clock::now(), {}, script});
  cv_.notify_all();
  return Submitted{id, ch};
}

void Engine::abort(uint64_t id) {
  {
    std::lock_guard l(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_all();
}

Gauges Engine::gauges() const {
  std::lock_guard l(mu_);
  Gauges g = gauges_;
  g.waiting += static_cast<int>(inbox_.size());
  return g;
}

void Engine::drain_inbox() {
  for (auto& l : inbox_) {
    sched_.add(l.seq);
    uint64_t id = l.seq->id;
    live_.emplace(id, std::move(l));
  }
  inbox_.clear();
  for (uint64_t id : aborts_)
    if (live_.count(id)) finish(id, FinishReason::none, "aborted");
  aborts_.clear();
}

void Engine::finish(uint64_t id, FinishReason why, const std::string& error) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  sched_.remove(id);
  if (metrics_ && error.empty())
    metrics_->e2e(std::chrono::duration<double>(Clock::now() - it->second.arrival).count());
  log_access(id, it->second.seq->prompt_len, int(it->second.seq->tokens.size()) - it->second.seq->prompt_len,
             std::chrono::duration<double>(Clock::now() - it->second.arrival).count(),
             why == FinishReason::stop     ? "stop"
             : why == FinishReason::length ? "length"
                                           : "none",
             error);
  it->second.channel->close(why, error);
  live_.erase(it);
}

void Engine::beat() { beat_ns_ = Clock::now().time_since_epoch().count(); }

EngineProgress Engine::progress() const {
  EngineProgress p;
  p.steps = steps_.load();
  p.idle = idle_.load();
  if (!p.idle) {
    const int64_t age = Clock::now().time_since_epoch().count() - beat_ns_.load();
    p.stalled_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::duration(age)).count();
  }
  return p;
}

void Engine::loop() {
  beat();
  while (true) {
    {
      std::unique_lock l(mu_);
      auto has_work = [&] { return stop_ || !inbox_.empty() || !aborts_.empty() || !sched_.idle(); };
      if (!has_work()) {
        idle_ = true;
        cv_.wait(l, has_work);
      }
      beat();
      idle_ = false;
      if (stop_) return;
      drain_inbox();
    }
    if (!sched_.idle()) {
      step();
      ++steps_;
    }
    beat();
    std::lock_guard l(mu_);
    gauges_.kv_usage = blocks_.usage();
    gauges_.running = static_cast<int>(sched_.num_running());
    gauges_.waiting = static_cast<int>(sched_.num_waiting());
    gauges_.preemptions = sched_.total_preemptions();
  }
}

void Engine::step() {
  SchedulerOutput out = sched_.schedule();
  if (out.empty()) {
    // Nothing could run: the head of the queue cannot get blocks even with the pool to itself.
    // submit() prevents this; fail the head rather than spin.
    if (!sched_.waiting().empty() && sched_.running().empty())
      finish(sched_.waiting().front()->id, FinishReason::none, "sequence does not fit the KV cache");
    return;
  }
  if (metrics_ && (out.prefix_queries > 0 || out.prefix_hits > 0))
    metrics_->prefix_cache(out.prefix_queries, out.prefix_hits);
  StepBatch batch = sched_.build_batch(out);
  // Sampling runs on the backend (only ids come back); rows it hands back are sampled here.
  std::vector<SampleRow> rows;
  for (const auto& sc : out.scheduled) {
    if (!sc.sample) continue;
    auto it = live_.find(sc.seq->id);
    if (it == live_.end()) {
      rows.emplace_back().host = true;
    } else {
      rows.push_back(it->second.sampler.device_row(it->second.logprobs));
    }
  }
  Status st = model_.forward_sample(batch, rows, sampled_, logits_);
  if (!st.ok()) {
    spdlog::error("engine: forward failed: {}", st.error().what());
    for (const auto& sc : out.scheduled) finish(sc.seq->id, FinishReason::none, st.error().what());
    return;
  }
  sched_.commit(out);
  const int vocab = model_.config().vocab_size;
  size_t row = 0;
  const auto now = Clock::now();
  for (const auto& sc : out.scheduled) {
    if (!sc.sample) continue;
    const size_t r = row++;
    auto it = live_.find(sc.seq->id);
    if (it == live_.end()) continue;
    Live& l = it->second;
    Sequence& s = *l.seq;
    float lp = 0;
    int32_t tok = sampled_[r].id;
    if (sampled_[r].host) {
      tok = l.sampler.sample_drawn(rows[r], logits_.data() + r * static_cast<size_t>(vocab), vocab, s.tokens,
                                   l.logprobs ? &lp : nullptr);
    } else {
      lp = sampled_[r].logprob;
    }
    if (l.script) {
      const auto k = static_cast<size_t>(s.num_generated());
      if (k < l.script->size())
        tok = (*l.script)[k];
      else if (!cfg_.eos_ids.empty())
        tok = cfg_.eos_ids.front();
    }
    s.tokens.push_back(tok);
    const int gen = s.num_generated();
    if (gen == 1) l.channel->set_cached_tokens(std::max(0, s.num_cached_tokens));
    if (metrics_) {
      if (gen == 1)
        metrics_->ttft(std::chrono::duration<double>(now - l.arrival).count());
      else
        metrics_->itl(std::chrono::duration<double>(now - l.last_token).count());
      metrics_->generation_tokens(1);
    }
    l.last_token = now;
    FinishReason why = check_stop_token(l.params, tok, static_cast<size_t>(gen), cfg_.eos_ids);
    if (why == FinishReason::none && s.num_tokens() >= cfg_.max_model_len) why = FinishReason::length;
    if (why == FinishReason::stop) {  // a stop id / eos: counted, not part of the text (OpenAI)
      l.channel->close(why, {}, gen);
      finish(s.id, why);
      continue;
    }
    l.channel->push(tok, lp, gen);
    if (why != FinishReason::none) finish(s.id, why);
  }
}

}  // namespace spk::rt
