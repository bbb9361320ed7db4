// String helpers with JavaScript semantics, over UTF-8 bytes. @huggingface/jinja is JS: its strings are
// UTF-16, `\s` / trim() use the ECMAScript white-space set, and numbers print like Number#toString.
// These helpers reproduce exactly that so rendered bytes match the reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spk::rt::jinja {

// Decode one code point at s[i]; advances i. Invalid bytes decode as U+FFFD (one byte consumed).
char32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, char32_t cp);

// ECMAScript WhiteSpace + LineTerminator (what /\s/ and String#trim match).
bool js_is_space(char32_t cp);
// Byte length of the JS-whitespace run starting at `pos` (forward) / ending at `end` (backward).
size_t js_space_run_forward(std::string_view s, size_t pos);
size_t js_space_run_backward(std::string_view s, size_t end);
std::string js_trim(std::string_view s);
std::string js_trim_start(std::string_view s);
std::string js_trim_end(std::string_view s);

// String#length: UTF-16 code units.
size_t js_length(std::string_view s);
// Code points (what Array.from(str) yields), each as a UTF-8 string.
std::vector<std::string> js_code_points(std::string_view s);
// ASCII-only case mapping (non-ASCII passes through unchanged).
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
// String#toUpperCase / toLowerCase: Unicode default (context-free) full case mapping, from the
// unicode-data package's UnicodeData.txt + SpecialCasing.txt (loaded once, on first non-ASCII use).
// Without those files it degrades to ASCII mapping. Not modelled: final-sigma context.
std::string js_upper(std::string_view s);
std::string js_lower(std::string_view s);
// Upper-cases only the first code point (capitalize's charAt(0).toUpperCase() for BMP text).
std::string js_upper_first(std::string_view s);

// Number#toString / JSON.stringify for a finite double ("1", "0.1", "1e+21", "NaN", "Infinity").
std::string js_number(double v);
// JSON.stringify(string): escapes ", \, control characters; non-ASCII kept. With `ascii`, every UTF-16
// code unit >= 0x7f becomes \uXXXX (what @huggingface/jinja's ensure_ascii does).
std::string js_json_quote(std::string_view s, bool ascii = false);

}  // namespace spk::rt::jinja
