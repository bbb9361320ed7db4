// <think> ... </think> splitting (reasoning_parser.h).
#include "runtime/serve/reasoning_parser.h"

#include <algorithm>

namespace spk::rt {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";
constexpr size_t kBlanksBeforeOpen = 4;

bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t blank_prefix(std::string_view t) {
  size_t n = 0;
  while (n < t.size() && blank(t[n])) ++n;
  return n;
}

// Longest tail of `s` that is a proper prefix of `tag`.
size_t partial_tail(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

}  // namespace

const std::vector<std::string>& reasoning_parser_names() {
  static const std::vector<std::string> names = {"qwen3", "deepseek_r1", "minimax"};
  return names;
}

bool is_reasoning_parser(std::string_view name) {
  const auto& n = reasoning_parser_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

bool starts_in_reasoning(std::string_view parser, std::string_view prompt) {
  if (parser == "minimax") return true;
  while (!prompt.empty() && blank(prompt.back())) prompt.remove_suffix(1);
  return prompt.size() >= kOpen.size() && prompt.substr(prompt.size() - kOpen.size()) == kOpen;
}

ReasoningParser::ReasoningParser(bool inside) : state_(State::start), inside_(inside) {}

void ReasoningParser::reason(std::string_view text, Split& out) {
  if (!reasoning_begun_) {
    text.remove_prefix(blank_prefix(text));
    if (text.empty()) return;
    reasoning_begun_ = true;
  }
  size_t end = text.size();
  while (end > 0 && blank(text[end - 1])) --end;
  if (end == 0) {
    blanks_.append(text);
    return;
  }
  out.reasoning += blanks_;
  out.reasoning.append(text.substr(0, end));
  blanks_.assign(text.substr(end));
}

ReasoningParser::Split ReasoningParser::push(std::string_view text) {
  Split out;
  buf_.append(text);
  while (true) {
    switch (state_) {
      case State::start: {
        const size_t b = blank_prefix(buf_);
        const std::string_view rest = std::string_view(buf_).substr(b);
        // Wait while the output could still open with <think>: a few blanks, then a prefix of the tag.
        // More blanks than that decide it (so an all-blank output streams instead of arriving at the end).
        if (rest.empty() ? b <= kBlanksBeforeOpen
                         : rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest)
          return out;
        if (rest.substr(0, kOpen.size()) == kOpen) {
          buf_.erase(0, b + kOpen.size());
          state_ = State::reasoning;
        } else {
          state_ = inside_ ? State::reasoning : State::content;
          // No reasoning at all: the output is content from its first byte (blanks included); only
          // content after </think> drops the blanks that separate it.
          if (!inside_) content_begun_ = true;
        }
        continue;
      }
      case State::reasoning: {
        const size_t close = buf_.find(kClose);
        if (close == std::string::npos) {
          const size_t hold = partial_tail(buf_, kClose);
          reason(std::string_view(buf_).substr(0, buf_.size() - hold), out);
          buf_.erase(0, buf_.size() - hold);
          return out;
        }
        reason(std::string_view(buf_).substr(0, close), out);
        blanks_.clear();
        buf_.erase(0, close + kClose.size());
        state_ = State::content;
        continue;
      }
      case State::content: {
        std::string_view t = buf_;
        if (!content_begun_) {
          t.remove_prefix(blank_prefix(t));
          if (!t.empty()) content_begun_ = true;
        }
        out.content.append(t);
        buf_.clear();
        return out;
      }
    }
  }
}

ReasoningParser::Split ReasoningParser::finish() {
  Split out;
  if (state_ == State::start) {
    state_ = inside_ ? State::reasoning : State::content;
    if (!inside_) content_begun_ = true;
  }
  if (state_ == State::reasoning) {
    reason(buf_, out);  // a partial </think> at the very end is reasoning text
  } else {
    std::string_view t = buf_;
    if (!content_begun_) t.remove_prefix(blank_prefix(t));
    out.content.append(t);
  }
  buf_.clear();
  blanks_.clear();
  return out;
}

}  // namespace spk::rt
