// Tool-call parsers: one per model family (hermes, qwen3_coder, minimax_m2, deepseek_v3, deepseek_v31), all
// driven by one streaming machine. The machine is fed the content text of a choice as tokens arrive and
// turns it into OutputDeltas (chat_output.h): plain text, and whole tool calls.
//
// Contract (what every family gets from the machine):
//  - Text that could still become the start of a call marker is held back; nothing emitted is retracted.
//  - A call is emitted when it is complete (its closing marker arrived) and its arguments are a valid JSON
//    object: one tool_call_begin (id, name) followed by one tool_call_arguments delta with the whole
//    arguments text. Arguments are NOT streamed token by token: a call cut off by max_tokens, or one whose
//    arguments turn out invalid, must never have been reported, and streamed fragments could not be taken
//    back.
//  - A call that is never completed (max_tokens, eos inside the call) or that is invalid (arguments not a
//    JSON object, a value that does not parse as its schema type) is returned as content, verbatim.
//  - Whitespace between calls, and whitespace around the calls at the start and end of the output, is not
//    content (held back until non-blank text follows).
//  - Feeding the same text in any chunking gives the same deltas once concatenated per kind (fuzzed in
//    tests/serve/tool_parser_test.cpp).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/serve/chat_output.h"

namespace spk::rt {

// The request's tools, by name: what the XML families need to type parameter values (string stays a
// string, integer/number/boolean/object/array/null are parsed).
class ToolSchemas {
 public:
  ToolSchemas() = default;
  // `tools` in OpenAI chat form: [{"type":"function","function":{"name","parameters"}}] (null: none).
  explicit ToolSchemas(const nlohmann::ordered_json& tools);
  // The JSON schema type of tool `fn`'s parameter `param` ("string", "integer", ...); "" when unknown.
  [[nodiscard]] std::string param_type(const std::string& fn, const std::string& param) const;

 private:
  nlohmann::json by_name_ = nlohmann::json::object();  // name -> parameters schema
};

// A value typed by its schema type: nullopt when it does not parse as that type. Unknown type: string.
std::optional<nlohmann::ordered_json> typed_value(const std::string& value, const std::string& type);

// One unit a family's scanner found at the start of the text after a block's opening marker.
struct ScanStep {
  enum Kind {
    more,     // not complete yet: feed more text
    call,     // a complete, valid call of `used` bytes
    invalid,  // a complete unit of `used` bytes that is not a valid call: its text becomes content
    end,      // the block's closing marker (`used` bytes, leading blanks included): the block is over
  };
  Kind kind = more;
  size_t used = 0;
  bool closes_block = false;  // call / invalid: this unit also ended the block (one call per block)
  std::string name;
  std::string arguments;  // call: the arguments as JSON object text
};

// A family: the markers that open a block of calls, and a scanner for what follows.
class ToolFormat {
 public:
  virtual ~ToolFormat() = default;
  [[nodiscard]] virtual std::string_view open_marker() const = 0;
  // Looks at `inner`: what followed the open marker, minus the units already taken. A unit still `more`
  // when the output ends was cut off (it becomes content).
  [[nodiscard]] virtual ScanStep scan(std::string_view inner, const ToolSchemas& schemas) const = 0;
};

// The names --tool-call-parser accepts: hermes, qwen3_coder, minimax_m2, deepseek_v3, deepseek_v31.
const std::vector<std::string>& tool_parser_names();
// nullptr for an unknown name.
std::unique_ptr<ToolFormat> make_tool_format(std::string_view name);

// The streaming machine over one family (one choice's content).
class ToolCallParser {
 public:
  ToolCallParser(std::unique_ptr<ToolFormat> format, ToolSchemas schemas);
  // Content text as it arrives; appends the deltas it makes safe to send.
  void push(std::string_view text, std::vector<OutputDelta>& out);
  // End of the output: an unfinished call becomes content; held blanks are dropped (after calls) or sent.
  void finish(std::vector<OutputDelta>& out);
  [[nodiscard]] int num_calls() const { return calls_; }

 private:
  void emit_text(std::string_view text, std::vector<OutputDelta>& out);
  void drain(std::vector<OutputDelta>& out);

  std::unique_ptr<ToolFormat> format_;
  ToolSchemas schemas_;
  std::string buf_;           // outside a block: unsent text; inside: what followed the open marker
  bool inside_ = false;       // within a block of calls
  bool block_used_ = false;   // inside: a unit of this block was already taken
  std::string blanks_;        // trailing whitespace held back from the content
  std::string block_blanks_;  // the blanks before the open block: dropped for a call, else text again
  bool after_call_ = false;   // the last thing emitted was a call (leading blanks are dropped)
  int calls_ = 0;
};

// The families (tool_parser_<family>.cpp).
std::unique_ptr<ToolFormat> make_hermes_format();
std::unique_ptr<ToolFormat> make_qwen3_coder_format();
std::unique_ptr<ToolFormat> make_minimax_m2_format();
std::unique_ptr<ToolFormat> make_deepseek_v3_format();
std::unique_ptr<ToolFormat> make_deepseek_v31_format();

// Helpers the families share.
namespace toolfmt {
// Position of `s` in `text` at or after `from`, npos when absent.
size_t find(std::string_view text, std::string_view s, size_t from = 0);
// `text` without leading and trailing ASCII whitespace.
std::string_view trim(std::string_view text);
bool blank(char c);
// Number of leading ASCII whitespace bytes.
size_t blank_prefix(std::string_view text);
// True when `text` is a proper prefix of `marker` (a marker still being written).
bool is_partial(std::string_view text, std::string_view marker);
// Arguments text of a JSON object (nullopt when `j` is not one).
std::optional<std::string> object_text(const nlohmann::ordered_json& j);
// The scanner of a block holding several units (<invoke ...>...</invoke>, DeepSeek's call_begin ...
// call_end) closed by `block_close`. `parse` reads one unit's body (between unit_open and unit_close) into
// st.name / st.arguments and says whether it is a valid call. Text that is neither a unit nor the close
// marker is an invalid unit up to the next marker.
ScanStep scan_units(std::string_view inner, std::string_view unit_open, std::string_view unit_close,
                    std::string_view block_close,
                    const std::function<bool(std::string_view body, ScanStep& st)>& parse);
}  // namespace toolfmt

}  // namespace spk::rt
