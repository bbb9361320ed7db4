#include "recipes/syntax.h"

#include <cctype>
#include <charconv>

namespace spk {

namespace {

bool parse_uint(std::string_view s, int max, int& out) {
  if (s.empty() || s.size() > 3 || (s.size() > 1 && s[0] == '0')) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 0 && out <= max;
}

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

}  // namespace

bool is_ipv4(std::string_view s) {
  int parts = 0;
  while (true) {
    size_t dot = s.find('.');
    int v = 0;
    if (!parse_uint(s.substr(0, dot), 255, v)) return false;
    ++parts;
    if (dot == std::string_view::npos) break;
    s.remove_prefix(dot + 1);
  }
  return parts == 4;
}

bool is_cidr(std::string_view s) {
  size_t slash = s.find('/');
  int prefix = 0;
  return slash != std::string_view::npos && is_ipv4(s.substr(0, slash)) &&
         parse_uint(s.substr(slash + 1), 32, prefix);
}

bool is_env_name(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

bool is_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!std::islower(static_cast<unsigned char>(s[0])) && !std::isdigit(static_cast<unsigned char>(s[0])))
    return false;
  for (char c : s)
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
          c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

bool is_hub_id(std::string_view s) {
  size_t slash = s.find('/');
  if (slash == 0 || slash == std::string_view::npos || slash + 1 == s.size()) return false;
  if (s.find('/', slash + 1) != std::string_view::npos || s.find("..") != std::string_view::npos)
    return false;
  for (char c : s)
    if (c != '/' && !word_char(c)) return false;
  return true;
}

bool is_commit_hash(std::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && !(c >= 'a' && c <= 'f')) return false;
  return true;
}

}  // namespace spk
