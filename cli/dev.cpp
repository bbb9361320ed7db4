// `sparkctl dev synth-model`: write a real-format checkpoint with random weights (tests, demo).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "runtime/checkpoint/synth_model.h"

namespace spk::cli {
namespace {

struct SynthFlags {
  std::string arch;
  std::string preset = "tiny";
  std::string tokenizer;
  std::string out;
  uint64_t seed = 0;
  std::string dtype = "bf16";
  std::string tie;  // "", "true", "false"
  std::string max_shard_size = "2GiB";
  std::string config_style = "v4";
  int num_experts = 0;  // 0 = the preset's
};

// "2GiB", "500MB", "64KiB", "4096" -> bytes.
Result<uint64_t> parse_size(const std::string& s) {
  size_t pos = 0;
  uint64_t n = 0;
  try {
    n = std::stoull(s, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos == 0)
    return make_error("--max-shard-size '" + s + "' is not a size", "pass e.g. 2GiB, 500MB or 1048576");
  const std::string unit = s.substr(pos);
  uint64_t mul = 0;
  if (unit.empty() || unit == "B") mul = 1;
  if (unit == "KB") mul = 1000;
  if (unit == "MB") mul = 1000 * 1000;
  if (unit == "GB") mul = 1000ull * 1000 * 1000;
  if (unit == "KiB") mul = 1ull << 10;
  if (unit == "MiB") mul = 1ull << 20;
  if (unit == "GiB") mul = 1ull << 30;
  if (mul == 0 || n == 0)
    return make_error("--max-shard-size '" + s + "' has an unknown unit or is 0",
                      "use B, KB, MB, GB, KiB, MiB or GiB");
  return n * mul;
}

Result<rt::SynthOptions> to_options(const SynthFlags& f) {
  rt::SynthOptions o;
  SPK_ASSIGN(o.arch, rt::parse_synth_arch(f.arch));
  o.preset = f.preset;
  o.tokenizer_dir = f.tokenizer;
  o.out_dir = f.out;
  o.seed = f.seed;
  if (f.num_experts != 0) o.num_experts = f.num_experts;
  o.dtype = f.dtype == "f32" ? DType::f32 : f.dtype == "f16" ? DType::f16 : DType::bf16;
  if (!f.tie.empty()) o.tie = f.tie == "true";
  o.hf5_config = f.config_style == "v5";
  SPK_ASSIGN(o.max_shard_bytes, parse_size(f.max_shard_size));
  return o;
}

int run_synth_model(const SynthFlags& f, const Context& ctx) {
  auto opts = to_options(f);
  if (!opts.ok()) {
    print_error("dev synth-model", opts.error().what());
    return kExitUsage;
  }
  auto r = rt::write_synth_model(*opts);
  if (!r.ok()) {
    print_error("dev synth-model", r.error().what());
    return kExitFailed;
  }
  const auto& c = r->config;
  if (ctx.global.json) {
    nlohmann::ordered_json j = {{"out", f.out},
                                {"architecture", c.architecture},
                                {"preset", f.preset},
                                {"vocab_size", c.vocab_size},
                                {"tie_word_embeddings", c.tie_word_embeddings},
                                {"dtype", std::string(dtype_name(c.torch_dtype))},
                                {"tensors", r->tensors},
                                {"shards", r->shards},
                                {"weight_bytes", r->weight_bytes},
                                {"seconds", r->seconds},
                                {"mb_per_s", r->mb_per_s()}};
    std::cout << json_text(j) << "\n";
  } else {
    std::printf(
        "wrote %s: %s %s, vocab %d, %zu tensors in %zu shard(s), %.1f MB %s%s in %.2f s (%.0f MB/s)\n",
        f.out.c_str(), c.architecture.c_str(), f.preset.c_str(), c.vocab_size, r->tensors, r->shards,
        static_cast<double>(r->weight_bytes) / 1e6, std::string(dtype_name(c.torch_dtype)).c_str(),
        c.tie_word_embeddings ? ", tied embeddings" : "", r->seconds, r->mb_per_s());
  }
  return kExitOk;
}

}  // namespace

void setup_dev(CLI::App& app, Context& ctx) {
  auto* dev = app.add_subcommand("dev", "developer tools (synth-model)");
  dev->require_subcommand(1);
  auto f = std::make_shared<SynthFlags>();
  auto* s = dev->add_subcommand("synth-model",
                                "write a real-format HF checkpoint with random weights (deterministic)");
  s->add_option("--arch", f->arch, "architecture")
      ->required()
      ->check(CLI::IsMember(
          {"qwen3", "qwen2", "llama", "mistral", "qwen3_moe", "qwen2_moe", "mixtral", "deepseek_v3"}));
  s->add_option("--preset", f->preset,
                "size: tiny (hidden 64), small (hidden 256), 8b (Llama-3.1-8B shape); mixture-of-experts "
                "archs: tiny, qwen3-30b-a3b (Qwen3-30B-A3B shape, qwen3_moe), deepseek-v2-lite "
                "(DeepSeek-V2-Lite shape, deepseek_v3)")
      ->check(
          CLI::IsMember({"tiny", "small", "8b", "qwen3-30b-a3b", "30b-a3b", "deepseek-v2-lite", "v2-lite"}));
  s->add_option("--tokenizer", f->tokenizer,
                "directory with tokenizer.json (+ tokenizer_config.json); sets vocab")
      ->required();
  s->add_option("--out", f->out, "output checkpoint directory")->required();
  s->add_option("--seed", f->seed, "weights are a function of seed only: same seed, same bytes");
  s->add_option("--dtype", f->dtype, "weight dtype")->check(CLI::IsMember({"bf16", "f16", "f32"}));
  s->add_option("--tie", f->tie,
                "tie lm_head to the embedding (default: true for qwen3 tiny/small and MoE tiny)")
      ->check(CLI::IsMember({"true", "false"}));
  s->add_option("--max-shard-size", f->max_shard_size, "shard above this size (HF layout with index)")
      ->envname("SPARKCTL_MAX_SHARD_SIZE");
  s->add_option("--config-style", f->config_style,
                "config.json spelling: v4 (rope_theta/rope_scaling/torch_dtype) or v5 (transformers 5: "
                "rope_parameters/dtype/layer_types)")
      ->check(CLI::IsMember({"v4", "v5"}));
  s->add_option(
      "--num-experts", f->num_experts,
      "mixture-of-experts archs: replace the preset's routed-expert count (top-k and shapes kept, so "
      "the bytes read per token do not change)");
  s->callback([f, &ctx] { ctx.exit_code = run_synth_model(*f, ctx); });
}

}  // namespace spk::cli
