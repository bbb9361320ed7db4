// Reading user-supplied YAML (recipes, cluster inventories) as untrusted input: a regular file only (a
// device, FIFO or directory is refused by name before a byte is read, so `recipe validate /dev/zero`
// cannot read forever), size-capped before reading, and UTF-8 checked before the YAML parser sees it
// (invalid bytes would otherwise travel into diagnostics and JSON output).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/base/status.h"
#include "recipes/diagnostic.h"

namespace spk {

// The whole of `path` when it is a regular file of at most `max_bytes`. The error names the path, the
// file kind or the size and the cap. Opened O_NONBLOCK so that a FIFO never blocks the open itself.
Result<std::string> read_input_file(const std::string& path, size_t max_bytes);

// Where the first byte that is not well-formed UTF-8 sits (overlong forms, surrogates and code points
// past U+10FFFF count as ill-formed, as in RFC 3629), with a description ("byte 0xff"), or nullopt.
struct Utf8Problem {
  size_t offset = 0;
  SourcePos pos;  // 1-based line, and the column in characters
  std::string what;
};
std::optional<Utf8Problem> find_invalid_utf8(std::string_view text);

// The first C0 control character other than TAB, LF and CR (YAML allows none of them). A NUL matters
// beyond YAML's rules: yaml-cpp guesses UTF-16/32 from NUL bytes near the start ("n\0\0\0" reads as
// UTF-32LE) and then produces ill-formed UTF-8 scalars.
std::optional<Utf8Problem> find_control_char(std::string_view text);

}  // namespace spk
