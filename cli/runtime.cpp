// `sparkctl runtime serve`: the daemon the orchestrator launches on every rank. Loads the model,
// plans the KV pool (memory planner), starts the engine thread and the OpenAI HTTP server, proves the
// engine can produce a token, then prints the readiness line. argv contract: orchestrator's `plan`.
// Tensor parallel (--tensor-parallel-size N > 1, CPU backend / Gloo): every rank joins the group at
// --master (rank 0 binds it; token from $SPARKCTL_RDZV_TOKEN) before loading its shard. Rank 0 serves
// HTTP and drives the others step by step (runtime/serve/tp_step.h); the others serve no HTTP. When
// any rank is lost (exit, kill, hang past --tp-peer-timeout) every rank exits 1 naming the lost rank.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "kernels/base/fs.h"
#include "kernels/device_memory.h"
#include "orchestrator/node/mem_floor.h"
#include "runtime/chat/chat_template.h"
#include "runtime/dist/process_group.h"
#include "runtime/model/model.h"
#include "runtime/serve/engine.h"
#include "runtime/serve/http_server.h"
#include "runtime/serve/memory_planner.h"
#include "runtime/serve/parser_select.h"
#include "runtime/serve/stats_logger.h"
#include "runtime/serve/tp_step.h"
#include "runtime/serve/warmup.h"
#include "runtime/tokenizer/tokenizer.h"

namespace spk::cli {
namespace {

struct ServeFlags {
  std::string model;
  std::string served_model_name;  // default: the model directory's name
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key_env = "SPARKCTL_API_KEY";
  std::string backend = "cpu";
  std::string tp_comm = "auto";  // auto: gloo on cpu; nccl on cuda (gloo-host when NCCL is not built)
  int tensor_parallel_size = 1;
  int rank = 0;
  std::string master;
  double tp_join_timeout_s = 120;  // rendezvous: how long ranks wait for each other
  double tp_peer_timeout_s = 5;    // a rank silent this long is lost
  double gpu_memory_utilization = 0.9;
  double device_memory_gib = 0;  // required on cpu: the RAM budget the planner treats as device memory
  int max_model_len = 0;         // 0 = the model's max_position_embeddings
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;  // = the recipe default (recipes/recipe.h)
  int block_size = 16;
  std::string kv_cache_dtype = "auto";
  bool enable_prefix_caching = true;  // as vLLM: on unless --no-enable-prefix-caching
  bool dry_run_memory = false;
  bool refuse_nonfinite = false;
  size_t max_body_mib = 4;
  int max_n = 16;
  uint64_t seed = 0;
  double http_head_timeout_s = 5;               // a request head must arrive within this
  double http_body_timeout_s = 10;              // a request body within this after its head
  size_t http_max_connections = 4096;           // connections waiting for a request (oldest closed past it)
  size_t http_max_connections_per_peer = 1024;  // of them from one client IP (its own oldest closed past it)
  size_t http_max_queued = 1024;                // whole requests waiting for a handler thread (503 past it)
  size_t max_stored_response_mib = 256;         // /v1/responses store: serialised bytes kept (LRU past it)
  double mem_floor_gib = 0;               // stop when the node's MemAvailable stays below this (0 = off)
  std::string meminfo_path;               // empty: $SPARKCTL_MEMINFO_PATH (tests), else /proc/meminfo
  std::string tool_call_parser = "auto";  // auto: by model_type / chat template; none: off
  std::string reasoning_parser = "auto";
  std::string default_chat_template_kwargs;  // JSON object; a request's own kwargs win key by key
  std::vector<std::string> scripted_output;  // test instrument: files of text the engine emits, in turn
  bool enable_test_instruments = false;
};

// The exit code of a rank that stopped itself at the node's memory floor (it also leaves an exit note).
constexpr int kExitMemFloor = 3;

constexpr uint64_t kMiB = 1ull << 20;

int fail(int code, const std::string& what) {
  print_error("runtime serve", what);
  return code;
}

// Ends the process at once (a lost rank: the group is dead; destructors could block on peers).
[[noreturn]] void die_with(int code, const std::string& what) {
  print_error("runtime serve", what);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}
[[noreturn]] void die(const std::string& what) { die_with(kExitFailed, what); }

// A failed step usually means a lost rank: the group's loss detection (which names the rank and exits)
// gets the peer timeout to fire first; otherwise this error ends the process.
[[noreturn]] void die_after_grace(double peer_timeout_s, const std::string& what) {
  std::this_thread::sleep_for(std::chrono::duration<double>(peer_timeout_s + 0.5));
  die(what);
}

Result<std::unique_ptr<rt::dist::ProcessGroup>> join(const ServeFlags& f) {
  const char* token = std::getenv("SPARKCTL_RDZV_TOKEN");
  rt::dist::GroupOptions o;
  o.rank = f.rank;
  o.world = f.tensor_parallel_size;
  o.master = f.master;
  o.token = token ? token : "";
  o.comm = f.tp_comm != "auto"      ? f.tp_comm
           : f.backend != "cuda"    ? "gloo"
           : rt::dist::nccl_built() ? "nccl"
                                    : "gloo-host";
  o.cuda_device = 0;  // the orchestrator gives each rank its GPU through CUDA_VISIBLE_DEVICES
  o.join_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.tp_join_timeout_s * 1000));
  o.peer_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.tp_peer_timeout_s * 1000));
  const int rank = f.rank;
  o.on_lost = [rank](int lost, const std::string& why) {
    die("rank " + std::to_string(rank) + ": tensor-parallel rank " + std::to_string(lost) + " lost: " + why +
        "; the group is dead, every rank exits (restart all ranks)");
  };
  spdlog::info("rank {} of {}: joining the group at {}", f.rank, f.tensor_parallel_size, f.master);
  return rt::dist::join_group(o);
}

int run_serve(const ServeFlags& f, const Context& ctx) {
  const bool tp = f.tensor_parallel_size > 1;
  if (f.rank >= f.tensor_parallel_size)
    return fail(kExitUsage, "--rank " + std::to_string(f.rank) + " is outside --tensor-parallel-size " +
                                std::to_string(f.tensor_parallel_size) + " (ranks are 0..size-1)");
  if (tp && f.tp_comm == "nccl" && !rt::dist::nccl_built())
    return fail(kExitUsage, "--tp-comm nccl: the NCCL communicator is not built (use --tp-comm gloo-host)");
  if (f.tp_comm == "gloo-host" && f.backend != "cuda")
    return fail(kExitUsage, "--tp-comm gloo-host stages CUDA buffers through host memory; with --backend " +
                                f.backend + " use --tp-comm gloo");
  if (f.tp_comm == "nccl" && f.backend != "cuda")
    return fail(kExitUsage, "--tp-comm nccl needs --backend cuda (use --tp-comm gloo)");
  if (f.tp_comm == "gloo" && f.backend == "cuda")
    return fail(kExitUsage, "--tp-comm gloo takes host buffers; --backend cuda needs nccl or gloo-host");
  if (tp && !f.dry_run_memory && f.master.empty())
    return fail(kExitUsage, "--tensor-parallel-size " + std::to_string(f.tensor_parallel_size) +
                                " needs --master HOST:PORT (rank 0's rendezvous address; rank 0 binds it)");
  if (tp && !f.dry_run_memory && !std::getenv("SPARKCTL_RDZV_TOKEN"))
    return fail(kExitUsage, "$SPARKCTL_RDZV_TOKEN is empty (export the same rendezvous token on every rank)");
  if (!f.scripted_output.empty() && !f.enable_test_instruments)
    return fail(kExitUsage, "--scripted-output " + f.scripted_output.front() +
                                " is a test instrument (answers would not come from the model); add "
                                "--enable-test-instruments to use it");
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (!f.default_chat_template_kwargs.empty()) {
    kwargs =
        nlohmann::ordered_json::parse(f.default_chat_template_kwargs, nullptr, /*allow_exceptions=*/false);
    if (!kwargs.is_object())
      return fail(kExitUsage, "--default-chat-template-kwargs '" +
                                  f.default_chat_template_kwargs.substr(0, 200) +
                                  "' is not a JSON object (write e.g. '{\"enable_thinking\": false}')");
  }
  if (f.kv_cache_dtype != "auto")
    return fail(kExitUsage, "--kv-cache-dtype " + f.kv_cache_dtype +
                                " is not built yet (the KV cache uses the backend's dtype; pass auto)");
  // Device memory: --device-memory-gib when given (required on cpu: the RAM budget), else the GPU's total.
  uint64_t device_bytes = static_cast<uint64_t>(f.device_memory_gib * 1024.0 * 1024.0 * 1024.0);
  if (f.device_memory_gib <= 0) {
    auto queried = device_memory_bytes(f.backend);
    if (!queried.ok()) return fail(kExitUsage, queried.error().what());
    device_bytes = *queried;
  }
  const char* key = std::getenv(f.api_key_env.c_str());
  if (!f.dry_run_memory && f.rank == 0 && (!key || !*key))
    return fail(kExitUsage,
                "$" + f.api_key_env + " is empty (export it, or name another variable with --api-key-env)");

  // The node's memory floor is watched from here on, weight loading included (orchestrator/node/mem_floor.h).
  std::unique_ptr<MemFloorWatch> floor_watch;
  if (!f.dry_run_memory && f.mem_floor_gib > 0) {
    MemFloorOptions mo;
    mo.floor_bytes = static_cast<uint64_t>(f.mem_floor_gib * 1024.0 * 1024.0 * 1024.0);
    const char* env_path = std::getenv("SPARKCTL_MEMINFO_PATH");
    mo.meminfo_path = !f.meminfo_path.empty() ? f.meminfo_path
                      : env_path && *env_path ? env_path
                                              : "/proc/meminfo";
    const int rank = f.rank;
    floor_watch = std::make_unique<MemFloorWatch>(mo, [rank](const std::string& why) {
      (void)write_exit_note(kMemFloorReason, why);
      die_with(kExitMemFloor, "rank " + std::to_string(rank) + ": " + why);
    });
    spdlog::info("memory floor: the engine stops when MemAvailable stays below {:.2f} GiB", f.mem_floor_gib);
  }

  // SIGINT/SIGTERM go to one waiting thread (blocked here before the model, engine or HTTP start threads, so
  // all inherit it).
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // Gloo writes without MSG_NOSIGNAL: a lost peer must give an error

  // TP: join before loading (workers may start first and wait); --dry-run-memory sizes this rank's
  // shard without a group.
  std::unique_ptr<rt::dist::ProcessGroup> group;
  std::unique_ptr<rt::dist::Communicator> offline;
  rt::LoadOptions lo{f.backend, f.rank, f.tensor_parallel_size};
  lo.refuse_nonfinite = f.refuse_nonfinite;
  if (tp && f.dry_run_memory) {
    offline = rt::dist::make_offline_communicator(f.rank, f.tensor_parallel_size);
    lo.comm = offline.get();
  } else if (tp) {
    auto g = join(f);
    if (!g.ok()) return fail(kExitFailed, g.error().what());
    group = std::move(*g);
    lo.comm = &group->comm();
  }
  auto model = rt::Model::load(f.model, lo);
  if (!model.ok()) {
    if (group) die(model.error().what());
    return fail(kExitFailed, model.error().what());
  }
  rt::Model& m = **model;
  const auto& mc = m.config();
  const int max_len = f.max_model_len > 0 ? f.max_model_len : mc.max_position_embeddings;
  if (max_len <= 0 || (mc.max_position_embeddings > 0 && max_len > mc.max_position_embeddings))
    return fail(kExitUsage, "--max-model-len " + std::to_string(max_len) + " exceeds the model's " +
                                std::to_string(mc.max_position_embeddings) +
                                " max_position_embeddings (lower --max-model-len)");

  rt::MemoryPlanInput in;
  in.device_bytes = device_bytes;
  in.gpu_memory_utilization = f.gpu_memory_utilization;
  in.weight_bytes = m.weight_bytes();
  const rt::StepLimits limits{f.max_num_batched_tokens, f.max_num_seqs, max_len, f.block_size};
  in.activation_bytes = m.activation_bytes(limits);
  // Every buffer a step within the limits needs is allocated now, before the KV pool takes the rest
  // (then sealed: a step never allocates late, which on unified memory could wedge the host).
  uint64_t reserved = 0;
  if (!f.dry_run_memory) {
    const uint64_t before = m.memory_counters().live_bytes;
    if (Status st = m.reserve_steps(limits); !st.ok()) {
      if (group) die(st.error().what());
      return fail(kExitFailed, st.error().what());
    }
    reserved = m.memory_counters().live_bytes - before;
  }
  in.graph_bytes = 0;  // no CUDA graphs in this build
  // Logits of a full batch (fp32) + 64 MiB of runtime slack (threads, HTTP buffers, allocator).
  in.other_bytes =
      static_cast<uint64_t>(f.max_num_seqs) * static_cast<uint64_t>(mc.vocab_size) * 4 + 64 * kMiB;
  in.kv_bytes_per_token = m.kv_bytes_per_token();
  in.block_size = f.block_size;
  in.max_model_len = max_len;
  auto plan = rt::plan_memory(in);
  if (f.dry_run_memory) {
    nlohmann::json j = plan.ok() ? plan->to_json() : nlohmann::json{{"error", plan.error().what()}};
    std::cout << json_text(j) << "\n";
    return plan.ok() ? kExitOk : kExitFailed;
  }
  if (!plan.ok()) {
    if (group) die(plan.error().what());
    return fail(kExitFailed, plan.error().what());
  }
  if (!f.dry_run_memory)
    spdlog::info(
        "Memory profile: model weights {} GiB, activations {} GiB planned ({} GiB reserved before the KV "
        "pool)",
        rt::format_gib(static_cast<double>(in.weight_bytes)),
        rt::format_gib(static_cast<double>(in.activation_bytes)),
        rt::format_gib(static_cast<double>(reserved)));
  for (const auto& line : plan->log_lines()) spdlog::info("{}", line);
  if (group && f.rank != 0) {            // a worker: no HTTP, follow rank 0 until it ends the group
    std::thread([sigs, rank = f.rank] {  // asked to stop: leave at once (rank 0 then reports the loss)
      int sig = 0;
      sigwait(&sigs, &sig);
      spdlog::warn("rank {}: signal {}: leaving the group (rank 0 and the other ranks exit too)", rank, sig);
      std::fflush(stdout);
      std::_Exit(kExitOk);
    })
        .detach();
    std::printf("rank %d: following rank 0 at %s\n", f.rank, f.master.c_str());
    std::fflush(stdout);
    Status st = rt::follow_leader(m, *group, plan->num_blocks);
    if (!st.ok()) die_after_grace(f.tp_peer_timeout_s, st.error().what());
    group->close();
    return kExitOk;
  }

  auto tok = rt::Tokenizer::load(f.model);
  if (!tok.ok()) return fail(kExitFailed, tok.error().what());
  auto chat = rt::load_chat_config(f.model);
  if (!chat.ok()) return fail(kExitFailed, chat.error().what());
  const std::string model_type = rt::read_model_type(f.model);
  auto parsing =
      rt::select_parsers(f.tool_call_parser, f.reasoning_parser, model_type, chat->template_source);
  if (!parsing.ok()) return fail(kExitUsage, parsing.error().what());
  spdlog::info("output parsers (model_type {}): tool calls {}, reasoning {}",
               model_type.empty() ? "?" : model_type,
               parsing->tool_call_parser.empty() ? "none" : parsing->tool_call_parser,
               parsing->reasoning_parser.empty() ? "none" : parsing->reasoning_parser);
  std::vector<std::vector<int32_t>> scripted;
  for (const auto& file : f.scripted_output) {
    auto text = read_file(file);
    if (!text.ok()) return fail(kExitUsage, "--scripted-output: " + text.error().what());
    scripted.push_back((*tok)->encode(*text, /*add_special_tokens=*/false));
    if (scripted.back().empty())
      return fail(kExitUsage, "--scripted-output " + file + " is empty (write the text to emit)");
    spdlog::warn(
        "TEST INSTRUMENT: --scripted-output {}: scripted sequence {}{} emits these {} tokens instead of "
        "sampling, then eos; the answers do not come from the model",
        file, scripted.size(), scripted.size() == f.scripted_output.size() ? " and every later one" : "",
        scripted.back().size());
  }
  // Rank 0 of a group drives the workers through the leader (every allocate/forward broadcast first).
  std::unique_ptr<rt::LeaderModel> leader;
  if (group)
    leader = std::make_unique<rt::LeaderModel>(m, *group, [grace = f.tp_peer_timeout_s](const Error& e) {
      die_after_grace(
          grace, "rank 0: " + e.what() + "; the group is out of step, every rank exits (restart all ranks)");
    });
  rt::Model& em = leader ? static_cast<rt::Model&>(*leader) : m;
  if (Status st = em.allocate_kv(plan->num_blocks, f.block_size); !st.ok()) {
    if (group) die(st.error().what());
    return fail(kExitFailed, st.error().what());
  }
  em.seal_memory();

  rt::Metrics metrics;
  rt::EngineConfig ec;
  ec.sched = {f.max_num_seqs, f.max_num_batched_tokens};
  ec.max_model_len = max_len;
  ec.eos_ids = mc.eos_token_ids;
  ec.base_seed = f.seed;
  ec.scripted_outputs = std::move(scripted);
  ec.enable_prefix_caching = f.enable_prefix_caching;
  spdlog::info("prefix caching: {}", f.enable_prefix_caching ? "enabled" : "disabled");
  rt::Engine engine(em, ec, &metrics);
  metrics.set_gauge_source([&engine] { return engine.gauges(); });

  rt::HttpConfig hc;
  hc.host = f.host;
  hc.port = f.port;
  hc.served_model_name =
      f.served_model_name.empty() ? std::filesystem::path(f.model).filename().string() : f.served_model_name;
  if (hc.served_model_name.empty()) hc.served_model_name = "model";
  hc.api_key = key;
  hc.max_body_bytes = f.max_body_mib * kMiB;
  hc.max_n = f.max_n;
  hc.threads = std::min(1024, 2 * f.max_num_seqs + 16);
  hc.head_timeout_ms = static_cast<int>(f.http_head_timeout_s * 1000);
  hc.body_timeout_ms = static_cast<int>(f.http_body_timeout_s * 1000);
  hc.max_connections = f.http_max_connections;
  hc.max_queued = f.http_max_queued;
  hc.max_connections_per_peer = f.http_max_connections_per_peer;
  hc.max_stored_response_bytes = f.max_stored_response_mib * kMiB;
  hc.parsing = *parsing;
  hc.default_chat_template_kwargs = kwargs;
  rt::HttpServer server(hc, engine, *tok, *chat, metrics);

  if (Status st = server.bind(); !st.ok()) return fail(kExitFailed, st.error().what());
  if (f.host != "127.0.0.1" && f.host != "localhost" && f.host != "::1")
    spdlog::warn("listening on {} (not loopback): anyone who can reach it and knows the API key can use it",
                 f.host);
  engine.start();

  // Readiness means real tokens through the whole engine; on cuda at every decode batch size, so each
  // CUDA graph bucket exists before the first request (runtime/serve/warmup.h). The CPU backend keeps no
  // per-shape state, so one sequence is enough there.
  const int warm_seqs = f.backend == "cuda" ? f.max_num_seqs : 1;
  auto warm = rt::warm_decode_buckets(engine, warm_seqs, mc.bos_token_id >= 0 ? mc.bos_token_id : 0);
  if (!warm.ok()) return fail(kExitFailed, "warmup: " + warm.error().what());
  spdlog::info("warmup: decoded at every batch size 1..{} in {:.2f} s", warm->sequences, warm->seconds);

  std::thread sig_thread([&server, sigs] {
    int sig = 0;
    sigwait(&sigs, &sig);
    spdlog::info("signal {}: shutting down", sig);
    server.stop();
  });
  std::printf("ready: serving %s on http://%s:%d\n", hc.served_model_name.c_str(), f.host.c_str(),
              server.port());
  std::fflush(stdout);
  spdlog::info("state dir {}", ctx.global.state_dir);
  rt::StatsLogger stats(metrics, hc.served_model_name);  // periodic vLLM-style line + access lines
  server.run();
  engine.stop();
  if (group) group->close();  // the workers leave with success
  if (sig_thread.joinable()) {
    pthread_kill(sig_thread.native_handle(), SIGTERM);  // wake sigwait if stop came from elsewhere
    sig_thread.join();
  }
  return kExitOk;
}

}  // namespace

void setup_runtime(CLI::App& app, Context& ctx) {
  auto* rt = app.add_subcommand("runtime", "the tensor-parallel runtime daemon (serve)");
  rt->require_subcommand(1);
  auto f = std::make_shared<ServeFlags>();
  auto* s =
      rt->add_subcommand("serve", "serve a model over the OpenAI HTTP API (continuous batching, paged KV)");
  s->add_option("--model", f->model, "Hugging Face checkpoint directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  s->add_option("--served-model-name", f->served_model_name,
                "name clients pass as `model` (default: dir name)");
  s->add_option("--host", f->host, "bind address (anything but loopback logs a warning)");
  s->add_option("--port", f->port, "HTTP port (0 = any free port)")->check(CLI::Range(0, 65535));
  s->add_option("--api-key-env", f->api_key_env, "environment variable holding the API key (required)");
  s->add_option("--backend", f->backend, "compute backend")->check(CLI::IsMember({"cpu", "cuda"}));
  s->add_option("--tensor-parallel-size", f->tensor_parallel_size,
                "TP world size (> 1: cpu backend over Gloo; token from $SPARKCTL_RDZV_TOKEN)")
      ->check(CLI::PositiveNumber);
  s->add_option("--tp-comm", f->tp_comm,
                "TP collectives: auto (cpu: gloo; cuda: nccl, or gloo-host without NCCL), nccl, gloo, or "
                "gloo-host (CUDA ranks over Gloo through pinned host copies: several ranks on one GPU)")
      ->check(CLI::IsMember({"auto", "nccl", "gloo", "gloo-host"}));
  s->add_option("--rank", f->rank, "this process's TP rank (0 serves HTTP and schedules)")
      ->check(CLI::NonNegativeNumber);
  s->add_option("--master", f->master, "HOST:PORT of the rank-0 rendezvous (TP > 1; rank 0 binds it)");
  s->add_option("--tp-join-timeout", f->tp_join_timeout_s,
                "seconds ranks wait for each other at the rendezvous")
      ->check(CLI::PositiveNumber);
  s->add_option("--tp-peer-timeout", f->tp_peer_timeout_s,
                "seconds without a heartbeat after which a rank is lost (every rank then exits 1)")
      ->check(CLI::PositiveNumber);
  s->add_option("--gpu-memory-utilization", f->gpu_memory_utilization, "fraction of device memory to use")
      ->check(CLI::Range(0.0, 1.0));
  s->add_option("--device-memory-gib", f->device_memory_gib,
                "device memory in GiB (required on cpu: the RAM budget; on cuda: default the GPU's total)")
      ->envname("SPARKCTL_DEVICE_MEMORY_GIB");
  s->add_option("--max-model-len", f->max_model_len, "longest request, prompt + completion (0 = model's)")
      ->check(CLI::NonNegativeNumber);
  s->add_option("--max-num-seqs", f->max_num_seqs, "sequences per step")->check(CLI::PositiveNumber);
  s->add_option("--max-num-batched-tokens", f->max_num_batched_tokens,
                "tokens per step (prefill chunk budget)")
      ->check(CLI::PositiveNumber);
  s->add_option("--block-size", f->block_size, "tokens per KV block")->check(CLI::Range(1, 1024));
  s->add_option("--kv-cache-dtype", f->kv_cache_dtype, "KV cache dtype (only auto is built)");
  s->add_flag(
      "--enable-prefix-caching,!--no-enable-prefix-caching", f->enable_prefix_caching,
      "reuse the KV of cached full blocks of a prompt's prefix instead of recomputing it (default on)");
  s->add_flag("--dry-run-memory", f->dry_run_memory, "print the memory plan as JSON and exit");
  s->add_flag("--refuse-nonfinite", f->refuse_nonfinite,
              "refuse a checkpoint holding NaN/Inf weights (default: load it with a warning)")
      ->envname("SPARKCTL_REFUSE_NONFINITE");
  s->add_option("--max-body-mib", f->max_body_mib, "largest request body (413 above)")
      ->check(CLI::PositiveNumber);
  s->add_option("--max-n", f->max_n, "cap on a request's `n`")->check(CLI::PositiveNumber);
  s->add_option("--seed", f->seed, "base seed of requests that bring none");
  s->add_option("--http-head-timeout", f->http_head_timeout_s,
                "seconds a connection has to send a whole request head (408 after; idle ones are closed)")
      ->check(CLI::Range(0.05, 3600.0));
  s->add_option("--http-body-timeout", f->http_body_timeout_s,
                "seconds a request body has to arrive after its head (408 after)")
      ->check(CLI::Range(0.05, 3600.0));
  s->add_option("--http-max-connections", f->http_max_connections,
                "connections waiting for a request; past it the longest-waiting one is closed")
      ->check(CLI::Range(16, 1000000));
  s->add_option("--http-max-connections-per-peer", f->http_max_connections_per_peer,
                "connections waiting for a request from one client IP; past it that client's own "
                "longest-idle one is closed (a proxy in front: raise it to --http-max-connections)")
      ->check(CLI::Range(1, 1000000));
  s->add_option("--http-max-queued", f->http_max_queued,
                "whole requests waiting for a handler thread; past it 503 with Retry-After")
      ->check(CLI::Range(1, 1000000));
  s->add_option("--max-stored-response-mib", f->max_stored_response_mib,
                "MiB of /v1/responses kept for previous_response_id and GET (serialised, tools echoed "
                "included); the least recently used go first, a larger one alone is not kept")
      ->check(CLI::Range(1, 1 << 20));
  s->add_option("--mem-floor-gib", f->mem_floor_gib,
                "stop the engine (exit 3, with an exit note) when the node's MemAvailable stays below this "
                "many GiB, before a unified-memory host wedges (0 = off)")
      ->check(CLI::Range(0.0, 4096.0));
  s->add_option("--meminfo-path", f->meminfo_path, "where MemAvailable is read (tests point it at a file)")
      ->group("");
  s->add_option("--tool-call-parser", f->tool_call_parser,
                "tool-call parser: hermes, qwen3_coder, minimax_m2, deepseek_v3, deepseek_v31, auto (by "
                "model_type and chat template) or none");
  s->add_option(
      "--reasoning-parser", f->reasoning_parser,
      "reasoning parser (<think>...</think> -> reasoning_content): qwen3, deepseek_r1, minimax, auto "
      "or none");
  s->add_option("--default-chat-template-kwargs", f->default_chat_template_kwargs,
                "JSON object passed to the chat template under each request's chat_template_kwargs "
                "(e.g. '{\"enable_thinking\": false}')");
  s->add_option("--scripted-output", f->scripted_output,
                "TEST INSTRUMENT: sequences emit this file's text (tokenized) instead of sampling, then eos; "
                "repeat the flag for a script of several outputs: the i-th sequence (in order of submission) "
                "emits the i-th file, the last file repeats; needs --enable-test-instruments")
      ->check(CLI::ExistingFile);
  s->add_flag("--enable-test-instruments", f->enable_test_instruments,
              "allow test instruments (--scripted-output); never on a serving deployment");
  s->callback([f, &ctx] { ctx.exit_code = run_serve(*f, ctx); });
}

}  // namespace spk::cli
