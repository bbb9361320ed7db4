// The structured output of one generated choice: the currency shared by every API front-end
// (/v1/chat/completions, /v1/completions, /v1/responses, /v1/messages). The tool-call and reasoning
// parsers (one per model family) turn the decoded text stream into these deltas as tokens arrive; a
// front-end turns them into its own wire events. Invariant: concatenating a choice's deltas of one kind
// (per tool call for arguments) gives exactly the whole output's field; nothing once emitted is retracted.
#pragma once

#include <string>
#include <vector>

namespace spk::rt {

struct ToolCall {
  std::string id;  // "call_..." (OpenAI) / "toolu_..." style ids are the front-end's business
  std::string name;
  std::string arguments;  // JSON object text, complete and valid once the call is reported
};

struct OutputDelta {
  enum class Kind { content, reasoning, tool_call_begin, tool_call_arguments };
  Kind kind = Kind::content;
  std::string text;      // content / reasoning text, or a fragment of the arguments' JSON text
  int tool_index = -1;   // tool_call_*: which call of this choice, 0, 1, ...
  std::string id, name;  // tool_call_begin only
};

// A content or reasoning delta.
inline OutputDelta text_delta(OutputDelta::Kind kind, std::string text) {
  OutputDelta d;
  d.kind = kind;
  d.text = std::move(text);
  return d;
}

struct ChoiceOutput {
  int index = 0;
  std::string content, reasoning;
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;  // "stop" | "length" | "tool_calls"; "" while running
  std::string stop_sequence;  // the request's stop string that ended it ("" for eos / length / none)
};

}  // namespace spk::rt
