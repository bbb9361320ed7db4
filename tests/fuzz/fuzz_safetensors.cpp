// Safetensors files (header + data) through SafetensorsFile::open, from an in-memory file (memfd); an
// accepted file has every tensor view read end to end (ASan checks the bounds) and scanned for NaN/Inf.
#include <sys/mman.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/checkpoint/nonfinite.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("fuzz.safetensors", 0);
  if (fd < 0) return 0;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto f = spk::rt::SafetensorsFile::open(path);
  if (!f.ok()) {
    (void)nlohmann::json{{"error", f.error().message}}.dump();
    return 0;
  }
  uint64_t sum = 0;
  for (const auto& t : (*f)->tensors()) {
    const auto v = (*f)->view(t);
    for (uint64_t i = 0; i < t.nbytes(); ++i) sum += v.data[i];
    sum += spk::rt::count_nonfinite(v.data, v.dtype, t.numel());
  }
  for (const auto& [k, v] : (*f)->metadata()) (void)nlohmann::json{{k, v}}.dump();
  return static_cast<int>(sum & 0);
}
