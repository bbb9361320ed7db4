// HTTP API request bodies through the OpenAI request parser: the first byte picks the route
// (/v1/completions or /v1/chat/completions), the rest is the body. Errors are serialized as the server
// sends them; an accepted chat request's messages/tools are serialized as the template sees them.
#include <string_view>

#include "runtime/serve/openai_protocol.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  spk::rt::ProtocolLimits lim;
  lim.served_model_name = "fuzz";
  auto r = spk::rt::parse_request(body, chat, lim);
  if (auto* e = std::get_if<spk::rt::ApiError>(&r)) {
    (void)e->body().dump();
    return 0;
  }
  const auto& q = std::get<spk::rt::ApiRequest>(r);
  (void)q.messages.dump();
  (void)q.tools.dump();
  (void)q.chat_template_kwargs.dump();
  return 0;
}
