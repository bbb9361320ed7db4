// `sparkctl bench LANE`: the measuring method against the lane's warmed deployment (orchestrator/bench).
// The endpoint is the deployment's rank 0 (state dir) unless --endpoint names one; the API key comes
// from the env var the recipe names (api_key_env) or --api-key-env, else the deployment's key file. Prints a
// table; writes JSON and a PNG (tok/s vs concurrency) under <state-dir>/bench/ (or --out). Exit 1 when a
// probe fails.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <random>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "kernels/base/fs.h"
#include "orchestrator/bench/bench_report.h"
#include "orchestrator/bench/bench_run.h"
#include "orchestrator/deploy/deploy_state.h"
#include "recipes/recipe_store.h"

namespace spk::cli {
namespace {

struct BenchCliOptions {
  std::string lane;
  std::string endpoint;
  std::string api_key_env;
  std::string out;
  int probe_tokens = 256;
  int input_tokens = 0;
  int repeats = 3;
  int max_concurrency = 0;
  int needle_tokens = -1;
  int timeout_s = 600;
};

int fail(const std::string& what) {
  print_error("bench", what);
  return kExitFailed;
}

struct Deployed {
  std::string endpoint;
  std::string api_key_file;
};

// The deployment's endpoint (and key file) for `lane`, or an error that says how to get one.
Result<Deployed> deployed_endpoint(const std::string& state_dir, const std::string& lane) {
  auto st = read_deploy_state(state_dir);
  if (!st)
    return make_error(lane + " is not up in " + state_dir, "run sparkctl up " + lane + " or pass --endpoint");
  if (st->lane != lane)
    return make_error("the deployment in " + state_dir + " is " + st->lane + ", not " + lane,
                      "sparkctl switch " + lane + ", or pass --endpoint");
  if (st->phase != "ready")
    return make_error(lane + " is " + st->phase + ", not ready",
                      "wait for sparkctl up to finish (sparkctl status)");
  if (st->endpoint.empty())
    return make_error("the deployment state of " + lane + " has no endpoint", "sparkctl restart " + lane);
  return Deployed{st->endpoint, st->api_key_file};
}

std::string utc_stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y%m%dT%H%M%SZ", &tm);
  return b;
}

int run_bench_verb(Context& ctx, const BenchCliOptions& o) {
  auto loaded = load_named_recipe(o.lane, recipe_dirs(ctx.global.state_dir));
  if (!loaded) return fail(loaded.error().what());
  if (!loaded->ok()) return fail(o.lane + " is invalid (sparkctl recipe validate " + o.lane + ")");
  const Recipe& recipe = *loaded->recipe;

  bench::BenchOptions bo;
  std::string url = o.endpoint, key_file;
  if (url.empty()) {
    auto e = deployed_endpoint(ctx.global.state_dir, recipe.name);
    if (!e) return fail(e.error().what());
    url = e->endpoint;
    key_file = e->api_key_file;
  } else if (auto st = read_deploy_state(ctx.global.state_dir); st && !st->api_key_file.empty()) {
    key_file = st->api_key_file;  // --endpoint of this state dir's deployment: its key works there
  }
  if (auto s = bench::parse_endpoint_url(url, bo.ep); !s) return fail(s.error().what());
  // The key: the env var (--api-key-env, else the recipe's), else the deployment's key file.
  const std::string key_env = o.api_key_env.empty() ? recipe.api_key_env : o.api_key_env;
  if (const char* key = std::getenv(key_env.c_str()); key != nullptr && *key != 0) {
    bo.ep.api_key = key;
  } else if (!key_file.empty()) {
    auto k = read_file(key_file);
    if (!k) return fail(k.error().what());
    bo.ep.api_key = *k;
    while (!bo.ep.api_key.empty() && std::isspace(static_cast<unsigned char>(bo.ep.api_key.back())))
      bo.ep.api_key.pop_back();
  } else {
    return fail(key_env + " is not set (export the deployment's API key in " + key_env +
                " or pass --api-key-env VAR)");
  }
  bo.ep.timeout = std::chrono::seconds(o.timeout_s);
  auto model = bench::served_model(bo.ep);
  if (!model) return fail(model.error().what());
  bo.ep.model = model->id;
  const int max_len =
      model->max_model_len > 0 ? model->max_model_len : static_cast<int>(recipe.max_model_len);
  if (o.probe_tokens + std::max(64, o.input_tokens + 32) > max_len)
    return fail("--probe-tokens " + std::to_string(o.probe_tokens) + " output + --input-len " +
                std::to_string(o.input_tokens) + " input leaves no room in max_model_len " +
                std::to_string(max_len) + " (lower --output-len or --input-len)");
  bo.probe_tokens = o.probe_tokens;
  bo.input_tokens = o.input_tokens;
  bo.repeats = o.repeats;
  bo.ladder = bench::doubling_ladder(o.max_concurrency > 0 ? o.max_concurrency : recipe.max_num_seqs);
  bo.needle_tokens = o.needle_tokens >= 0 ? o.needle_tokens : std::min(4096, max_len / 2);
  std::random_device rd;
  bo.run_id = utc_stamp() + "-" + std::to_string(rd() % 100000);
  bo.progress = [](const std::string& s) { std::cerr << "bench: " << s << "\n"; };

  const std::string started = utc_stamp();
  auto rep = bench::run_bench(bo);
  if (!rep) return fail(rep.error().what());
  const auto doc = bench::to_json(*rep, recipe.name, started);
  auto files = bench::write_bench_files(
      o.out.empty() ? ctx.global.state_dir + "/bench" : o.out, recipe.name, started, doc, *rep,
      bench::bench_title(recipe.name, rep->model, backend_name(recipe.backend), started));
  if (!files) return fail(files.error().what());
  if (ctx.global.json) {
    std::cout << json_text(doc) << "\n";
  } else {
    std::cout << bench::to_text(*rep) << "\nwrote " << files->json_path << "\n      " << files->png_path
              << "\n";
  }
  for (const auto& l : rep->ladder)
    if (l.failed > 0) return kExitFailed;
  return kExitOk;
}

}  // namespace

void setup_bench(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<BenchCliOptions>();
  auto* b =
      app.add_subcommand("bench", "benchmark a warmed lane: single stream, workloads, concurrency ladder");
  b->add_option("LANE", o->lane, "lane name or recipe .yaml path")->required();
  b->add_option("--endpoint", o->endpoint, "http://HOST:PORT[/v1] (default: the deployment's rank 0)");
  b->add_option("--api-key-env", o->api_key_env,
                "env var holding the API key (default: the recipe's api_key_env)");
  b->add_option("--probe-tokens,--output-len", o->probe_tokens, "tokens each probe decodes (output length)")
      ->check(CLI::Range(2, 1 << 20));
  b->add_option(
       "--input-len", o->input_tokens,
       "approximate prompt tokens of the concurrency ladder's requests (default: a short chat prompt)")
      ->check(CLI::Range(0, 1 << 22));
  b->add_option("--repeats", o->repeats, "steady-state single-stream samples")->check(CLI::Range(1, 100));
  b->add_option("--max-concurrency", o->max_concurrency,
                "top of the ladder 1,2,4,... (default: max_num_seqs)")
      ->check(CLI::Range(1, 4096));
  b->add_option("--needle-tokens", o->needle_tokens,
                "prompt tokens of the needle check (0 = skip; default min(4096, max_model_len/2))")
      ->check(CLI::Range(0, 1 << 22));
  b->add_option("--timeout", o->timeout_s, "seconds one request may take")->check(CLI::PositiveNumber);
  b->add_option("--out", o->out, "where the JSON and PNG go (default <state-dir>/bench)");
  b->callback([&ctx, o] { ctx.exit_code = run_bench_verb(ctx, *o); });
}

}  // namespace spk::cli
