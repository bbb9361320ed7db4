#include "runtime/model/transformer.h"

#include <algorithm>
#include <cmath>

#include "runtime/model/mla_attention.h"
#include "runtime/model/moe.h"

namespace spk::rt {

Result<std::unique_ptr<Model>> Transformer::create(const ModelConfig& cfg, std::shared_ptr<WeightSource> src,
                                                   std::unique_ptr<Backend> be, TpContext tp) {
  std::unique_ptr<Transformer> m(new Transformer());
  m->cfg_ = cfg;
  if (tp.comm == nullptr) {
    if (tp.plan.world != 1)
      return make_error("tensor-parallel world " + std::to_string(tp.plan.world) + " without a communicator",
                        "join the process group first");
    m->single_ = dist::make_single_communicator();
    tp.comm = m->single_.get();
  }
  if (tp.comm->world() != tp.plan.world || tp.comm->rank() != tp.plan.rank)
    return make_error("communicator is rank " + std::to_string(tp.comm->rank()) + " of " +
                          std::to_string(tp.comm->world()) + ", the shard plan rank " +
                          std::to_string(tp.plan.rank) + " of " + std::to_string(tp.plan.world),
                      "load the model with the group's rank and world");
  m->tp_ = tp;
  m->src_ = std::move(src);
  m->be_ = std::move(be);
  SPK_TRY(m->load(*m->src_));
  return std::unique_ptr<Model>(std::move(m));
}

Status Transformer::load(const WeightSource& src) {
  const ModelConfig& c = cfg_;
  SPK_TRY(
      embed_.load(*be_, src, "model.embed_tokens.weight", c.vocab_size, c.hidden_size, tp_.plan, *tp_.comm));
  weight_bytes_ = embed_.bytes();
  layers_.resize(c.num_hidden_layers);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    SPK_TRY(layers_[i].load(*be_, src, i, c, tp_));
    weight_bytes_ += layers_[i].bytes();
  }
  SPK_TRY(final_norm_.load(*be_, src, "model.norm.weight", c.hidden_size, c.rms_norm_eps));
  weight_bytes_ += final_norm_.w.nbytes();
  if (c.tie_word_embeddings) {
    lm_head_.tie(embed_,
                 c.vocab_size);  // HF ties lm_head to the embedding even when lm_head.weight is stored
  } else {
    if (!src.has("lm_head.weight"))
      return make_error(
          "config.json says tie_word_embeddings=false but the checkpoint has no 'lm_head.weight'",
          "set tie_word_embeddings=true in config.json or use a complete checkpoint");
    SPK_TRY(lm_head_.load(*be_, src, "lm_head.weight", c.vocab_size, c.hidden_size, tp_.plan, *tp_.comm));
    weight_bytes_ += lm_head_.w.nbytes();
  }
  const std::vector<float> inv = rope_inv_freq(c.head_dim, c.rope());
  SPK_ASSIGN(inv_freq_, be_->alloc(DType::f32, {static_cast<int64_t>(inv.size())}));
  return be_->upload(inv_freq_, inv.data(), inv.size() * sizeof(float));
}

uint64_t Transformer::decode_bytes(int batch) const {
  uint64_t b = weight_bytes_;
  if (!cfg_.tie_word_embeddings) b -= embed_.bytes();  // a decode step reads only its tokens' rows
  for (const DecoderLayer& l : layers_) {
    if (!l.moe) continue;
    const MoeMlp& m = *l.moe;
    const int E = m.router.num_experts(), k = m.router.top_k();
    uint64_t routed = 0;
    for (int e = 0; e < E; ++e) routed += m.experts[e].bytes();
    const double touched = 1.0 - std::pow(1.0 - static_cast<double>(k) / E, std::max(batch, 1));
    b -= routed - static_cast<uint64_t>(static_cast<double>(routed) * touched);
  }
  return b;
}

KvSpec Transformer::kv_spec() const {
  KvSpec s;
  s.format = be_->kv_format();
  s.block_size = block_size_ > 0 ? block_size_ : 16;
  s.kv_heads = tp_.plan.kv_heads.count;
  s.head_dim = cfg_.head_dim;
  s.layers = cfg_.num_hidden_layers;
  if (cfg_.mla) {  // one latent row a token, the same on every rank
    s.latent_dim = cfg_.mla->latent_dim();
    s.kv_heads = 1, s.head_dim = s.latent_dim;
  }
  return s;
}

// Mirrors reserve(): resid, h, delta [H]; q, attn [hq, hd]; k, v [hk, hd]; gate, up, act [I]; the token id;
// MoE: router logits [R], slot ids and weights [S]; MLA: MlaAttention::floats_per_token. All 4-byte elements.
uint64_t Transformer::floats_per_token() const {
  const TpShardPlan& p = tp_.plan;
  uint64_t f = 3ull * cfg_.hidden_size + 2ull * p.q_heads.count * cfg_.head_dim +
               2ull * p.kv_heads.count * cfg_.head_dim + 3ull * p.mlp.count + 1;
  if (cfg_.moe) {
    uint64_t R = 1, S = 1;
    for (const auto& L : layers_)
      if (L.moe) R = std::max<uint64_t>(R, L.moe->logit_rows()), S = std::max<uint64_t>(S, L.moe->slots());
    f += R + 2 * S;
  }
  return f + MlaAttention::floats_per_token(cfg_, p.q_heads.count);
}

// Mirrors reserve(): the row index, the gathered hidden row [H], this rank's logits; under TP the
// all-gathered shards and the full row.
uint64_t Transformer::floats_per_logit_row() const {
  const uint64_t local = static_cast<uint64_t>(lm_head_.local_width());
  uint64_t f = 1 + cfg_.hidden_size + local;
  if (tp_.plan.world > 1) f += static_cast<uint64_t>(tp_.plan.world) * local + cfg_.vocab_size;
  return f;
}

StepShapes Transformer::step_shapes(const StepLimits& lim) const {
  const TpShardPlan& p = tp_.plan;
  StepShapes s;
  s.max_tokens = std::max(lim.max_tokens, 1);
  s.max_seqs = std::max(lim.max_seqs, 1);
  const int64_t bs = std::max(lim.block_size, 1);
  s.max_table_entries = static_cast<int64_t>(s.max_seqs) * ((std::max(lim.max_model_len, 1) + bs - 1) / bs);
  s.hidden = cfg_.hidden_size;
  s.q_heads = p.q_heads.count;
  s.kv_heads = p.kv_heads.count;
  s.head_dim = cfg_.head_dim;
  s.max_linear_in = std::max({cfg_.hidden_size, p.q_heads.count * cfg_.head_dim, p.mlp.count});
  if (cfg_.mla)
    s.max_linear_in =
        std::max({s.max_linear_in, cfg_.mla->q_lora_rank, p.q_heads.count * cfg_.mla->v_head_dim});
  for (const auto& L : layers_) {
    if (!L.moe) continue;
    ++s.moe_layers;
    s.moe_experts = std::max(s.moe_experts, static_cast<int>(L.moe->experts.size()));
    s.moe_slots = std::max(s.moe_slots, L.moe->slots());
    for (const ExpertWeights& e : L.moe->experts) {
      s.moe_max_inter = std::max(s.moe_max_inter, static_cast<int>(e.inter()));
      s.moe_quantized = s.moe_quantized || e.gate.format != WeightFormat::dense;
    }
  }
  return s;
}

// A step computes logits only for the rows it samples (StepBatch::logit_rows: at most one per sequence),
// so those buffers scale with max_seqs, and only the per-token ones with max_tokens.
uint64_t Transformer::activation_bytes(const StepLimits& lim) const {
  const StepShapes s = step_shapes(lim);
  return 4ull * (floats_per_token() * static_cast<uint64_t>(s.max_tokens) +
                 floats_per_logit_row() * static_cast<uint64_t>(s.max_seqs)) +
         be_->scratch_bytes(s);
}

Status Transformer::reserve_steps(const StepLimits& lim) {
  const StepShapes s = step_shapes(lim);
  SPK_TRY(reserve(s.max_tokens, s.max_seqs));
  for (const auto& L : layers_)
    if (L.moe) SPK_TRY(be_->prepare_experts(L.moe->experts));
  SPK_TRY(be_->reserve_scratch(s));
  reserved_ = true;
  return ok_status();
}

Status Transformer::allocate_kv(int num_blocks, int block_size) {
  if (num_blocks <= 0 || block_size <= 0)
    return make_error("KV pool of " + std::to_string(num_blocks) + " blocks x " + std::to_string(block_size) +
                          " tokens is empty",
                      "pass a positive number of blocks and block size");
  kv_.clear();
  const KvSpec spec = kv_spec();
  SPK_TRY(require_support(*be_, spec.format, "the KV cache"));
  const std::vector<int64_t> shape = {num_blocks, block_size, spec.kv_heads, spec.head_dim};
  const DType dt = kv_element_dtype(spec.format);
  for (int l = 0; l < spec.layers; ++l) {
    KvCache c;
    SPK_ASSIGN(c.k, be_->alloc(dt, shape));
    if (spec.latent_dim > 0) {  // a latent cache has no V
      kv_.push_back(std::move(c));
      continue;
    }
    SPK_ASSIGN(c.v, be_->alloc(dt, shape));
    kv_.push_back(std::move(c));
  }
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  return ok_status();
}

Status Transformer::reserve(int64_t n, int64_t m) {
  const ModelConfig& c = cfg_;
  if (n > cap_tokens_) {
    n = std::max(n, std::min<int64_t>(2 * cap_tokens_, 8192));
    const int64_t H = c.hidden_size, hq = tp_.plan.q_heads.count, hk = tp_.plan.kv_heads.count,
                  hd = c.head_dim, I = tp_.plan.mlp.count;
    SPK_ASSIGN(cap_.resid, be_->alloc(DType::f32, {n, H}));
    SPK_ASSIGN(cap_.h, be_->alloc(DType::f32, {n, H}));
    SPK_ASSIGN(cap_.delta, be_->alloc(DType::f32, {n, H}));
    SPK_ASSIGN(cap_.q, be_->alloc(DType::f32, {n, hq, hd}));
    SPK_ASSIGN(cap_.attn, be_->alloc(DType::f32, {n, hq, hd}));
    SPK_ASSIGN(cap_.k, be_->alloc(DType::f32, {n, hk, hd}));
    SPK_ASSIGN(cap_.v, be_->alloc(DType::f32, {n, hk, hd}));
    SPK_ASSIGN(cap_.gate, be_->alloc(DType::f32, {n, I}));
    SPK_ASSIGN(cap_.up, be_->alloc(DType::f32, {n, I}));
    SPK_ASSIGN(cap_.act, be_->alloc(DType::f32, {n, I}));
    SPK_ASSIGN(ids_cap_, be_->alloc(DType::i32, {n}));
    if (c.mla) {
      const MlaConfig& ml = *c.mla;
      SPK_ASSIGN(cap_.mla_q, be_->alloc(DType::f32, {n, hq * ml.qk_head_dim()}));
      SPK_ASSIGN(cap_.mla_qa, be_->alloc(DType::f32, {n, std::max(ml.q_lora_rank, 1)}));
      SPK_ASSIGN(cap_.mla_latent, be_->alloc(DType::f32, {n, ml.kv_lora_rank}));
      SPK_ASSIGN(cap_.mla_kpe, be_->alloc(DType::f32, {n, ml.qk_rope_head_dim}));
      SPK_ASSIGN(cap_.mla_out, be_->alloc(DType::f32, {n, hq * ml.v_head_dim}));
    }
    if (c.moe) {  // the widest of the MoE layers' router logits and slots
      int64_t R = 0, S = 0;
      for (const auto& L : layers_)
        if (L.moe) R = std::max<int64_t>(R, L.moe->logit_rows()), S = std::max<int64_t>(S, L.moe->slots());
      SPK_ASSIGN(cap_.router_logits, be_->alloc(DType::f32, {n, std::max<int64_t>(R, 1)}));
      SPK_ASSIGN(cap_.moe_ids, be_->alloc(DType::i32, {n, std::max<int64_t>(S, 1)}));
      SPK_ASSIGN(cap_.moe_w, be_->alloc(DType::f32, {n, std::max<int64_t>(S, 1)}));
    }
    cap_tokens_ = n;
  }
  if (m > cap_logits_) {
    SPK_ASSIGN(rows_cap_, be_->alloc(DType::i32, {m}));
    SPK_ASSIGN(last_cap_, be_->alloc(DType::f32, {m, c.hidden_size}));
    SPK_ASSIGN(logits_cap_, be_->alloc(DType::f32, {m, lm_head_.local_width()}));
    if (tp_.plan.world > 1) {
      SPK_ASSIGN(gathered_cap_, be_->alloc(DType::f32, {tp_.plan.world * m, lm_head_.local_width()}));
      SPK_ASSIGN(full_cap_, be_->alloc(DType::f32, {m, c.vocab_size}));
    }
    cap_logits_ = m;
  }
  return ok_status();
}

// Checks the batch against the pool and flattens it into the backend's step metadata.
Result<StepMeta> Transformer::step_meta(const StepBatch& b) const {
  if (block_size_ == 0) return make_error("forward before allocate_kv", "call Model::allocate_kv first");
  if (b.positions.size() != b.tokens.size())
    return make_error("step batch has " + std::to_string(b.tokens.size()) + " tokens but " +
                          std::to_string(b.positions.size()) + " positions",
                      "give one position per token");
  StepMeta m;
  m.block_size = block_size_;
  m.positions = b.positions;
  m.slots.assign(b.tokens.size(), -1);
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const SeqSlice& q = b.seqs[s];
    const size_t need = (static_cast<size_t>(std::max(q.ctx_len, 0)) + block_size_ - 1) / block_size_;
    const std::string which = "step batch sequence " + std::to_string(s);
    if (q.q_start < 0 || q.q_len < 0 || q.ctx_len < q.q_len ||
        static_cast<size_t>(q.q_start) + q.q_len > b.tokens.size())
      return make_error(which + ": q_start " + std::to_string(q.q_start) + ", q_len " +
                            std::to_string(q.q_len) + ", ctx_len " + std::to_string(q.ctx_len) +
                            " do not fit " + std::to_string(b.tokens.size()) + " tokens",
                        "the scheduler built an inconsistent batch");
    if (q.block_table.size() < need)
      return make_error(which + ": block table has " + std::to_string(q.block_table.size()) +
                            " blocks, ctx_len " + std::to_string(q.ctx_len) + " needs " +
                            std::to_string(need),
                        "allocate blocks before scheduling the step");
    for (size_t i = 0; i < need; ++i)
      if (q.block_table[i] < 0 || q.block_table[i] >= num_blocks_)
        return make_error(which + ": block id " + std::to_string(q.block_table[i]) + " outside the pool of " +
                              std::to_string(num_blocks_) + " blocks",
                          "the block manager handed out a block that does not exist");
    for (int32_t i = q.q_start; i < q.q_start + q.q_len; ++i) {
      const int32_t p = b.positions[i];
      if (p < 0 || p >= q.ctx_len)
        return make_error(which + ": position " + std::to_string(p) + " outside [0, ctx_len " +
                              std::to_string(q.ctx_len) + ")",
                          "positions of new tokens are ctx_len - q_len .. ctx_len - 1");
      m.slots[i] = q.block_table[p / block_size_] * block_size_ + p % block_size_;
    }
    m.seqs.push_back({q.q_start, q.q_len, q.ctx_len, static_cast<int32_t>(m.block_tables.size())});
    m.block_tables.insert(m.block_tables.end(), q.block_table.begin(), q.block_table.begin() + need);
  }
  for (size_t i = 0; i < m.slots.size(); ++i)
    if (m.slots[i] < 0)
      return make_error("step batch token row " + std::to_string(i) + " belongs to no sequence",
                        "every token must lie in one sequence's [q_start, q_start + q_len)");
  for (int32_t r : b.logit_rows)
    if (r < 0 || static_cast<size_t>(r) >= b.tokens.size())
      return make_error("logit row " + std::to_string(r) + " outside the step's " +
                            std::to_string(b.tokens.size()) + " tokens",
                        "logit_rows index into tokens");
  for (int32_t t : b.tokens)
    if (t < 0 || t >= cfg_.vocab_size)
      return make_error(
          "token id " + std::to_string(t) + " outside the vocabulary of " + std::to_string(cfg_.vocab_size),
          "check that the tokenizer belongs to this model");
  return m;
}

Status Transformer::forward(const StepBatch& batch, std::vector<float>& logits) {
  Tensor out;
  SPK_TRY(run(batch, &out));
  logits.assign(batch.logit_rows.size() * static_cast<size_t>(cfg_.vocab_size), 0.0f);
  if (out.empty()) return ok_status();
  return be_->download(out, logits.data(), logits.size() * sizeof(float));
}

Status Transformer::forward_sample(const StepBatch& batch, const std::vector<SampleRow>& rows,
                                   std::vector<SampledToken>& tokens, std::vector<float>& logits) {
  if (rows.size() != batch.logit_rows.size())
    return make_error(std::to_string(rows.size()) + " sampling rows for " +
                          std::to_string(batch.logit_rows.size()) + " logit rows",
                      "give one SampleRow per logit row");
  Tensor out;
  SPK_TRY(run(batch, &out));
  tokens.assign(rows.size(), SampledToken{});
  if (out.empty()) return ok_status();
  SPK_TRY(be_->sample(out, rows, tokens));
  const size_t vocab = static_cast<size_t>(cfg_.vocab_size);
  bool sized = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!tokens[i].host) continue;
    if (!sized && logits.size() < rows.size() * vocab) logits.resize(rows.size() * vocab);
    sized = true;
    if (be_->device() == Device::cpu) {  // already host memory
      std::copy_n(out.ptr<float>() + i * vocab, vocab, logits.data() + i * vocab);
    } else {
      SPK_TRY(be_->download(out.rows(static_cast<int64_t>(i), 1), logits.data() + i * vocab,
                            vocab * sizeof(float)));
    }
  }
  return ok_status();
}

Status Transformer::run(const StepBatch& batch, Tensor* logits_out) {
  SPK_ASSIGN(StepMeta meta, step_meta(batch));
  const int64_t n = static_cast<int64_t>(batch.tokens.size()),
                m = static_cast<int64_t>(batch.logit_rows.size());
  *logits_out = Tensor{};
  if (n == 0) return ok_status();
  SPK_TRY(reserve(n, std::max<int64_t>(m, 1)));
  Activations a;
  for (auto [dst, src] : {std::pair{&a.resid, &cap_.resid},
                          {&a.h, &cap_.h},
                          {&a.delta, &cap_.delta},
                          {&a.q, &cap_.q},
                          {&a.attn, &cap_.attn},
                          {&a.k, &cap_.k},
                          {&a.v, &cap_.v},
                          {&a.gate, &cap_.gate},
                          {&a.up, &cap_.up},
                          {&a.act, &cap_.act}})
    *dst = src->rows(0, n);
  if (cfg_.moe)
    for (auto [dst, src] : {std::pair{&a.router_logits, &cap_.router_logits},
                            {&a.moe_ids, &cap_.moe_ids},
                            {&a.moe_w, &cap_.moe_w}})
      *dst = src->rows(0, n);
  if (cfg_.mla)
    for (auto [dst, src] : {std::pair{&a.mla_q, &cap_.mla_q},
                            {&a.mla_qa, &cap_.mla_qa},
                            {&a.mla_latent, &cap_.mla_latent},
                            {&a.mla_kpe, &cap_.mla_kpe},
                            {&a.mla_out, &cap_.mla_out}})
      *dst = src->rows(0, n);
  Tensor ids = ids_cap_.rows(0, n);
  SPK_TRY(be_->begin_step(meta));  // first: the uploads below are queued in the step (one graph)
  SPK_TRY(embed_.upload_ids(*be_, batch.tokens, ids));

  SPK_TRY(embed_.forward(*be_, ids, a.resid));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const DecoderLayer& L = layers_[l];
    if (l == 0) {
      SPK_TRY(be_->rmsnorm(a.resid, L.input_layernorm.w, L.input_layernorm.eps, a.h));
    } else {  // residual += previous MLP output; h = norm(residual)
      SPK_TRY(be_->add_rmsnorm(a.resid, a.delta, L.input_layernorm.w, L.input_layernorm.eps, a.h));
    }
    SPK_TRY(L.forward_attn(*be_, a, inv_freq_, kv_[l]));
    SPK_TRY(be_->add_rmsnorm(a.resid, a.delta, L.post_attention_layernorm.w, L.post_attention_layernorm.eps,
                             a.h));
    SPK_TRY(L.forward_mlp(*be_, a));
  }
  if (m == 0) return be_->synchronize();
  // Final norm and lm_head only for the rows whose logits are wanted.
  SPK_TRY(be_->add_rmsnorm(a.resid, a.delta, final_norm_.w, final_norm_.eps, a.h));
  Tensor last = a.h, out = logits_cap_.rows(0, m);
  bool every_row = m == n;  // decode steps want every row in order: no gather
  for (int64_t i = 0; every_row && i < m; ++i) every_row = batch.logit_rows[i] == i;
  if (!every_row) {
    Tensor rows = rows_cap_.rows(0, m);
    last = last_cap_.rows(0, m);
    SPK_TRY(be_->upload(rows, batch.logit_rows.data(), m * sizeof(int32_t)));
    SPK_TRY(be_->gather_rows(a.h, rows, last));
  }
  const bool tp = tp_.plan.world > 1;
  Tensor gathered = tp ? gathered_cap_.rows(0, tp_.plan.world * m) : Tensor{};
  Tensor full = tp ? full_cap_.rows(0, m) : out;
  SPK_TRY(lm_head_.forward(*be_, last, out, gathered, full));
  *logits_out = full;
  return ok_status();
}

}  // namespace spk::rt
