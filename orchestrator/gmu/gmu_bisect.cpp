#include "orchestrator/gmu/gmu_bisect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace spk {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string g3(double g) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", g);
  return b;
}

}  // namespace

const char* boot_kind_name(BootKind k) {
  switch (k) {
    case BootKind::booted:
      return "booted";
    case BootKind::clean_too_high:
      return "clean_too_high";
    case BootKind::dangerous:
      return "dangerous";
  }
  return "?";
}

bool is_planner_shortfall(const std::string& m) {
  return m.find("KV cache memory budget is negative: short by") != std::string::npos ||
         (m.find("KV cache holds") != std::string::npos &&
          m.find("less than one request of max_model_len") != std::string::npos);
}

double ceil_milli(double g) { return std::ceil(g * 1000.0 - 1e-6) / 1000.0; }

Result<BisectReport> bisect_gmu(GmuProbe& probe, const BisectOptions& opt) {
  if (!(opt.min_gmu > 0 && opt.min_gmu < opt.max_gmu && opt.max_gmu <= 1.0))
    return make_error(
        "--min " + g3(opt.min_gmu) + " / --max " + g3(opt.max_gmu) + " is not a window in (0,1]",
        "pass 0 < --min < --max <= 1");
  BisectReport rep;
  const std::optional<uint64_t> avail = probe.mem_available();
  uint64_t device = 0;
  auto headroom = [&](double g) {
    if (opt.apply_floor && avail) return (static_cast<double>(*avail) - device * g) / kGiB;
    return device * (1.0 - g) / kGiB;
  };
  auto dry = [&](double g) -> Result<DryRun> {
    SPK_ASSIGN(DryRun d, probe.dry_run(g));
    if (d.device_bytes) device = d.device_bytes;
    return d;
  };
  auto add_dry = [&](const DryRun& d) {
    int64_t target = rep.kv_target;
    rep.rows.push_back({d.gmu, "dry-run",
                        !d.ok ? "refused" : (target && d.kv_tokens < target ? "short" : "fits"),
                        d.ok ? d.kv_tokens : -1, headroom(d.gmu), d.ok ? "" : d.error});
  };

  // 1. Analytic line from two dry runs (available = device x G - fixed).
  SPK_ASSIGN(DryRun hi, dry(opt.max_gmu));
  rep.kv_target = opt.kv_target > 0 ? opt.kv_target : hi.max_model_len;
  add_dry(hi);
  if (!hi.ok)
    return make_error("the planner refuses even --max " + g3(opt.max_gmu) + ": " + hi.error,
                      "raise --max, or lower max_model_len / max_num_seqs in the recipe");
  SPK_ASSIGN(DryRun lo, dry(opt.min_gmu));
  add_dry(lo);
  double slope = static_cast<double>(hi.device_bytes);  // bytes per unit G: exact for the planner
  if (lo.ok && hi.available_kv_bytes != lo.available_kv_bytes)
    slope = (hi.available_kv_bytes - lo.available_kv_bytes) / (opt.max_gmu - opt.min_gmu);
  const int64_t blocks = (rep.kv_target + hi.block_size - 1) / hi.block_size;
  const double need =
      static_cast<double>(blocks) * hi.block_size * static_cast<double>(hi.kv_bytes_per_token);
  double g = ceil_milli(opt.max_gmu + (need - hi.available_kv_bytes) / slope);
  g = std::max(g, ceil_milli(opt.min_gmu));
  if (g > opt.max_gmu + 1e-9)
    return make_error("the KV target " + std::to_string(rep.kv_target) + " tokens needs G " + g3(g) +
                          " > --max " + g3(opt.max_gmu) + " (at --max the pool holds " +
                          std::to_string(hi.kv_tokens) + " tokens)",
                      "raise --max, lower --kv-target, or lower max_model_len in the recipe");
  // Check the solved value with the planner itself (the line ignores block rounding at the edges).
  for (int i = 0; i < 8; ++i) {
    // Reuse the dry run at --min when the answer is --min itself.
    DryRun d = lo;
    if (!(lo.ok && std::abs(g - opt.min_gmu) < 1e-9)) {
      SPK_ASSIGN(d, dry(g));
      add_dry(d);
    }
    if (d.ok && d.kv_tokens >= rep.kv_target) break;
    g = ceil_milli(g + 0.001);
    if (g > opt.max_gmu + 1e-9 || i == 7)
      return make_error("no G up to --max " + g3(opt.max_gmu) + " gives " + std::to_string(rep.kv_target) +
                            " KV tokens in the planner's dry run",
                        "raise --max or lower --kv-target");
  }
  rep.analytic_gmu = g;

  // 2. The MemAvailable floor caps every G we would boot.
  double cap = opt.max_gmu;
  if (opt.apply_floor && avail && device) {
    cap = std::min(cap, (static_cast<double>(*avail) - static_cast<double>(opt.mem_floor_bytes)) / device);
    rep.notes.push_back("MemAvailable " + g3(*avail / kGiB) + " GiB, floor " +
                        g3(opt.mem_floor_bytes / kGiB) + " GiB: no G above " +
                        g3(std::floor(cap * 1000) / 1000));
  } else if (opt.apply_floor) {
    rep.notes.push_back("MemAvailable unknown: the floor cannot be checked");
  }
  if (g > cap + 1e-9) {
    rep.rows.push_back({g, "boot", "floor", -1, headroom(g), "would leave less than the MemAvailable floor"});
    return make_error("G " + g3(g) + " meets the KV target but would leave less than the " +
                          g3(opt.mem_floor_bytes / kGiB) + " GiB MemAvailable floor",
                      "free memory on the node, lower --kv-target, or lower --mem-floor-gib");
  }
  if (!opt.confirm) {
    rep.chosen_gmu = g;
    rep.chosen_kv_tokens = rep.rows.back().kv_tokens;
    rep.notes.push_back("analytic only (--no-boot): not confirmed by a real boot");
    return rep;
  }

  // 3. Confirm with real boots, climbing from below.
  bool found = false;
  while (!found) {
    if (rep.boots >= opt.max_boots)
      return make_error(
          "no confirming boot after " + std::to_string(rep.boots) + " boots (last G " + g3(g) + ")",
          "raise --max-boots or look at the boot logs under <state-dir>/gmu/");
    if (g > cap + 1e-9) {
      rep.rows.push_back({g, "boot", "floor", -1, headroom(g), "not booted: above the MemAvailable floor"});
      return make_error("climbing reached G " + g3(g) + " above the MemAvailable floor without a good boot",
                        "free memory on the node or lower --kv-target / --mem-floor-gib");
    }
    BootResult b = probe.boot(g);
    ++rep.boots;
    rep.rows.push_back({g, "boot", boot_kind_name(b.kind), b.kind == BootKind::booted ? b.kv_tokens : -1,
                        headroom(g), b.detail});
    if (b.kind == BootKind::dangerous)
      return make_error("boot at G " + g3(g) + " failed dangerously (" + b.detail + "): stopped climbing",
                        "check the node (dmesg, MemAvailable) before trying a higher G; lower --kv-target");
    if (b.kind == BootKind::booted && b.kv_tokens >= rep.kv_target) {
      rep.chosen_gmu = g;
      rep.chosen_kv_tokens = b.kv_tokens;
      found = true;
      break;
    }
    if (b.kind == BootKind::booted) rep.rows.back().outcome = "booted_short";
    g = ceil_milli(g + opt.step);
    if (g > opt.max_gmu + 1e-9)
      return make_error(
          "no boot up to --max " + g3(opt.max_gmu) + " met the KV target " + std::to_string(rep.kv_target),
          "raise --max or lower --kv-target");
  }
  // One step above: headroom, never a reason to fail.
  const double up = ceil_milli(rep.chosen_gmu + opt.step);
  if (up > std::min(cap, opt.max_gmu) + 1e-9) {
    rep.notes.push_back("no boot at " + g3(up) + ": above --max or the MemAvailable floor");
  } else if (rep.boots >= opt.max_boots) {
    rep.notes.push_back("no boot at " + g3(up) + ": --max-boots reached");
  } else {
    BootResult b = probe.boot(up);
    ++rep.boots;
    rep.rows.push_back({up, "boot", boot_kind_name(b.kind), b.kind == BootKind::booted ? b.kv_tokens : -1,
                        headroom(up), b.detail});
    if (b.kind == BootKind::booted)
      rep.window_max_gmu = up;
    else
      rep.notes.push_back("G " + g3(up) + " does not boot (" + std::string(boot_kind_name(b.kind)) +
                          "): the window is narrow; keep " + g3(rep.chosen_gmu));
  }
  return rep;
}

nlohmann::json BisectReport::to_json() const {
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : rows)
    rs.push_back({{"gmu", std::round(r.gmu * 1000) / 1000},
                  {"source", r.source},
                  {"outcome", r.outcome},
                  {"kv_tokens", r.kv_tokens},
                  {"headroom_gib", r.headroom_gib},
                  {"detail", r.detail}});
  return {{"rows", rs},
          {"kv_target", kv_target},
          {"analytic_gmu", std::round(analytic_gmu * 1000) / 1000},
          {"chosen_gmu", std::round(chosen_gmu * 1000) / 1000},
          {"chosen_kv_tokens", chosen_kv_tokens},
          {"window_max_gmu", std::round(window_max_gmu * 1000) / 1000},
          {"boots", boots},
          {"notes", notes}};
}

std::string BisectReport::to_table() const {
  std::string s = "  GMU    boot?  outcome          KV tokens   headroom GiB\n";
  char line[256];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "  %.3f  %-5s  %-15s  %10s  %12.2f\n", r.gmu,
                  r.source == "boot" ? "yes" : "no", r.outcome.c_str(),
                  r.kv_tokens < 0 ? "-" : std::to_string(r.kv_tokens).c_str(), r.headroom_gib);
    s += line;
  }
  for (const auto& n : notes) s += "  note: " + n + "\n";
  std::snprintf(line, sizeof line,
                "chosen gpu-memory-utilization: %.3f (KV %lld tokens >= target %lld, %d boots)\n", chosen_gmu,
                static_cast<long long>(chosen_kv_tokens), static_cast<long long>(kv_target), boots);
  s += line;
  return s;
}

}  // namespace spk
