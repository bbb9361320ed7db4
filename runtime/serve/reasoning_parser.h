// Reasoning parsers: split a choice's decoded text into reasoning (between <think> and </think>) and
// content, incrementally. One think-tag grammar serves every family built so far; the families differ in
// where the output starts:
//   qwen3, deepseek_r1: inside reasoning when the rendered prompt ends with an open <think> (Qwen3 with
//     thinking on, DeepSeek-R1, DeepSeek-V3.1 with thinking), else only when the output opens <think>;
//   minimax: always inside (MiniMax-M2's template opens <think> in the prompt; its output then holds
//     reasoning up to </think>).
// Reasoning loses its leading and trailing blanks, content its leading blanks after </think>. Output
// that never closes its reasoning is all reasoning. A partial tag is held back, nothing is retracted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spk::rt {

// The names --reasoning-parser accepts: qwen3, deepseek_r1, minimax.
const std::vector<std::string>& reasoning_parser_names();
bool is_reasoning_parser(std::string_view name);
// Whether the output of `parser` starts inside reasoning, given the rendered prompt.
bool starts_in_reasoning(std::string_view parser, std::string_view prompt);

class ReasoningParser {
 public:
  explicit ReasoningParser(bool inside);
  struct Split {
    std::string reasoning, content;  // in that order: reasoning always precedes content
  };
  Split push(std::string_view text);
  Split finish();  // end of output: held text is released (a partial tag is text after all)
  [[nodiscard]] bool in_reasoning() const { return state_ != State::content; }
  // Inside the reasoning section proper (its opening marker seen or implied, its closing one not yet).
  [[nodiscard]] bool reasoning_open() const { return state_ == State::reasoning; }

 private:
  enum class State { start, reasoning, content };
  void reason(std::string_view text, Split& out);

  State state_;
  bool inside_;
  std::string buf_;     // start: what may still be "<think>"; reasoning: a partial "</think>"
  std::string blanks_;  // trailing blanks of the reasoning, held
  bool reasoning_begun_ = false;
  bool content_begun_ = false;
};

}  // namespace spk::rt
