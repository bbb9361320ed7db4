// One choice's decoded text -> structured output (chat_output.h): the reasoning parser first, then stop
// strings on the content only (they never fire inside reasoning), then the tool-call parser. Every
// generation route runs its text through one of these; with no parser configured it is the plain
// stop-string path (all content).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler/stop_checker.h"
#include "runtime/serve/chat_output.h"
#include "runtime/serve/reasoning_parser.h"
#include "runtime/serve/tool_parser.h"

namespace spk::rt {

// What the server was told (--tool-call-parser / --reasoning-parser; "" = none).
struct OutputParsing {
  std::string tool_call_parser;
  std::string reasoning_parser;
};

struct OutputParserOptions {
  std::vector<std::string> stop;
  std::string reasoning_parser;  // "" = none
  bool reasoning_starts_inside = false;
  std::string tool_call_parser;  // "" = no tool-call parsing (no tools, tool_choice none, or none set)
  ToolSchemas tools;
};

class OutputParser {
 public:
  explicit OutputParser(const OutputParserOptions& o);
  // A decoded piece; appends deltas. True when a stop string matched: the choice is over (call finish()).
  bool push(std::string_view piece, std::vector<OutputDelta>& out);
  // End of output (eos, length, stop string): held text is released or dropped per the parsers' rules.
  void finish(std::vector<OutputDelta>& out);

  [[nodiscard]] const ChoiceOutput& output() const { return out_; }  // everything emitted so far
  [[nodiscard]] bool stopped() const { return stop_.stopped(); }
  [[nodiscard]] const std::string& stop_matched() const { return stop_.matched(); }
  [[nodiscard]] bool in_reasoning() const { return reasoning_ && reasoning_->in_reasoning(); }
  [[nodiscard]] bool reasoning_open() const { return reasoning_ && reasoning_->reasoning_open(); }

 private:
  void content(std::string_view text, std::vector<OutputDelta>& out);
  void record(std::vector<OutputDelta>& out, size_t from);

  StopChecker stop_;
  std::optional<ReasoningParser> reasoning_;
  std::unique_ptr<ToolCallParser> tools_;
  ChoiceOutput out_;
  bool finished_ = false;
};

}  // namespace spk::rt
