// `sparkctl status`: the deployment of the state dir, per node and rank: pid (asked from the node now),
// phase, uptime, restarts, endpoint, KV size; the supervisor; the last events. --json: one document.
// Exit 0 when the deployment is ready and every rank is alive, 1 otherwise (or when there is none).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "orchestrator/deploy/events.h"
#include "orchestrator/deploy/lifecycle.h"
#include "orchestrator/deploy/rank_ops.h"
#include "orchestrator/deploy/readiness.h"
#include "runtime/serve/stats_logger.h"

namespace spk::cli {
namespace {

using nlohmann::json;

std::string dur(double s) {
  char b[32];
  if (s < 120)
    std::snprintf(b, sizeof b, "%.0fs", s);
  else if (s < 7200)
    std::snprintf(b, sizeof b, "%.0fm", s / 60);
  else
    std::snprintf(b, sizeof b, "%.1fh", s / 3600);
  return b;
}

std::string clock_of(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%H:%M:%S", &tm);
  return b;
}

int run_status(Context& ctx) {
  auto state = read_deploy_state(ctx.global.state_dir);
  auto spec = read_deploy_spec(ctx.global.state_dir);
  if (!state || !spec) {
    if (ctx.global.json)
      std::cout << json_text(json{{"deployment", nullptr}, {"state_dir", ctx.global.state_dir}}) << "\n";
    else
      std::cout << "no deployment in " << ctx.global.state_dir << " (sparkctl up LANE)\n";
    return kExitFailed;
  }
  DeployContext dc{ctx.global.state_dir, spec->cluster_file, false, nullptr};
  std::vector<DaemonInfo> ps;
  std::string ps_error;
  if (auto links = link_spec_nodes(dc, *spec, false); !links) {
    ps_error = links.error().what();
  } else if (auto p = ps_all(*links, *spec); !p) {
    ps_error = p.error().what();
  } else {
    ps = *p;
  }
  int sup_pid = 0;
  const bool sup = supervisor_alive(ctx.global.state_dir, &sup_pid);
  bool all_alive = ps_error.empty();
  json ranks = json::array();
  for (const auto& r : state->ranks) {
    const DaemonInfo* d = nullptr;
    for (const auto& x : ps)
      if (x.node == r.node && x.name == "rank-" + std::to_string(r.rank)) d = &x;
    const bool alive = d && d->alive;
    all_alive = all_alive && alive;
    std::string phase = r.phase;
    if (!alive && (phase == "ready" || phase == "launching")) phase = "dead";
    ranks.push_back({{"node", r.node},
                     {"rank", r.rank},
                     {"pid", d ? d->pid : 0},
                     {"alive", alive},
                     {"phase", phase},
                     {"uptime_s", alive ? d->uptime_s : 0.0},
                     {"restarts", r.restarts},
                     {"endpoint", alive ? r.endpoint : ""},
                     {"kv_tokens", alive ? r.kv_tokens : 0}});
    if (!alive && d && !d->exit_reason.empty())  // it stopped itself and said why
      ranks.back()["exit_note"] = {{"reason", d->exit_reason}, {"message", d->exit_message}};
  }
  json events = json::array();
  for (const auto& e : read_events(ctx.global.state_dir, 12))
    events.push_back({{"ts_ms", e.ts_ms}, {"kind", e.kind}, {"message", e.message}});
  const bool ok = state->phase == "ready" && all_alive && !state->ranks.empty();
  // What is served, read from rank 0 now: only while it serves (nothing stale after down).
  json serving = nullptr;
  if (ok) {
    serving = {{"model", spec->served_name}, {"endpoint", state->endpoint}};
    const auto& a0 = spec->ranks.empty() ? std::vector<std::string>{} : spec->ranks[0].argv;
    for (size_t i = 0; i + 1 < a0.size(); ++i)
      if (a0[i] == "--max-model-len") serving["max_model_len"] = std::atoll(a0[i + 1].c_str());
    auto ep = parse_endpoint(state->endpoint);
    auto key = read_api_key(*spec);
    auto text = ep && key ? fetch_metrics(*ep, *key, std::chrono::seconds(3))
                          : Result<std::string>(make_error("no endpoint or API key"));
    if (text) {
      const rt::StatsSnapshot s = rt::parse_stats(*text);
      serving.update({{"requests", s.requests},
                      {"prompt_tokens", s.prompt_tokens},
                      {"generation_tokens", s.generation_tokens},
                      {"running", s.running},
                      {"waiting", s.waiting},
                      {"kv_usage", s.kv_usage}});
    } else {
      serving["metrics_error"] = text.error().what();
    }
  }
  if (ctx.global.json) {
    json j{{"lane", state->lane},
           {"phase", state->phase},
           {"fingerprint", state->fingerprint},
           {"endpoint", state->endpoint},
           {"api_key_file", state->api_key_file},
           {"message", state->message},
           {"supervisor", {{"alive", sup}, {"pid", sup_pid}}},
           {"ranks", ranks},
           {"serving", serving},
           {"events", events},
           {"ok", ok}};
    if (!ps_error.empty()) j["nodes_error"] = ps_error;
    std::cout << json_text(j) << "\n";
    return ok ? kExitOk : kExitFailed;
  }
  std::cout << state->lane << ": " << state->phase << " (fingerprint " << state->fingerprint << ")\n";
  if (!state->message.empty()) std::cout << "  " << state->message << "\n";
  if (ok) {
    std::cout << "  serves '" << serving.value("model", "") << "' at " << state->endpoint;
    if (serving.contains("max_model_len")) std::cout << ", context " << serving["max_model_len"] << " tokens";
    std::cout << ", API key in " << state->api_key_file << "\n";
    if (serving.contains("requests"))
      std::cout << "  requests " << serving["requests"] << ", prompt tokens " << serving["prompt_tokens"]
                << ", generated tokens " << serving["generation_tokens"] << ", running " << serving["running"]
                << ", waiting " << serving["waiting"] << ", KV usage "
                << static_cast<int>(serving["kv_usage"].get<double>() * 1000) / 10.0 << "%\n";
    else if (serving.contains("metrics_error"))
      std::cout << "  metrics: " << serving["metrics_error"].get<std::string>() << "\n";
  } else {
    std::cout << "  not serving\n";
  }
  std::cout << "  supervisor: " << (sup ? "pid " + std::to_string(sup_pid) : std::string("not running"))
            << "\n";
  if (!ps_error.empty()) std::cout << "  nodes: " << ps_error << "\n";
  std::printf("\n%-12s %-5s %-8s %-10s %-8s %-9s %-28s %s\n", "NODE", "RANK", "PID", "PHASE", "UPTIME",
              "RESTARTS", "ENDPOINT", "KV");
  for (const auto& r : ranks) {
    const bool alive = r["alive"].get<bool>();  // a stopped rank has no endpoint and no KV
    std::string kv = alive && r["kv_tokens"].get<int64_t>() > 0
                         ? std::to_string(r["kv_tokens"].get<int64_t>()) + " tokens"
                         : "-";
    std::string ep = alive ? r["endpoint"].get<std::string>() : "";
    std::printf("%-12s %-5d %-8d %-10s %-8s %-9d %-28s %s\n", r["node"].get<std::string>().c_str(),
                r["rank"].get<int>(), r["pid"].get<int>(), r["phase"].get<std::string>().c_str(),
                r["alive"].get<bool>() ? dur(r["uptime_s"].get<double>()).c_str() : "-",
                r["restarts"].get<int>(), ep.empty() ? "-" : ep.c_str(), kv.c_str());
    if (r.contains("exit_note"))
      std::cout << "  rank " << r["rank"].get<int>() << " stopped itself ("
                << r["exit_note"]["reason"].get<std::string>()
                << "): " << r["exit_note"]["message"].get<std::string>() << "\n";
  }
  std::fflush(stdout);
  if (!events.empty()) {
    std::cout << "\nevents (UTC):\n";
    for (const auto& e : events)
      std::cout << "  " << clock_of(e["ts_ms"].get<int64_t>()) << " " << e["kind"].get<std::string>() << ": "
                << e["message"].get<std::string>() << "\n";
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

void setup_status(CLI::App& app, Context& ctx) {
  auto* st =
      app.add_subcommand("status", "per node and rank: pid, phase, uptime, restarts, endpoint, KV size");
  st->callback([&ctx] { ctx.exit_code = run_status(ctx); });
}

}  // namespace spk::cli
