// `sparkctl dev bench-model`: model-level decode/prefill benchmark (runtime/serve/model_bench.h). Prints a
// table, or the JSON document with --json.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "runtime/serve/model_bench.h"

namespace spk::cli {

void setup_dev_bench_model(CLI::App& app, Context& ctx) {
  CLI::App* dev = app.get_subcommand("dev");
  auto opts = std::make_shared<rt::ModelBenchOptions>();
  auto* sub = dev->add_subcommand("bench-model", "decode and prefill throughput of a checkpoint (no HTTP)");
  sub->add_option("--model", opts->model_dir, "checkpoint directory")->required();
  sub->add_option("--backend", opts->backend, "cpu | cuda")->capture_default_str();
  sub->add_option("--batch", opts->batches, "decode batch sizes, e.g. --batch 1 8 32 64")
      ->capture_default_str();
  sub->add_option("--prefill", opts->prefill_lens, "prompt lengths to time as one prefill, e.g. 1024 8192");
  sub->add_option("--context", opts->prompt_len, "tokens already in each sequence before decode")
      ->capture_default_str();
  sub->add_option("--steps", opts->decode_steps, "timed decode steps per batch size")->capture_default_str();
  sub->add_option("--warmup", opts->warmup_steps, "untimed decode steps first")->capture_default_str();
  sub->add_option("--block-size", opts->block_size, "KV block size")->capture_default_str();
  sub->add_option("--max-num-batched-tokens", opts->max_num_batched_tokens,
                  "largest step (and prefill chunk) the memory plan reserves for, as runtime serve")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-num-seqs", opts->max_num_seqs,
                  "sequences per step the plan reserves for (0: largest --batch)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--gpu-memory-utilization", opts->gpu_memory_utilization,
                  "fraction of device memory for weights, activations and the KV pool")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  sub->add_option("--device-memory-gib", opts->device_memory_gib,
                  "device memory to plan with (0: the GPU's total; cpu: no plan unless given)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->callback([&ctx, opts] {
    auto r = rt::run_model_bench(*opts);
    if (!r.ok()) {
      print_error("dev bench-model", r.error().what());
      ctx.exit_code = kExitFailed;
      return;
    }
    const auto& j = *r;
    if (ctx.global.json) {
      std::cout << json_text(j) << "\n";
      return;
    }
    std::printf("load: %.2f GB in %.2f s (%.2f GB/s)\n", j["weight_bytes"].get<double>() / 1e9,
                j["load_s"].get<double>(), j["load_gb_per_s"].get<double>());
    for (const auto& p : j["prefill"])
      std::printf("prefill %6d tokens: %9.1f tok/s  TTFT %8.1f ms\n", p["prompt_tokens"].get<int>(),
                  p["tok_per_s"].get<double>(), p["ttft_s"].get<double>() * 1e3);
    const auto& mem = j["memory"];
    std::printf(
        "memory: activations %.2f GiB planned, %.2f GiB reserved; KV pool %d blocks; %llu allocations "
        "after the pool\n",
        mem["activation_bytes_planned"].get<double>() / (1 << 30),
        mem["activation_bytes_reserved"].get<double>() / (1 << 30), mem["kv_blocks"].get<int>(),
        static_cast<unsigned long long>(mem["allocations_after_pool"].get<uint64_t>()));
    if (mem["device_total_bytes"].get<double>() > 0)
      std::printf(
          "device: backend allocations %.2f GiB, in use %.2f GiB of %.2f GiB\n",
          mem["backend_live_bytes"].get<double>() / (1 << 30),
          (mem["device_total_bytes"].get<double>() - mem["device_free_bytes"].get<double>()) / (1 << 30),
          mem["device_total_bytes"].get<double>() / (1 << 30));
    std::printf("%6s %10s %12s %14s %12s\n", "batch", "ms/step", "tok/s", "tok/s/stream", "weight GB/s");
    for (const auto& d : j["decode"])
      std::printf("%6d %10.3f %12.1f %14.1f %12.0f\n", d["batch"].get<int>(), d["step_ms"].get<double>(),
                  d["tok_per_s"].get<double>(), d["per_stream_tok_per_s"].get<double>(),
                  d["weight_gb_per_s"].get<double>());
  });
}

}  // namespace spk::cli
