#include "runtime/serve/request_head.h"

#include <algorithm>
#include <cctype>

namespace spk::rt {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// RFC 9110 token characters (method and field names).
bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

HeadParse bad(std::string why) {
  HeadParse p;
  p.state = HeadState::bad;
  p.problem = std::move(why);
  return p;
}

bool parse_request_line(std::string_view l, RequestHead& h, std::string& why) {
  const auto sp1 = l.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : l.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || l.find(' ', sp2 + 1) != std::string_view::npos) {
    why = "malformed request line (want METHOD /path HTTP/1.1)";
    return false;
  }
  std::string_view m = l.substr(0, sp1), t = l.substr(sp1 + 1, sp2 - sp1 - 1), v = l.substr(sp2 + 1);
  if (m.empty() || m.size() > 16 || !std::all_of(m.begin(), m.end(), is_tchar)) {
    why = "malformed request method";
    return false;
  }
  if (t.empty() || t.front() != '/' || std::any_of(t.begin(), t.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
      })) {
    why = "malformed request target (want an absolute path such as /v1/models)";
    return false;
  }
  if (v == "HTTP/1.1")
    h.minor_version = 1;
  else if (v == "HTTP/1.0")
    h.minor_version = 0;
  else {
    why = "unsupported HTTP version (this server speaks HTTP/1.1)";
    return false;
  }
  h.method = std::string(m);
  h.target = std::string(t);
  h.path = std::string(t.substr(0, t.find('?')));
  return true;
}

}  // namespace

const std::string* RequestHead::field(std::string_view name) const {
  for (const auto& [k, v] : fields)
    if (iequals(k, name)) return &v;
  return nullptr;
}

size_t RequestHead::count(std::string_view name) const {
  return static_cast<size_t>(
      std::count_if(fields.begin(), fields.end(), [&](const auto& kv) { return iequals(kv.first, name); }));
}

bool RequestHead::keep_alive() const {
  const std::string* c = field("Connection");
  if (minor_version == 0) return c && iequals(trim(*c), "keep-alive");
  return !(c && iequals(trim(*c), "close"));
}

HeadParse parse_head(std::string_view buf, size_t max_head_bytes, size_t max_fields) {
  size_t pos = 0;
  while (pos < buf.size() && (buf[pos] == '\r' || buf[pos] == '\n')) ++pos;  // leading blank lines
  HeadParse out;
  bool have_line = false;
  while (true) {
    const auto nl = buf.find('\n', pos);
    if (nl == std::string_view::npos || nl + 1 > max_head_bytes) {
      if (buf.size() > max_head_bytes || (nl != std::string_view::npos && nl + 1 > max_head_bytes)) {
        out.state = HeadState::too_large;
        out.problem = "request head is larger than " + std::to_string(max_head_bytes) + " bytes";
      }
      return out;  // incomplete (or too large)
    }
    std::string_view line = buf.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = nl + 1;
    if (!have_line) {
      if (!parse_request_line(line, out.head, out.problem)) return bad(out.problem);
      have_line = true;
      continue;
    }
    if (line.empty()) break;  // end of the head
    if (line.front() == ' ' || line.front() == '\t') return bad("folded header lines are not accepted");
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return bad("malformed header line (want Name: value)");
    std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_tchar)) return bad("malformed header name");
    std::string_view value = trim(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r'; }))
      return bad("header '" + std::string(name) + "' holds a control character");
    if (out.head.fields.size() >= max_fields) {
      HeadParse p;
      p.state = HeadState::too_large;
      p.problem = "request has more than " + std::to_string(max_fields) + " header fields";
      return p;
    }
    out.head.fields.emplace_back(std::string(name), std::string(value));
  }
  out.state = HeadState::complete;
  out.head_bytes = pos;
  return out;
}

BodyFraming body_framing(const RequestHead& h, bool body_expected, uint64_t max_body_bytes) {
  BodyFraming f;
  auto error = [&](int status, std::string why) {
    f.kind = BodyFraming::error;
    f.status = status;
    f.problem = std::move(why);
    return f;
  };
  const size_t te = h.count("Transfer-Encoding"), cl = h.count("Content-Length");
  if (te > 0) {
    if (cl > 0) return error(400, "both Transfer-Encoding and Content-Length are set (send one)");
    if (te > 1 || !iequals(trim(*h.field("Transfer-Encoding")), "chunked"))
      return error(501, "Transfer-Encoding '" + h.field("Transfer-Encoding")->substr(0, 64) +
                            "' is not supported (send chunked or a Content-Length)");
    f.kind = BodyFraming::chunked;
    return f;
  }
  if (cl > 0) {
    std::string first;
    for (const auto& [k, v] : h.fields) {
      if (!iequals(k, "Content-Length")) continue;
      if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
        return error(400, "Content-Length '" + v.substr(0, 32) + "' is not a byte count");
      if (!first.empty() && v != first) return error(400, "conflicting Content-Length fields");
      first = v;
    }
    const uint64_t n = std::stoull(first);
    if (n > max_body_bytes)
      return error(413, "request body is larger than " + std::to_string(max_body_bytes) +
                            " bytes (the server's body limit)");
    f.kind = n == 0 ? BodyFraming::none : BodyFraming::sized;
    f.length = n;
    return f;
  }
  if (body_expected)
    return error(411, "a " + h.method + " request needs a Content-Length (or chunked encoding)");
  return f;
}

void ChunkedDecoder::fail(std::string why, bool too_large) {
  st_ = State::bad;
  too_large_ = too_large;
  problem_ = std::move(why);
}

size_t ChunkedDecoder::feed(std::string_view in, std::string& out) {
  size_t i = 0;
  // Appends to line_ up to a '\n'; true when the line is complete (line_ without "\r\n").
  auto take_line = [&](size_t limit) {
    const auto nl = in.find('\n', i);
    const size_t end = nl == std::string_view::npos ? in.size() : nl;
    line_.append(in.substr(i, end - i));
    i = nl == std::string_view::npos ? in.size() : nl + 1;
    if (line_.size() > limit)
      return fail("chunk line longer than " + std::to_string(limit) + " bytes"), false;
    if (nl == std::string_view::npos) return false;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    return true;
  };
  while (i < in.size() && st_ != State::done && st_ != State::bad) {
    switch (st_) {
      case State::size: {
        if (!take_line(1024)) break;
        std::string_view l = line_;
        l = trim(l.substr(0, l.find(';')));
        if (l.empty() || l.size() > 15 ||
            l.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
          fail("malformed chunk size '" + std::string(l.substr(0, 32)) + "'");
          break;
        }
        const uint64_t n = std::stoull(std::string(l), nullptr, 16);
        line_.clear();
        if (n > max_ - total_) {
          fail("chunked request body is larger than " + std::to_string(max_) +
                   " bytes (the server's body limit)",
               true);
          break;
        }
        left_ = n;
        st_ = n == 0 ? State::trailer : State::data;
        break;
      }
      case State::data: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(left_, in.size() - i));
        out.append(in.substr(i, take));
        i += take;
        left_ -= take;
        total_ += take;
        if (left_ == 0) st_ = State::data_end;
        break;
      }
      case State::data_end:
        if (!take_line(2)) break;
        if (!line_.empty()) fail("chunk data is not followed by CRLF");
        line_.clear();
        st_ = State::size;
        break;
      case State::trailer: {
        if (!take_line(8192)) break;
        trailer_bytes_ += line_.size() + 2;
        if (trailer_bytes_ > 8192) {
          fail("chunked trailer is larger than 8192 bytes");
          break;
        }
        const bool end = line_.empty();
        line_.clear();
        if (end) st_ = State::done;
        break;
      }
      case State::done:
      case State::bad:
        break;
    }
  }
  return i;
}

std::string handler_request(const RequestHead& h, const std::string& body, bool body_expected) {
  std::string out = h.method + " " + h.target + " HTTP/1." + std::to_string(h.minor_version) + "\r\n";
  for (const auto& [k, v] : h.fields) {
    if (iequals(k, "Content-Length") || iequals(k, "Transfer-Encoding") || iequals(k, "Expect")) continue;
    out += k + ": " + v + "\r\n";
  }
  if (body_expected || !body.empty()) out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "\r\n";
  if (body_expected) out += body;
  return out;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

}  // namespace spk::rt
