#include "orchestrator/gmu/gmu_store.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"

namespace spk {

std::string gmu_choice_path(const std::string& state_dir, const std::string& lane) {
  return state_dir + "/gmu/" + lane + ".json";
}

Status write_gmu_choice(const std::string& state_dir, const GmuChoice& c) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir + "/gmu", ec);
  if (ec) return make_error("cannot create " + state_dir + "/gmu: " + ec.message(), "check --state-dir");
  nlohmann::json j = {{"lane", c.lane},
                      {"model_revision", c.model_revision},
                      {"nodes", c.nodes},
                      {"gmu", std::round(c.gmu * 1000.0) / 1000.0},
                      {"kv_tokens", c.kv_tokens}};
  return write_file_atomic(gmu_choice_path(state_dir, c.lane), j.dump(2) + "\n");
}

Result<GmuChoice> read_gmu_choice(const std::string& state_dir, const std::string& lane) {
  const std::string p = gmu_choice_path(state_dir, lane);
  SPK_ASSIGN(std::string text, read_file(p));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("gmu"))
    return make_error(p + " is not a GMU choice", "rerun `sparkctl gmu bisect " + lane + " --write`");
  GmuChoice c;
  c.lane = j.value("lane", lane);
  c.model_revision = j.value("model_revision", "");
  c.nodes = j.value("nodes", std::vector<std::string>{});
  c.gmu = j["gmu"].get<double>();
  c.kv_tokens = j.value("kv_tokens", int64_t{0});
  return c;
}

}  // namespace spk
