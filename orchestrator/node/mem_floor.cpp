#include "orchestrator/node/mem_floor.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "orchestrator/node/host_probe.h"

namespace spk {
namespace {

std::string gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return b;
}

int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool MemFloorJudge::observe(uint64_t available_bytes) {
  if (opt.floor_bytes == 0 || available_bytes >= opt.floor_bytes) {
    low_streak = 0;
    return false;
  }
  return ++low_streak == std::max(1, opt.samples);
}

std::string MemFloorJudge::message(uint64_t available_bytes) const {
  return "MemAvailable " + gib(available_bytes) + " is below the memory floor " + gib(opt.floor_bytes) +
         " (" + std::to_string(std::max(1, opt.samples)) +
         " reads in a row): the engine stopped before the host runs out of memory; lower "
         "gpu_memory_utilization or max_model_len in the recipe (or `sparkctl gmu bisect`), free memory on "
         "the node, or lower mem_floor_gib";
}

MemFloorWatch::MemFloorWatch(MemFloorOptions opt, Breach on_breach)
    : judge_(std::move(opt)), on_breach_(std::move(on_breach)) {
  if (judge_.opt.floor_bytes == 0) return;
  thread_ = std::thread([this] { loop(); });
}

MemFloorWatch::~MemFloorWatch() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MemFloorWatch::loop() {
  bool warned = false;
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    l.unlock();
    auto m = read_meminfo(judge_.opt.meminfo_path);
    if (!m) {
      if (!warned)
        spdlog::warn("memory floor: cannot read {}: {}", judge_.opt.meminfo_path, m.error().what());
      warned = true;
    } else if (judge_.observe(m->available_bytes)) {
      on_breach_(judge_.message(m->available_bytes));
      l.lock();
      return;
    }
    l.lock();
    cv_.wait_for(l, judge_.opt.period, [this] { return stop_; });
  }
}

Status write_exit_note(const std::string& reason, const std::string& message) {
  const char* path = std::getenv(kExitNoteEnv);
  if (!path || !*path) return ok_status();
  nlohmann::json j{{"reason", reason}, {"message", message}, {"ts_ms", wall_now_ms()}};
  return write_file_atomic(path, j.dump() + "\n");
}

std::string exit_note_path(const std::string& dir, const std::string& name) {
  return dir + "/" + name + ".exit";
}

}  // namespace spk
