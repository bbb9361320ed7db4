#include "runtime/serve/api_front.h"

#include <sys/random.h>

#include <cerrno>
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
  // 128 bits from the kernel's CSPRNG (getrandom(2)), as vLLM's ids: no clock, no counter, nothing a
  // client who has seen other ids can step to. The call blocks only before the pool is first seeded.
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      // No getrandom (a very old kernel): std::random_device reads /dev/urandom on Linux.
      static thread_local std::random_device rd;
      for (size_t i = got; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(rd());
      got = sizeof bytes;
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(prefix);
  out.reserve(prefix.size() + 2 * sizeof bytes);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

}  // namespace spk::rt
