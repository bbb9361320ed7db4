#include "orchestrator/deploy/events.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/base/fs.h"

namespace spk {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void append_event(const std::string& state_dir, const std::string& kind, const std::string& message) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir + "/deploy", ec);
  const std::string line = nlohmann::json{{"ts_ms", wall_ms()}, {"kind", kind}, {"message", message}}.dump(
                               -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                           "\n";
  int fd =
      ::open((state_dir + "/deploy/events.jsonl").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  [[maybe_unused]] auto w = ::write(fd, line.data(), line.size());
  ::close(fd);
}

std::vector<DeployEvent> read_events(const std::string& state_dir, size_t max) {
  std::vector<DeployEvent> all;
  auto text = read_file(state_dir + "/deploy/events.jsonl");
  if (!text) return all;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    all.push_back({j.value("ts_ms", int64_t{0}), j.value("kind", ""), j.value("message", "")});
  }
  if (all.size() > max) all.erase(all.begin(), all.end() - static_cast<long>(max));
  return all;
}

}  // namespace spk
