// The seam between the HTTP driver (http_server.cpp) and one API's wire format (/v1/chat/completions,
// /v1/messages, /v1/responses): the driver polls a Generation and hands it to the front, which turns its
// structured output (chat_output.h: Generation::take_deltas / output / usage / failure) into that API's
// stream events or response body. Also the small wire helpers the fronts share.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace spk::rt {

class Generation;

// A refused request, API-neutral: each front writes it in its own error shape. `param` names the field
// ("messages.2.content.0.type"), `message` says what is wrong and how to fix it.
struct FieldError {
  FieldError() = default;
  FieldError(int s, std::string p, std::string m, std::string c = {})
      : status(s), param(std::move(p)), message(std::move(m)), code(std::move(c)) {}
  int status = 400;
  std::string param;
  std::string message;
  std::string code;
};

class ApiFront {
 public:
  virtual ~ApiFront() = default;
  // Streaming: the events for whatever `gen` produced since the last call; once gen is all done, the
  // closing events too (finished() is then true).
  virtual std::string take_events(Generation& gen) = 0;
  [[nodiscard]] virtual bool finished() const = 0;
  // Non-streaming, once gen is all done: HTTP status and body.
  virtual std::pair<int, nlohmann::json> response(Generation& gen) = 0;
};

// "event: <name>\ndata: <json>\n\n" (the framing of /v1/messages and /v1/responses streams).
std::string sse_named_event(std::string_view name, const nlohmann::json& data);

// "<prefix><32 hex digits>": 128 bits from the kernel's CSPRNG, so an id cannot be guessed from others
// (a stored response is fetched by id alone). msg_, toolu_, resp_, fc_, rs_, call_, chatcmpl-, cmpl-.
std::string make_wire_id(std::string_view prefix);

// A JSON document as text, invalid UTF-8 replaced (model output may split a code point).
std::string dump_json(const nlohmann::json& j);

}  // namespace spk::rt
