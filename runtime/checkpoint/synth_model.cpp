// Synthetic weights and the directory writer.
//
// Noise: element i of tensor T is a function of (seed, name(T), i) only: z = splitmix64(key(T) + i*phi)
// split into four 16-bit uniforms whose centred integer sum (Irwin-Hall, n = 4, close to normal) is
// multiplied by one float constant. No libm, no std:: distributions, so the bytes are identical
// everywhere. Init as transformers does: linear/embedding std 0.02, RMSNorm weight 1 + N(0, 0.02^2)
// (noise so a forgotten norm weight shows up in golden tests), biases std 0.02.
// Napkin math for 8b: 8.0e9 elements at ~2 ns each on one core ~ 16 s of PRNG; the rest is disk.
#include "runtime/checkpoint/synth_model.h"

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"

namespace spk::rt {

namespace {

namespace fs = std::filesystem;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

enum class Init { linear, norm, bias };

Init init_of(const std::string& name) {
  if (name.find("norm") != std::string::npos) return Init::norm;
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) return Init::bias;
  return Init::linear;
}

// std of the centred sum of four uniform 16-bit integers: 65536 / sqrt(3).
constexpr float kSumStd = 37837.23f;

template <class Store>
void fill_noise(const TensorSpec& t, uint64_t seed, uint64_t numel, Store store) {
  const uint64_t key = mix64(seed ^ fnv1a(t.name));
  const Init init = init_of(t.name);
  const float scale = 0.02f / kSumStd;
  const float offset = init == Init::norm ? 1.0f : 0.0f;
  for (uint64_t i = 0; i < numel; ++i) {
    const uint64_t z = mix64(key + (i + 1) * 0x9e3779b97f4a7c15ull);
    const int32_t s = static_cast<int32_t>(z & 0xffff) + static_cast<int32_t>((z >> 16) & 0xffff) +
                      static_cast<int32_t>((z >> 32) & 0xffff) + static_cast<int32_t>(z >> 48) - 2 * 65535;
    store(i, offset + static_cast<float>(s) * scale);
  }
}

void fill_tensor(const TensorSpec& t, uint64_t seed, uint8_t* dst, uint64_t nbytes) {
  const uint64_t n = nbytes / dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::f32:
      fill_noise(t, seed, n, [dst](uint64_t i, float v) { std::memcpy(dst + 4 * i, &v, 4); });
      break;
    case DType::bf16:
      fill_noise(t, seed, n, [dst](uint64_t i, float v) {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(dst + 2 * i, &h, 2);
      });
      break;
    case DType::f16:
      fill_noise(t, seed, n, [dst](uint64_t i, float v) {
        const uint16_t h = f32_to_f16(v);
        std::memcpy(dst + 2 * i, &h, 2);
      });
      break;
    default:
      std::memset(dst, 0, nbytes);
  }
}

Status copy_file(const std::string& from, const std::string& to) {
  SPK_ASSIGN(std::string data, read_file(from));
  return write_file_atomic(to, data);
}

// A MoE layer's tensors in the on-disk Hugging Face layout: one 2-D tensor per expert.
void append_moe_specs(const ModelConfig& c, const std::string& p, std::vector<TensorSpec>& v) {
  const MoeConfig& m = *c.moe;
  const DType dt = c.torch_dtype;
  const int64_t h = c.hidden_size, e_inter = m.moe_intermediate_size;
  const bool mixtral = m.naming == MoeNaming::mixtral;
  const std::string base = p + (mixtral ? "block_sparse_moe." : "mlp.");
  v.push_back({base + "gate.weight", dt, {m.num_experts, h}});
  if (m.score_correction_bias)
    v.push_back({base + "gate.e_score_correction_bias", DType::f32, {m.num_experts}});
  for (int e = 0; e < m.num_experts; ++e) {
    const std::string x = base + "experts." + std::to_string(e) + ".";
    v.push_back({x + (mixtral ? "w1" : "gate_proj") + ".weight", dt, {e_inter, h}});
    v.push_back({x + (mixtral ? "w2" : "down_proj") + ".weight", dt, {h, e_inter}});
    v.push_back({x + (mixtral ? "w3" : "up_proj") + ".weight", dt, {e_inter, h}});
  }
  if (m.shared_expert_intermediate_size > 0) {
    const int64_t s = m.shared_expert_intermediate_size;
    const std::string x = base + m.shared_expert_name + ".";
    v.push_back({x + "gate_proj.weight", dt, {s, h}});
    v.push_back({x + "up_proj.weight", dt, {s, h}});
    v.push_back({x + "down_proj.weight", dt, {h, s}});
    if (m.shared_expert_gated) v.push_back({base + "shared_expert_gate.weight", dt, {1, h}});
  }
}

// Multi-head latent attention (deepseek_v3), transformers' names (runtime/model/mla_attention.h).
void append_mla_specs(const ModelConfig& c, const std::string& p, std::vector<TensorSpec>& v) {
  const MlaConfig& m = *c.mla;
  const DType dt = c.torch_dtype;
  const int64_t h = c.hidden_size, heads = c.num_attention_heads;
  const std::string a = p + "self_attn.";
  if (m.q_lora_rank > 0) {
    v.push_back({a + "q_a_proj.weight", dt, {m.q_lora_rank, h}});
    if (c.attention_bias) v.push_back({a + "q_a_proj.bias", dt, {m.q_lora_rank}});
    v.push_back({a + "q_a_layernorm.weight", dt, {m.q_lora_rank}});
    v.push_back({a + "q_b_proj.weight", dt, {heads * m.qk_head_dim(), m.q_lora_rank}});
  } else {
    v.push_back({a + "q_proj.weight", dt, {heads * m.qk_head_dim(), h}});
  }
  v.push_back({a + "kv_a_proj_with_mqa.weight", dt, {m.latent_dim(), h}});
  if (c.attention_bias) v.push_back({a + "kv_a_proj_with_mqa.bias", dt, {m.latent_dim()}});
  v.push_back({a + "kv_a_layernorm.weight", dt, {m.kv_lora_rank}});
  v.push_back({a + "kv_b_proj.weight", dt, {heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank}});
  v.push_back({a + "o_proj.weight", dt, {h, heads * m.v_head_dim}});
  if (c.attention_bias) v.push_back({a + "o_proj.bias", dt, {h}});
}

}  // namespace

std::vector<TensorSpec> synth_tensor_specs(const ModelConfig& c) {
  const DType dt = c.torch_dtype;
  const int64_t h = c.hidden_size, q = int64_t{c.num_attention_heads} * c.head_dim,
                kv = int64_t{c.num_key_value_heads} * c.head_dim, inter = c.intermediate_size;
  std::vector<TensorSpec> v;
  v.push_back({"model.embed_tokens.weight", dt, {c.vocab_size, h}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    v.push_back({p + "input_layernorm.weight", dt, {h}});
    if (c.mla) {
      append_mla_specs(c, p, v);
    } else {
      v.push_back({p + "self_attn.q_proj.weight", dt, {q, h}});
      v.push_back({p + "self_attn.k_proj.weight", dt, {kv, h}});
      v.push_back({p + "self_attn.v_proj.weight", dt, {kv, h}});
      if (c.attention_bias) {
        v.push_back({p + "self_attn.q_proj.bias", dt, {q}});
        v.push_back({p + "self_attn.k_proj.bias", dt, {kv}});
        v.push_back({p + "self_attn.v_proj.bias", dt, {kv}});
      }
      v.push_back({p + "self_attn.o_proj.weight", dt, {h, q}});
      if (c.qk_norm) {
        v.push_back({p + "self_attn.q_norm.weight", dt, {c.head_dim}});
        v.push_back({p + "self_attn.k_norm.weight", dt, {c.head_dim}});
      }
    }
    v.push_back({p + "post_attention_layernorm.weight", dt, {h}});
    if (c.moe && c.moe->is_moe_layer(l)) {
      append_moe_specs(c, p, v);
      continue;
    }
    v.push_back({p + "mlp.gate_proj.weight", dt, {inter, h}});
    v.push_back({p + "mlp.up_proj.weight", dt, {inter, h}});
    v.push_back({p + "mlp.down_proj.weight", dt, {h, inter}});
  }
  v.push_back({"model.norm.weight", dt, {h}});
  if (!c.tie_word_embeddings) v.push_back({"lm_head.weight", dt, {c.vocab_size, h}});
  return v;
}

Result<SynthReport> write_synth_model(const SynthOptions& o) {
  if (o.out_dir.empty()) return make_error("no output directory", "pass --out DIR");
  if (o.tokenizer_dir.empty())
    return make_error("no tokenizer directory", "pass --tokenizer DIR (holding tokenizer.json)");
  SPK_ASSIGN(TokenizerFacts tok, read_tokenizer_facts(o.tokenizer_dir));
  SPK_ASSIGN(ModelConfig cfg, synth_config(o, tok));
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return make_error("cannot create " + o.out_dir + ": " + ec.message(), "pass a writable --out");
  // Remove what a previous run may have left (config.json first: it marks a complete directory).
  fs::remove(o.out_dir + "/config.json", ec);
  for (const auto& e : fs::directory_iterator(o.out_dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("model-", 0) == 0 && n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0)
      fs::remove(e.path(), ec);
  }

  SPK_TRY(copy_file(o.tokenizer_dir + "/tokenizer.json", o.out_dir + "/tokenizer.json"));
  if (fs::exists(o.tokenizer_dir + "/tokenizer_config.json", ec))
    SPK_TRY(copy_file(o.tokenizer_dir + "/tokenizer_config.json", o.out_dir + "/tokenizer_config.json"));

  SynthReport rep;
  const auto specs = synth_tensor_specs(cfg);
  for (const auto& s : specs) {
    uint64_t n = dtype_size(s.dtype);
    for (int64_t d : s.shape) n *= static_cast<uint64_t>(d);
    rep.weight_bytes += n;
  }
  rep.tensors = specs.size();
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t seed = o.seed;
  SPK_TRY(write_checkpoint_shards(
      o.out_dir, specs,
      [seed](const TensorSpec& t, uint8_t* dst, uint64_t n) { fill_tensor(t, seed, dst, n); },
      o.max_shard_bytes));
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.shards =
      fs::exists(o.out_dir + "/model.safetensors.index.json", ec)
          ? static_cast<size_t>(std::count_if(fs::directory_iterator(o.out_dir), fs::directory_iterator(),
                                              [](const fs::directory_entry& e) {
                                                return e.path().filename().string().rfind("model-", 0) == 0;
                                              }))
          : 1;

  nlohmann::ordered_json gen;
  if (cfg.bos_token_id >= 0) gen["bos_token_id"] = cfg.bos_token_id;
  if (cfg.eos_token_ids.size() == 1)
    gen["eos_token_id"] = cfg.eos_token_ids[0];
  else if (!cfg.eos_token_ids.empty())
    gen["eos_token_id"] = cfg.eos_token_ids;
  gen["transformers_version"] = "4.51.0";
  SPK_TRY(write_file_atomic(o.out_dir + "/generation_config.json", gen.dump(2) + "\n"));
  SPK_TRY(write_file_atomic(o.out_dir + "/config.json", synth_config_json(cfg, o.hf5_config)));
  rep.config = cfg;
  return rep;
}

}  // namespace spk::rt
