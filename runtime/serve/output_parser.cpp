// The reasoning -> stop strings -> tool calls chain of one choice (output_parser.h).
#include "runtime/serve/output_parser.h"

namespace spk::rt {

OutputParser::OutputParser(const OutputParserOptions& o) : stop_(o.stop) {
  if (!o.reasoning_parser.empty()) reasoning_.emplace(o.reasoning_starts_inside);
  if (!o.tool_call_parser.empty())
    if (auto f = make_tool_format(o.tool_call_parser))
      tools_ = std::make_unique<ToolCallParser>(std::move(f), o.tools);
}

void OutputParser::content(std::string_view text, std::vector<OutputDelta>& out) {
  if (text.empty()) return;
  if (tools_)
    tools_->push(text, out);
  else
    out.push_back(text_delta(OutputDelta::Kind::content, std::string(text)));
}

void OutputParser::record(std::vector<OutputDelta>& out, size_t from) {
  for (size_t i = from; i < out.size(); ++i) {
    const OutputDelta& d = out[i];
    switch (d.kind) {
      case OutputDelta::Kind::content:
        out_.content += d.text;
        break;
      case OutputDelta::Kind::reasoning:
        out_.reasoning += d.text;
        break;
      case OutputDelta::Kind::tool_call_begin:
        out_.tool_calls.push_back({d.id, d.name, {}});
        break;
      case OutputDelta::Kind::tool_call_arguments:
        if (d.tool_index >= 0 && static_cast<size_t>(d.tool_index) < out_.tool_calls.size())
          out_.tool_calls[static_cast<size_t>(d.tool_index)].arguments += d.text;
        break;
    }
  }
}

bool OutputParser::push(std::string_view piece, std::vector<OutputDelta>& out) {
  if (finished_ || stop_.stopped()) return stop_.stopped();
  const size_t from = out.size();
  std::string body(piece);
  if (reasoning_) {
    auto s = reasoning_->push(piece);
    if (!s.reasoning.empty()) out.push_back(text_delta(OutputDelta::Kind::reasoning, std::move(s.reasoning)));
    body = std::move(s.content);
  }
  auto o = stop_.push(body);
  content(o.emit, out);
  record(out, from);
  return o.stopped;
}

void OutputParser::finish(std::vector<OutputDelta>& out) {
  if (finished_) return;
  finished_ = true;
  const size_t from = out.size();
  if (reasoning_ && !stop_.stopped()) {
    auto s = reasoning_->finish();
    if (!s.reasoning.empty()) out.push_back(text_delta(OutputDelta::Kind::reasoning, std::move(s.reasoning)));
    auto o = stop_.push(s.content);
    content(o.emit, out);
  }
  if (!stop_.stopped()) content(stop_.flush(), out);
  if (tools_) tools_->finish(out);
  record(out, from);
}

}  // namespace spk::rt
