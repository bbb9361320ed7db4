#include "runtime/serve/api_front.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace spk::rt {

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_named_event(std::string_view name, const nlohmann::json& data) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += dump_json(data);
  out += "\n\n";
  return out;
}

std::string make_wire_id(std::string_view prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  const auto t = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  char b[32];
  std::snprintf(b, sizeof b, "%012llx%012llx", static_cast<unsigned long long>(t & 0xffffffffffffULL),
                static_cast<unsigned long long>((salt + counter++) & 0xffffffffffffULL));
  return std::string(prefix) + b;
}

}  // namespace spk::rt
