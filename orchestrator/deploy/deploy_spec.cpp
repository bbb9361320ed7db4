#include "orchestrator/deploy/deploy_spec.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"

namespace spk {

using nlohmann::json;

std::string DeploySpec::run_dir(const std::string& node) const {
  for (const auto& [n, d] : run_dirs)
    if (n == node) return d;
  return {};
}

std::vector<std::string> DeploySpec::nodes() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : run_dirs) out.push_back(n);
  return out;
}

std::string deploy_dir(const std::string& state_dir) { return state_dir + "/deploy"; }

Status write_deploy_spec(const std::string& state_dir, const DeploySpec& s) {
  json ranks = json::array(), warm = json::array(), dirs = json::array();
  for (const auto& r : s.ranks) {
    json env = json::array();
    for (const auto& [k, v] : r.env) env.push_back({k, v});
    ranks.push_back({{"rank", r.rank}, {"node", r.node}, {"argv", r.argv}, {"env", env}});
  }
  for (const auto& w : s.warmup)
    warm.push_back({{"prompt_tokens", w.prompt_tokens}, {"max_tokens", w.max_tokens}, {"repeat", w.repeat}});
  for (const auto& [n, d] : s.run_dirs) dirs.push_back({n, d});
  json j{{"lane", s.lane},
         {"fingerprint", s.fingerprint},
         {"cluster_file", s.cluster_file},
         {"endpoint", s.endpoint},
         {"served_name", s.served_name},
         {"api_key_env", s.api_key_env},
         {"api_key_file", s.api_key_file},
         {"shm_dir", s.shm_dir},
         {"ready_timeout_s", s.ready_timeout_s},
         {"run_dirs", dirs},
         {"ranks", ranks},
         {"warmup", warm}};
  std::error_code ec;
  std::filesystem::create_directories(deploy_dir(state_dir), ec);
  if (ec)
    return make_error("cannot create " + deploy_dir(state_dir) + ": " + ec.message(), "check --state-dir");
  return write_file_atomic(deploy_dir(state_dir) + "/spec.json", j.dump(2) + "\n");
}

Result<DeploySpec> read_deploy_spec(const std::string& state_dir) {
  const std::string path = deploy_dir(state_dir) + "/spec.json";
  SPK_ASSIGN(auto text, read_file(path));
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object())
    return make_error(path + ": not valid JSON", "run sparkctl down, then sparkctl up LANE");
  try {
    DeploySpec s;
    s.lane = j.at("lane");
    s.fingerprint = j.at("fingerprint");
    s.cluster_file = j.at("cluster_file");
    s.endpoint = j.at("endpoint");
    s.served_name = j.at("served_name");
    s.api_key_env = j.at("api_key_env");
    s.api_key_file = j.at("api_key_file");
    s.shm_dir = j.value("shm_dir", "/dev/shm");
    s.ready_timeout_s = j.value("ready_timeout_s", 600);
    for (const auto& d : j.at("run_dirs")) s.run_dirs.emplace_back(d.at(0), d.at(1));
    for (const auto& r : j.at("ranks")) {
      RankLaunch rl;
      rl.rank = r.at("rank");
      rl.node = r.at("node");
      rl.argv = r.at("argv").get<std::vector<std::string>>();
      for (const auto& kv : r.at("env")) rl.env.emplace_back(kv.at(0), kv.at(1));
      s.ranks.push_back(std::move(rl));
    }
    for (const auto& w : j.at("warmup"))
      s.warmup.push_back({w.at("prompt_tokens"), w.at("max_tokens"), w.at("repeat")});
    return s;
  } catch (const std::exception& e) {
    return make_error(path + ": " + e.what(), "run sparkctl down, then sparkctl up LANE");
  }
}

}  // namespace spk
