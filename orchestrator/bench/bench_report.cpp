#include "orchestrator/bench/bench_report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "kernels/base/fs.h"
#include "orchestrator/bench/png_plot.h"

namespace spk::bench {

using nlohmann::json;

namespace {

json sample_json(const SampleStats& s) {
  return {{"ttft_s", s.ttft_s},
          {"decode_tok_s", s.decode_tok_s},
          {"completion_tokens", s.completion_tokens},
          {"prompt_tokens", s.prompt_tokens}};
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

json pct_json(const Percentiles& p) { return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}}; }

}  // namespace

json to_json(const BenchReport& r, const std::string& lane, const std::string& started_utc) {
  json j{{"schema_version", kBenchSchemaVersion},
         {"lane", lane},
         {"model", r.model},
         {"endpoint", r.endpoint},
         {"started_utc", started_utc},
         {"probe_tokens", r.probe_tokens},
         {"first_request", sample_json(r.first_request)},
         {"steady", sample_json(r.steady)},
         {"first_vs_steady_pct", r.first_vs_steady_pct},
         {"workloads", json::array()},
         {"ladder", json::array()}};
  for (const auto& w : r.workloads) {
    json s = json::array();
    for (const auto& x : w.samples) s.push_back(sample_json(x));
    j["workloads"].push_back({{"name", w.name},
                              {"median_decode_tok_s", w.median_decode_tok_s},
                              {"median_ttft_s", w.median_ttft_s},
                              {"samples", s}});
  }
  for (const auto& l : r.ladder)
    j["ladder"].push_back({{"concurrency", l.concurrency},
                           {"completed", l.completed},
                           {"failed", l.failed},
                           {"first_error", l.first_error},
                           {"aggregate_decode_tok_s", l.aggregate_decode_tok_s},
                           {"mean_stream_decode_tok_s", l.mean_stream_decode_tok_s},
                           {"mean_ttft_s", l.mean_ttft_s},
                           {"wall_s", l.wall_s},
                           {"request_throughput", l.request_throughput},
                           {"ttft_s", pct_json(l.ttft)},
                           {"tpot_s", pct_json(l.tpot)},
                           {"itl_s", pct_json(l.itl)}});
  const auto& n = r.needle;
  j["needle"] = {{"ran", n.ran},       {"prompt_tokens", n.prompt_tokens},
                 {"found", n.found},   {"ttft_s", n.ttft_s},
                 {"needle", n.needle}, {"answer", n.answer}};
  return j;
}

std::string to_text(const BenchReport& r) {
  std::string t = "model " + r.model + " at " + r.endpoint + ", temperature 0, " +
                  std::to_string(r.probe_tokens) + "-token probes, unique nonce per request\n\n";
  t += "single stream          decode tok/s    TTFT ms\n";
  t += "  first after ready    " + fmt("%12.1f", r.first_request.decode_tok_s) +
       fmt("%11.1f", r.first_request.ttft_s * 1e3) + "\n";
  for (const auto& w : r.workloads)
    t += "  " + w.name + std::string(w.name.size() < 19 ? 19 - w.name.size() : 1, ' ') +
         fmt("%12.1f", w.median_decode_tok_s) + fmt("%11.1f", w.median_ttft_s * 1e3) + "\n";
  t += "  first request after ready: " + fmt("%.1f", std::abs(r.first_vs_steady_pct)) + "% " +
       (r.first_vs_steady_pct >= 0 ? "slower" : "faster") +
       " than steady state (warmup target: < 15% slower)\n\n";
  t += "concurrency  aggregate tok/s  per-stream tok/s  mean TTFT ms  req/s  failed\n";
  for (const auto& l : r.ladder)
    t += fmt("%11.0f", l.concurrency) + fmt("%17.1f", l.aggregate_decode_tok_s) +
         fmt("%18.1f", l.mean_stream_decode_tok_s) + fmt("%14.1f", l.mean_ttft_s * 1e3) +
         fmt("%7.2f", l.request_throughput) + fmt("%8.0f", l.failed) +
         (l.first_error.empty() ? "" : "  (" + l.first_error + ")") + "\n";
  t += "\nconcurrency  TTFT ms p50/p90/p99      TPOT ms p50/p90/p99      ITL ms p50/p90/p99\n";
  auto ms3 = [](const Percentiles& p) {
    return fmt("%7.1f", p.p50 * 1e3) + fmt("%8.1f", p.p90 * 1e3) + fmt("%8.1f", p.p99 * 1e3) + "  ";
  };
  for (const auto& l : r.ladder)
    t += fmt("%11.0f", l.concurrency) + "  " + ms3(l.ttft) + ms3(l.tpot) + ms3(l.itl) + "\n";
  if (r.needle.ran)
    t += "\nneedle in " + std::to_string(r.needle.prompt_tokens) +
         " prompt tokens: " + (r.needle.found ? "found" : "not found") + ", TTFT " +
         fmt("%.1f", r.needle.ttft_s * 1e3) + " ms\n";
  else if (!r.needle.answer.empty())
    t += "\nneedle: not run (" + r.needle.answer + ")\n";
  return t;
}

Result<BenchFiles> write_bench_files(const std::string& dir, const std::string& lane,
                                     const std::string& stamp, const json& doc, const BenchReport& r,
                                     const std::string& title) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error("cannot create " + dir + ": " + ec.message(), "pass --out DIR or fix --state-dir");
  BenchFiles f{dir + "/" + lane + "-" + stamp + ".json", dir + "/" + lane + "-" + stamp + ".png"};
  SPK_TRY(write_file_atomic(f.json_path, doc.dump(2) + "\n"));
  PlotSeries agg{{}, {}, 0x1f77b4, "aggregate"}, per{{}, {}, 0xff7f0e, "per stream"};
  PlotSeries t50{{}, {}, 0x2ca02c, "TTFT p50"}, t99{{}, {}, 0xd62728, "TTFT p99"};
  for (const auto& l : r.ladder) {
    agg.x.push_back(l.concurrency);
    agg.y.push_back(l.aggregate_decode_tok_s);
    per.x.push_back(l.concurrency);
    per.y.push_back(l.mean_stream_decode_tok_s);
    t50.x.push_back(l.concurrency);
    t50.y.push_back(l.ttft.p50 * 1e3);
    t99.x.push_back(l.concurrency);
    t99.y.push_back(l.ttft.p99 * 1e3);
  }
  // Two panels on a log2 concurrency axis: decode tok/s, then TTFT; titled so a PNG alone says what it is.
  Raster top = plot_lines({agg, per}, {"concurrency", "decode tok/s", title, true}, 640, 360);
  Raster bottom = plot_lines({t50, t99}, {"concurrency", "TTFT ms", "", true}, 640, 280);
  SPK_TRY(write_file_atomic(f.png_path, encode_png(stack(top, bottom), /*compress=*/true)));
  return f;
}

std::string bench_title(const std::string& lane, const std::string& model, const std::string& backend,
                        const std::string& stamp) {
  std::string date = stamp;
  if (stamp.size() >= 13)  // 20261203T181500Z
    date = stamp.substr(0, 4) + "-" + stamp.substr(4, 2) + "-" + stamp.substr(6, 2) + " " +
           stamp.substr(9, 2) + ":" + stamp.substr(11, 2) + " UTC";
  return lane + "  " + model + "  " + backend + "  " + date;
}

}  // namespace spk::bench
