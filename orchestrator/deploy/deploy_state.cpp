#include "orchestrator/deploy/deploy_state.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"

namespace spk {

std::string deploy_state_path(const std::string& state_dir) { return state_dir + "/deploy/state.json"; }

Status write_deploy_state(const std::string& state_dir, const DeployState& s) {
  nlohmann::json j{{"lane", s.lane},         {"fingerprint", s.fingerprint},
                   {"phase", s.phase},       {"supervisor_pid", s.supervisor_pid},
                   {"endpoint", s.endpoint}, {"api_key_file", s.api_key_file},
                   {"message", s.message},   {"ranks", nlohmann::json::array()}};
  for (const auto& r : s.ranks)
    j["ranks"].push_back({{"rank", r.rank},
                          {"node", r.node},
                          {"pid", r.pid},
                          {"phase", r.phase},
                          {"started_ms", r.started_ms},
                          {"restarts", r.restarts},
                          {"endpoint", r.endpoint},
                          {"kv_bytes", r.kv_bytes},
                          {"kv_tokens", r.kv_tokens}});
  ::mkdir(state_dir.c_str(), 0755);
  const std::string dir = state_dir + "/deploy";
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return make_error("cannot create " + dir, "set --state-dir to a writable directory");
  return write_file_atomic(deploy_state_path(state_dir), j.dump(2) + "\n");
}

Result<DeployState> read_deploy_state(const std::string& state_dir) {
  const std::string path = deploy_state_path(state_dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error("no deployment in " + state_dir + " (" + path + " absent)", "run sparkctl up LANE");
  SPK_ASSIGN(auto text, read_file(path));
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(path + ": not valid JSON", "run sparkctl down, then sparkctl up LANE");
  DeployState s;
  s.lane = j.value("lane", "");
  s.fingerprint = j.value("fingerprint", "");
  s.phase = j.value("phase", "");
  s.supervisor_pid = j.value("supervisor_pid", 0);
  s.endpoint = j.value("endpoint", "");
  s.api_key_file = j.value("api_key_file", "");
  s.message = j.value("message", "");
  if (j.contains("ranks") && j["ranks"].is_array())
    for (const auto& rj : j["ranks"]) {
      if (!rj.is_object()) return make_error(path + ": a rank entry is not an object", "run sparkctl down");
      RankState r;
      r.rank = rj.value("rank", 0);
      r.node = rj.value("node", "");
      r.pid = rj.value("pid", 0);
      r.phase = rj.value("phase", "");
      r.started_ms = rj.value("started_ms", int64_t{0});
      r.restarts = rj.value("restarts", 0);
      r.endpoint = rj.value("endpoint", "");
      r.kv_bytes = rj.value("kv_bytes", int64_t{0});
      r.kv_tokens = rj.value("kv_tokens", int64_t{0});
      s.ranks.push_back(std::move(r));
    }
  return s;
}

}  // namespace spk
