// config.json through parse_model_config: a config or an error, never an exception.
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/model/model_config.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = spk::rt::parse_model_config(text, "config.json");
  // parse_model_config quotes nlohmann's parse error, whose "last read" excerpt holds the raw input bytes:
  // the message can be ill-formed UTF-8 (found by this harness; model_config.cpp is not this harness's to
  // change). Serialized as the CLI must, replacing bad bytes, so the fuzzing goes on past it.
  if (!c.ok())
    (void)nlohmann::json{{"error", c.error().message}, {"fix", c.error().fix}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
