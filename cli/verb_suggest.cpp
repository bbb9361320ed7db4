#include "cli/verb_suggest.h"

#include <algorithm>
#include <string_view>

namespace spk::cli {
namespace {

// What other tools call our verbs (docker, systemctl, kubectl, vLLM habits).
struct Alias {
  std::string_view word, verb;
};
constexpr Alias kAliases[] = {
    {"ps", "status"},       {"ls", "status"},     {"info", "status"},    {"run", "up"},
    {"start", "up"},        {"serve", "up"},      {"launch", "up"},      {"deploy", "up"},
    {"stop", "down"},       {"kill", "down"},     {"rm", "down"},        {"halt", "down"},
    {"log", "logs"},        {"tail", "logs"},     {"reload", "restart"}, {"use", "switch"},
    {"benchmark", "bench"}, {"doctor", "fabric"}, {"recipes", "recipe"}, {"lanes", "recipe"},
    {"download", "stage"},  {"pull", "stage"},    {"push", "stage"},
};

// Global options that take a value (main.cpp): the word after them is not a verb.
bool takes_value(std::string_view a) {
  return a == "--cluster" || a == "--state-dir" || a == "-v" || a == "--log-level";
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> first_verb_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") return std::nullopt;
    if (a == "-h" || a == "--help" || a == "--version") return std::nullopt;
    if (takes_value(a)) {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;  // a flag, or --opt=value
    return std::string(a);
  }
  return std::nullopt;
}

bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--json") return true;
  }
  return false;
}

bool is_known(const std::string& word, const std::vector<std::string>& verbs) {
  return std::find(verbs.begin(), verbs.end(), word) != verbs.end();
}

std::string suggest_verb(const std::string& word, const std::vector<std::string>& verbs) {
  for (const auto& a : kAliases)
    if (a.word == word && is_known(std::string(a.verb), verbs))
      return " (did you mean `sparkctl " + std::string(a.verb) + "`?)";
  std::string best;
  size_t best_d = 3;  // at most 2 edits, and fewer than half the word
  for (const auto& v : verbs) {
    const size_t d = edit_distance(word, v);
    if (d < best_d && d * 2 < std::max(word.size(), v.size())) best = v, best_d = d;
  }
  if (!best.empty()) return " (did you mean `sparkctl " + best + "`?)";
  return " (see `sparkctl --help` for the verbs)";
}

}  // namespace spk::cli
