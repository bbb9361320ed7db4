#include "runtime/model_bench.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "runtime/model/model.h"

namespace spk::rt {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int32_t argmax_row(const float* row, int vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

// Greedy tokens of the step's logit rows, sampled on the backend (only ids come back); rows the
// backend hands back are argmaxed here.
Status greedy_step(Model& m, const StepBatch& b, std::vector<int32_t>& ids, std::vector<float>& logits) {
  std::vector<SampledToken> toks;
  const std::vector<SampleRow> rows(b.logit_rows.size());  // temperature 0: greedy
  SPK_TRY(m.forward_sample(b, rows, toks, logits));
  const int vocab = m.config().vocab_size;
  ids.resize(toks.size());
  for (size_t i = 0; i < toks.size(); ++i)
    ids[i] = toks[i].host ? argmax_row(logits.data() + i * static_cast<size_t>(vocab), vocab) : toks[i].id;
  return ok_status();
}

// Sequences with contiguous block ranges; each owns `blocks_per_seq` blocks of the pool.
struct Seqs {
  int block_size, blocks_per_seq;
  std::vector<int32_t> len;   // tokens in KV
  std::vector<int32_t> last;  // last token id
  std::vector<int32_t> table(int s) const {
    std::vector<int32_t> t(blocks_per_seq);
    for (int i = 0; i < blocks_per_seq; ++i) t[i] = s * blocks_per_seq + i;
    return t;
  }
};

// Prefills `len` synthetic tokens into sequence s in chunks; returns seconds.
Result<double> prefill(Model& m, Seqs& q, int s, int len, int max_chunk, std::vector<float>& logits) {
  const int vocab = m.config().vocab_size;
  std::vector<int32_t> ids;
  const auto t0 = Clock::now();
  for (int done = 0; done < len;) {
    const int n = std::min(max_chunk, len - done);
    StepBatch b;
    for (int i = 0; i < n; ++i) {
      b.tokens.push_back(static_cast<int32_t>((1000003ll * (done + i + 7 * s)) % vocab));
      b.positions.push_back(done + i);
    }
    b.seqs.push_back({0, n, done + n, q.table(s)});
    b.logit_rows = {n - 1};
    SPK_TRY(greedy_step(m, b, ids, logits));
    done += n;
    q.len[s] = done;
  }
  q.last[s] = ids.at(0);
  return seconds_since(t0);
}

}  // namespace

Result<nlohmann::json> run_model_bench(const ModelBenchOptions& o) {
  nlohmann::json out;
  const auto t_load = Clock::now();
  SPK_ASSIGN(std::unique_ptr<Model> m, Model::load(o.model_dir, LoadOptions{.backend = o.backend}));
  const double load_s = seconds_since(t_load);
  out["model"] = o.model_dir;
  out["backend"] = o.backend;
  out["weight_bytes"] = m->weight_bytes();
  out["load_s"] = load_s;
  out["load_gb_per_s"] = static_cast<double>(m->weight_bytes()) / load_s / 1e9;
  spdlog::info("loaded {} ({:.2f} GB) in {:.2f} s: {:.2f} GB/s", o.model_dir, m->weight_bytes() / 1e9, load_s,
               m->weight_bytes() / load_s / 1e9);

  const int max_batch = o.batches.empty() ? 1 : *std::max_element(o.batches.begin(), o.batches.end());
  const int max_prefill =
      o.prefill_lens.empty() ? 0 : *std::max_element(o.prefill_lens.begin(), o.prefill_lens.end());
  const int decode_ctx = o.prompt_len + o.warmup_steps + o.decode_steps + 1;
  const int ctx = std::max(decode_ctx, max_prefill + 2);
  const int blocks_per_seq = (ctx + o.block_size - 1) / o.block_size;
  SPK_TRY(m->allocate_kv(blocks_per_seq * std::max(max_batch, 1), o.block_size));
  std::vector<float> logits;

  out["prefill"] = nlohmann::json::array();
  for (int len : o.prefill_lens) {
    Seqs q{o.block_size, blocks_per_seq, {0}, {0}};
    SPK_ASSIGN(double cold,
               prefill(*m, q, 0, len, o.max_chunk, logits));  // first run: capture/JIT-free warm-up
    (void)cold;
    q.len[0] = 0;
    SPK_ASSIGN(double t, prefill(*m, q, 0, len, o.max_chunk, logits));  // second run: warm
    // TTFT = prefill + one decode step producing the next token.
    const auto t1 = Clock::now();
    StepBatch b;
    b.tokens = {q.last[0]};
    b.positions = {q.len[0]};
    b.seqs.push_back({0, 1, q.len[0] + 1, q.table(0)});
    b.logit_rows = {0};
    std::vector<int32_t> ids;
    SPK_TRY(greedy_step(*m, b, ids, logits));
    const double first_decode = seconds_since(t1);
    out["prefill"].push_back(
        {{"prompt_tokens", len}, {"seconds", t}, {"tok_per_s", len / t}, {"ttft_s", t + first_decode}});
    spdlog::info("prefill {} tokens: {:.1f} ms, {:.0f} tok/s, TTFT {:.1f} ms", len, t * 1e3, len / t,
                 (t + first_decode) * 1e3);
  }

  out["decode"] = nlohmann::json::array();
  for (int B : o.batches) {
    Seqs q{o.block_size, blocks_per_seq, std::vector<int32_t>(B, 0), std::vector<int32_t>(B, 0)};
    for (int s = 0; s < B; ++s) {
      auto r = prefill(*m, q, s, o.prompt_len, o.max_chunk, logits);
      if (!r.ok()) return r.error();
    }
    double timed = 0;
    std::vector<int32_t> ids;
    for (int step = 0; step < o.warmup_steps + o.decode_steps; ++step) {
      StepBatch b;
      for (int s = 0; s < B; ++s) {
        b.tokens.push_back(q.last[s]);
        b.positions.push_back(q.len[s]);
        b.seqs.push_back({s, 1, q.len[s] + 1, q.table(s)});
        b.logit_rows.push_back(s);
      }
      const auto t0 = Clock::now();
      SPK_TRY(greedy_step(*m, b, ids, logits));
      for (int s = 0; s < B; ++s) {
        q.last[s] = ids[s];
        ++q.len[s];
      }
      if (step >= o.warmup_steps) timed += seconds_since(t0);
    }
    const double step_ms = timed / o.decode_steps * 1e3;
    const double tps = B * o.decode_steps / timed;
    out["decode"].push_back({{"batch", B},
                             {"context", o.prompt_len},
                             {"step_ms", step_ms},
                             {"tok_per_s", tps},
                             {"per_stream_tok_per_s", tps / B},
                             {"weight_gb_per_s", m->decode_bytes(B) / (step_ms * 1e-3) / 1e9},
                             {"step_weight_bytes", m->decode_bytes(B)}});
    spdlog::info("decode batch {}: {:.3f} ms/step, {:.1f} tok/s aggregate, {:.1f} tok/s per stream", B,
                 step_ms, tps, tps / B);
  }
  return out;
}

}  // namespace spk::rt
