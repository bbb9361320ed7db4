#include "recipes/input_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace spk {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string hex_byte(unsigned char c) {
  char b[8];
  std::snprintf(b, sizeof(b), "0x%02x", c);
  return b;
}

}  // namespace

Result<std::string> read_input_file(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return make_error("cannot read " + path + ": " + std::strerror(errno), "check the path");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error("cannot stat " + path + ": " + std::strerror(e), "check the path");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(path + " is " + kind_of(st.st_mode) + ", not a regular file",
                      "pass the path of a YAML file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return make_error(path + " is " + std::to_string(st.st_size) + " bytes, more than the cap of " +
                          std::to_string(max_bytes),
                      "a recipe or inventory is a few KiB; check that this is the right file");
  }
  // Read at most max_bytes + 1: a file that grows after the fstat is still caught.
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return make_error("cannot read " + path + ": " + std::strerror(e), "check the path");
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got > max_bytes) {
      ::close(fd);
      return make_error(path + " grew past the cap of " + std::to_string(max_bytes) + " bytes while read",
                        "a recipe or inventory is a few KiB; check that this is the right file");
    }
    if (got == text.size()) text.resize(std::min(text.size() * 2, max_bytes + 1));
  }
  ::close(fd);
  text.resize(got);
  return text;
}

std::optional<Utf8Problem> find_invalid_utf8(std::string_view s) {
  int line = 1, col = 1;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    }
    auto fail = [&](const std::string& what) { return Utf8Problem{i, {line, col}, what}; };
    if (len == 0) return fail("byte " + hex_byte(c) + " cannot start a UTF-8 character");
    if (i + len > n) return fail("UTF-8 character cut off by the end of the file at byte " + hex_byte(c));
    for (size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80)
        return fail("byte " + hex_byte(c) + " followed by " + hex_byte(d) + " is not UTF-8");
      cp = (cp << 6) | (d & 0x3F);
    }
    if (len > 1 && cp < min) return fail("overlong UTF-8 encoding starting with byte " + hex_byte(c));
    if (cp >= 0xD800 && cp <= 0xDFFF) return fail("UTF-8-encoded surrogate (not a character)");
    if (cp > 0x10FFFF) return fail("code point past U+10FFFF");
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    i += len;
  }
  return std::nullopt;
}

std::optional<Utf8Problem> find_control_char(std::string_view s) {
  int line = 1, col = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
      return Utf8Problem{i, {line, col}, "control character " + hex_byte(c) + " is not allowed"};
    if (c == '\n') {
      ++line;
      col = 1;
    } else if ((c & 0xC0) != 0x80) {  // count characters, not continuation bytes
      ++col;
    }
  }
  return std::nullopt;
}

}  // namespace spk
