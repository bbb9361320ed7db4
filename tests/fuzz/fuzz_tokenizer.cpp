// tokenizer.json through the tokenizer loader; a loaded tokenizer encodes and decodes a fixed text
// (its regex, merges and added tokens all run).
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/tokenizer/hf_tokenizer.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = spk::rt::HfTokenizer::from_json(text, "", "fuzz/tokenizer.json");
  if (!t.ok()) {
    (void)nlohmann::json{{"error", t.error().message}}.dump();
    return 0;
  }
  const auto& tok = **t;
  auto ids =
      tok.encode("Hello, world! <|im_start|> 123 \xc3\xa9t\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd  \n\n", true);
  (void)tok.decode(ids, false);
  (void)tok.decode(ids, true);
  (void)tok.decode({0, 1, 2, -1, 1 << 30}, false);
  (void)tok.id_to_token(0);
  (void)tok.token_to_id("a");
  return 0;
}
