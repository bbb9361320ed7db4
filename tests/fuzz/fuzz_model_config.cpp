// config.json through parse_model_config: a config or an error, never an exception.
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/model/model_config.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = spk::rt::parse_model_config(text, "config.json");
  if (!c.ok()) (void)nlohmann::json{{"error", c.error().message}, {"fix", c.error().fix}}.dump();
  return 0;
}
