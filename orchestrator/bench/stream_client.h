// One streamed OpenAI chat completion, timed the way the bench measures decode speed: t_first is the
// arrival of the first chunk that carries generated text, t_last the arrival of the last such chunk;
// completion_tokens comes from the final `usage` chunk (stream_options.include_usage), so tokens whose
// text is held back (partial UTF-8) still count. Decode tok/s = (completion_tokens - 1)/(t_last - t_first).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"

namespace spk::bench {

using BenchClock = std::chrono::steady_clock;

struct Endpoint {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string model;  // served model name
  std::chrono::seconds timeout{600};
};

// "http://HOST:PORT" or "http://HOST:PORT/v1" -> host, port. Error names the URL and the expected form.
Status parse_endpoint_url(const std::string& url, Endpoint& out);

struct StreamSample {
  BenchClock::time_point t_start, t_first, t_last;  // request sent, first and last text chunk
  int chunks_with_text = 0;
  std::vector<BenchClock::time_point> text_times;  // arrival of every chunk with text (ITL = the gaps)
  int completion_tokens = 0;
  int prompt_tokens = 0;
  std::string text;
  std::string finish_reason;

  [[nodiscard]] double ttft_s() const;
  [[nodiscard]] double decode_s() const;  // t_last - t_first
  // (completion_tokens - 1) / decode_s; 0 when fewer than 2 tokens or no decode time.
  [[nodiscard]] double decode_tok_s() const;
  // Time per output token after the first: decode_s / (completion_tokens - 1); 0 with fewer than 2.
  [[nodiscard]] double tpot_s() const;
};

// Incremental SSE reader: feed raw bytes as they arrive; each complete `data:` event updates `s`.
// Errors: an `error` object in a chunk, or a chunk that is not JSON (message quotes it).
class SseAccumulator {
 public:
  explicit SseAccumulator(StreamSample& s) : s_(s) {}
  Status feed(std::string_view bytes, BenchClock::time_point now);
  [[nodiscard]] bool done() const { return done_; }  // saw `data: [DONE]`

 private:
  Status event(std::string_view data, BenchClock::time_point now);
  StreamSample& s_;
  std::string buf_;
  bool done_ = false;
};

// POST /v1/chat/completions with stream=true and include_usage; `body` holds messages, max_tokens and
// sampling fields (model, stream and stream_options are set here). Errors name the HTTP status and the
// server's message, or the transport failure.
Result<StreamSample> stream_chat(const Endpoint& ep, nlohmann::json body);

struct ServedModel {
  std::string id;
  int max_model_len = 0;  // 0 when the server does not say
};
// GET /v1/models with the key: the first model the server lists.
Result<ServedModel> served_model(const Endpoint& ep);

}  // namespace spk::bench
