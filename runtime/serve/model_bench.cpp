#include "runtime/serve/model_bench.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "kernels/device_memory.h"
#include "runtime/model/model.h"
#include "runtime/serve/memory_planner.h"

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
  const int max_seqs = o.max_num_seqs > 0 ? o.max_num_seqs : std::max(max_batch, 1);
  if (max_batch > max_seqs)
    return make_error(
        "--batch " + std::to_string(max_batch) + " exceeds --max-num-seqs " + std::to_string(max_seqs),
        "raise --max-num-seqs or drop the batch");
  if (o.max_num_batched_tokens < 1 || o.block_size < 1)
    return make_error("--max-num-batched-tokens " + std::to_string(o.max_num_batched_tokens) +
                          ", --block-size " + std::to_string(o.block_size) + ": both must be positive",
                      "pass positive values");
  // Prefill runs one sequence of up to max_prefill + 2 tokens; decode runs max_batch sequences of decode_ctx.
  const int prefill_bps = (max_prefill + 2 + o.block_size - 1) / o.block_size;
  const int decode_bps = (decode_ctx + o.block_size - 1) / o.block_size;
  const int need_blocks = std::max(prefill_bps, decode_bps * std::max(max_batch, 1));
  const int max_len = std::max(max_prefill + 2, decode_ctx);
  const StepLimits limits{o.max_num_batched_tokens, max_seqs, max_len, o.block_size};
  const uint64_t before = m->memory_counters().live_bytes;
  SPK_TRY(m->reserve_steps(limits));
  const uint64_t reserved = m->memory_counters().live_bytes - before;
  int pool_blocks = need_blocks;
  nlohmann::json mem = {{"activation_bytes_planned", m->activation_bytes(limits)},
                        {"activation_bytes_reserved", reserved},
                        {"max_num_batched_tokens", o.max_num_batched_tokens},
                        {"max_num_seqs", max_seqs},
                        {"kv_blocks_needed", need_blocks}};
  if (o.backend != "cpu" || o.device_memory_gib > 0) {
    uint64_t device = static_cast<uint64_t>(o.device_memory_gib * 1024.0 * 1024.0 * 1024.0);
    if (device == 0) {
      SPK_ASSIGN(const uint64_t total, device_memory_bytes(o.backend));
      device = total;
    }
    MemoryPlanInput in;
    in.device_bytes = device;
    in.gpu_memory_utilization = o.gpu_memory_utilization;
    in.weight_bytes = m->weight_bytes();
    in.activation_bytes = m->activation_bytes(limits);
    in.other_bytes = 64ull << 20;
    in.kv_bytes_per_token = m->kv_bytes_per_token();
    in.block_size = o.block_size;
    in.max_model_len = max_len;
    SPK_ASSIGN(MemoryPlan plan, plan_memory(in));
    for (const auto& line : plan.log_lines()) spdlog::info("{}", line);
    if (plan.num_blocks < need_blocks)
      return make_error("the runs need " + std::to_string(need_blocks) + " KV blocks of " +
                            std::to_string(o.block_size) + " tokens (prefill " + std::to_string(max_prefill) +
                            ", batch " + std::to_string(max_batch) + " x " + std::to_string(decode_ctx) +
                            " tokens); the memory plan has " + std::to_string(plan.num_blocks),
                        "raise --gpu-memory-utilization, or lower --prefill, --batch or --context");
    // The pool holds what the runs need, not the plan's whole budget: the plan counts bytes, and cudaMalloc
    // rounds each weight up to its 2 MiB pages (Qwen3-30B-A3B's 18,432 3-MiB expert tensors waste ~18 GiB on
    // an H100), so a pool of the plan's size can fail there (PERF_NOTES.md, issue 44).
    mem["plan"] = plan.to_json();
  }
  mem["kv_blocks"] = pool_blocks;
  SPK_TRY(m->allocate_kv(pool_blocks, o.block_size));
  m->seal_memory();
  std::vector<float> logits;

  out["prefill"] = nlohmann::json::array();
  for (int len : o.prefill_lens) {
    Seqs q{o.block_size, prefill_bps, {0}, {0}};
    SPK_ASSIGN(double cold, prefill(*m, q, 0, len, o.max_num_batched_tokens,
                                    logits));  // first run: capture/JIT-free warm-up
    (void)cold;
    q.len[0] = 0;
    SPK_ASSIGN(double t, prefill(*m, q, 0, len, o.max_num_batched_tokens, logits));  // second run: warm
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
    Seqs q{o.block_size, decode_bps, std::vector<int32_t>(B, 0), std::vector<int32_t>(B, 0)};
    for (int s = 0; s < B; ++s) {
      auto r = prefill(*m, q, s, o.prompt_len, o.max_num_batched_tokens, logits);
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
  const MemoryCounters c = m->memory_counters();
  mem["allocations_after_pool"] = c.sealed_allocations;
  mem["backend_live_bytes"] = c.live_bytes;
  mem["device_free_bytes"] = c.device_free;
  mem["device_total_bytes"] = c.device_total;
  mem["device_peak_bytes"] = c.peak_bytes;
  out["memory"] = mem;
  return out;
}

}  // namespace spk::rt
