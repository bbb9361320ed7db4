// HTTP/1.1 request framing for the connection front (http_front.h): finds and parses a request head
// (request line + header fields) in the bytes read so far, decides how the body is framed, and decodes
// chunked bodies incrementally. Pure functions over bytes, no I/O, so every cap is enforced on what has
// arrived, before the rest is read: a head is refused once it passes max_head_bytes without ending, a
// chunked body once its decoded size passes the body cap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spk::rt {

struct RequestHead {
  std::string method;
  std::string target;                                       // as sent: path + optional query
  std::string path;                                         // target without the query
  int minor_version = 1;                                    // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> fields;  // name as sent, value trimmed

  // First value of a field (case-insensitive name), nullptr when absent.
  [[nodiscard]] const std::string* field(std::string_view name) const;
  [[nodiscard]] size_t count(std::string_view name) const;
  // HTTP/1.1 without "Connection: close", or HTTP/1.0 with "Connection: keep-alive".
  [[nodiscard]] bool keep_alive() const;
};

enum class HeadState { incomplete, complete, bad, too_large };

struct HeadParse {
  HeadState state = HeadState::incomplete;
  size_t head_bytes = 0;  // complete: bytes up to and including the blank line
  RequestHead head;
  std::string problem;  // bad / too_large: what is wrong (for the 400/431 body)
};

// Looks for the end of a head in `buf` (leading blank lines are skipped, as RFC 9112 allows).
// Incomplete past `max_head_bytes` is too_large; at most `max_fields` header fields.
HeadParse parse_head(std::string_view buf, size_t max_head_bytes, size_t max_fields = 100);

// How the body of a parsed head is framed.
struct BodyFraming {
  enum Kind { none, sized, chunked, error } kind = none;
  uint64_t length = 0;
  int status = 0;  // error: 400 (bad framing), 411 (length required), 413 (too large), 501
  std::string problem;
};
// `body_expected`: the method carries a body (POST/PUT/PATCH): without Content-Length or chunked -> 411.
BodyFraming body_framing(const RequestHead& h, bool body_expected, uint64_t max_body_bytes);

// The request as the handler thread gets it: the head as parsed, minus the framing the front consumed
// (Transfer-Encoding, Expect), with the exact Content-Length of the buffered body.
std::string handler_request(const RequestHead& h, const std::string& body, bool body_expected);
// "OK", "Bad Request", ... for a status line.
const char* reason_phrase(int status);

// Incremental chunked-body decoder (RFC 9112 7.1): size lines (extensions ignored), data, trailers.
class ChunkedDecoder {
 public:
  explicit ChunkedDecoder(uint64_t max_body_bytes) : max_(max_body_bytes) {}
  // Consumes bytes of `in`, appending decoded data to `out`; returns how many bytes were consumed
  // (everything up to the end of the body when it ends inside `in`).
  size_t feed(std::string_view in, std::string& out);
  [[nodiscard]] bool done() const { return st_ == State::done; }
  [[nodiscard]] bool failed() const { return st_ == State::bad; }
  [[nodiscard]] bool too_large() const { return too_large_; }
  [[nodiscard]] const std::string& problem() const { return problem_; }

 private:
  enum class State { size, data, data_end, trailer, done, bad };
  void fail(std::string why, bool too_large = false);
  State st_ = State::size;
  uint64_t max_;
  uint64_t left_ = 0;   // data bytes left in this chunk
  uint64_t total_ = 0;  // decoded so far
  std::string line_;    // the current size/trailer line
  size_t trailer_bytes_ = 0;
  bool too_large_ = false;
  std::string problem_;
};

}  // namespace spk::rt
