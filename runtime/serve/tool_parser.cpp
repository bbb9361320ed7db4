// The streaming machine shared by every tool-call family, the schema lookup and value typing
// (tool_parser.h). The families' scanners live in tool_parser_<family>.cpp.
#include "runtime/serve/tool_parser.h"

#include <algorithm>

#include "runtime/serve/api_front.h"

namespace spk::rt {

using ojson = nlohmann::ordered_json;

namespace toolfmt {

size_t find(std::string_view text, std::string_view s, size_t from) { return text.find(s, from); }

bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view t) {
  while (!t.empty() && blank(t.front())) t.remove_prefix(1);
  while (!t.empty() && blank(t.back())) t.remove_suffix(1);
  return t;
}

size_t blank_prefix(std::string_view t) {
  size_t n = 0;
  while (n < t.size() && blank(t[n])) ++n;
  return n;
}

bool is_partial(std::string_view text, std::string_view marker) {
  return text.size() < marker.size() && marker.substr(0, text.size()) == text;
}

std::optional<std::string> object_text(const ojson& j) {
  if (!j.is_object()) return std::nullopt;
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

ScanStep scan_units(std::string_view inner, std::string_view unit_open, std::string_view unit_close,
                    std::string_view block_close,
                    const std::function<bool(std::string_view body, ScanStep& st)>& parse) {
  ScanStep st;
  const size_t b = blank_prefix(inner);
  const std::string_view rest = inner.substr(b);
  if (rest.empty() || is_partial(rest, block_close) || is_partial(rest, unit_open)) return st;
  if (rest.substr(0, block_close.size()) == block_close) {
    st.kind = ScanStep::end;
    st.used = b + block_close.size();
    return st;
  }
  if (rest.substr(0, unit_open.size()) == unit_open) {
    const size_t close = rest.find(unit_close, unit_open.size());
    if (close == std::string_view::npos) return st;
    st.used = b + close + unit_close.size();
    st.kind = parse(rest.substr(unit_open.size(), close - unit_open.size()), st) ? ScanStep::call
                                                                                 : ScanStep::invalid;
    return st;
  }
  const size_t next = std::min(rest.find(unit_open), rest.find(block_close));
  if (next == std::string_view::npos) return st;  // wait: the text may still end in a marker
  st.kind = ScanStep::invalid;
  st.used = b + next;
  return st;
}

}  // namespace toolfmt

ToolSchemas::ToolSchemas(const ojson& tools) {
  if (!tools.is_array()) return;
  for (const auto& t : tools) {
    if (!t.is_object()) continue;
    const ojson& fn = t.contains("function") && t["function"].is_object() ? t["function"] : t;
    if (!fn.contains("name") || !fn["name"].is_string()) continue;
    nlohmann::json params =
        fn.contains("parameters") ? nlohmann::json::parse(fn["parameters"].dump()) : nlohmann::json::object();
    by_name_[fn["name"].get<std::string>()] = std::move(params);
  }
}

std::string ToolSchemas::param_type(const std::string& fn, const std::string& param) const {
  auto f = by_name_.find(fn);
  if (f == by_name_.end() || !f->is_object()) return {};
  auto props = f->find("properties");
  if (props == f->end() || !props->is_object()) return {};
  auto p = props->find(param);
  if (p == props->end() || !p->is_object()) return {};
  auto type = p->find("type");
  if (type == p->end()) return {};
  if (type->is_string()) return type->get<std::string>();
  if (type->is_array())  // ["integer", "null"]: the first type that is not null
    for (const auto& t : *type)
      if (t.is_string() && t.get<std::string>() != "null") return t.get<std::string>();
  return {};
}

std::optional<ojson> typed_value(const std::string& value, const std::string& type) {
  if (type.empty() || type == "string") return ojson(value);
  const std::string_view v = toolfmt::trim(value);
  if (v == "null") return ojson(nullptr);
  if (type == "boolean") {
    std::string low(v);
    std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
    if (low == "true") return ojson(true);
    if (low == "false") return ojson(false);
    return std::nullopt;
  }
  ojson j = ojson::parse(v, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  if (type == "integer" && j.is_number_integer()) return j;
  if (type == "integer" && j.is_number_float() && j.get<double>() == static_cast<double>(j.get<int64_t>()))
    return ojson(j.get<int64_t>());  // 3.0
  if (type == "number" && j.is_number()) return j;
  if (type == "object" && j.is_object()) return j;
  if (type == "array" && j.is_array()) return j;
  if (type != "integer" && type != "number" && type != "object" && type != "array") return j;  // other types
  return std::nullopt;
}

const std::vector<std::string>& tool_parser_names() {
  static const std::vector<std::string> names = {"hermes", "qwen3_coder", "minimax_m2", "deepseek_v3",
                                                 "deepseek_v31"};
  return names;
}

std::unique_ptr<ToolFormat> make_tool_format(std::string_view name) {
  if (name == "hermes") return make_hermes_format();
  if (name == "qwen3_coder") return make_qwen3_coder_format();
  if (name == "minimax_m2") return make_minimax_m2_format();
  if (name == "deepseek_v3") return make_deepseek_v3_format();
  if (name == "deepseek_v31") return make_deepseek_v31_format();
  return nullptr;
}

ToolCallParser::ToolCallParser(std::unique_ptr<ToolFormat> format, ToolSchemas schemas)
    : format_(std::move(format)), schemas_(std::move(schemas)) {}

void ToolCallParser::push(std::string_view text, std::vector<OutputDelta>& out) {
  buf_.append(text);
  drain(out);
}

void ToolCallParser::emit_text(std::string_view text, std::vector<OutputDelta>& out) {
  if (after_call_) {
    text.remove_prefix(toolfmt::blank_prefix(text));
    if (text.empty()) return;
    after_call_ = false;
  }
  size_t end = text.size();
  while (end > 0 && toolfmt::blank(text[end - 1])) --end;
  if (end == 0) {
    blanks_.append(text);
    return;
  }
  std::string s = std::move(blanks_);
  s.append(text.substr(0, end));
  blanks_.assign(text.substr(end));
  out.push_back(text_delta(OutputDelta::Kind::content, std::move(s)));
}

void ToolCallParser::drain(std::vector<OutputDelta>& out) {
  const std::string_view open = format_->open_marker();
  while (true) {
    if (!inside_) {
      const size_t pos = buf_.find(open);
      if (pos != std::string::npos) {
        emit_text(std::string_view(buf_).substr(0, pos), out);
        block_blanks_ = std::move(blanks_);  // not content if a call follows
        blanks_.clear();
        buf_.erase(0, pos + open.size());
        inside_ = true;
        block_used_ = false;
        continue;
      }
      // Hold back the longest tail that could still become the marker.
      size_t hold = 0;
      for (size_t k = std::min(buf_.size(), open.size() - 1); k > 0; --k)
        if (std::string_view(buf_).substr(buf_.size() - k) == open.substr(0, k)) {
          hold = k;
          break;
        }
      emit_text(std::string_view(buf_).substr(0, buf_.size() - hold), out);
      buf_.erase(0, buf_.size() - hold);
      return;
    }
    ScanStep st = format_->scan(buf_, schemas_);
    switch (st.kind) {
      case ScanStep::more:
        return;
      case ScanStep::call: {
        const int index = calls_++;
        OutputDelta b;
        b.kind = OutputDelta::Kind::tool_call_begin;
        b.tool_index = index;
        b.id = make_wire_id("call_");
        b.name = st.name;
        out.push_back(std::move(b));
        OutputDelta a;
        a.kind = OutputDelta::Kind::tool_call_arguments;
        a.tool_index = index;
        a.text = std::move(st.arguments);
        out.push_back(std::move(a));
        blanks_.clear();
        block_blanks_.clear();
        after_call_ = true;
        break;
      }
      case ScanStep::invalid: {
        std::string raw = block_used_ && !st.closes_block ? std::string() : block_blanks_ + std::string(open);
        block_blanks_.clear();
        raw.append(buf_, 0, st.used);
        emit_text(raw, out);
        break;
      }
      case ScanStep::end:
        break;
    }
    buf_.erase(0, st.used);
    block_used_ = true;
    if (st.kind == ScanStep::end || st.closes_block) inside_ = false;
  }
}

void ToolCallParser::finish(std::vector<OutputDelta>& out) {
  if (inside_) {
    // Cut off inside a block: the unfinished unit is content (a block whose calls all completed and that
    // only lacks its closing marker, as DeepSeek-V3's template writes a single call, loses nothing).
    if (!block_used_ || !toolfmt::trim(buf_).empty())
      emit_text((block_used_ ? std::string() : block_blanks_ + std::string(format_->open_marker())) + buf_,
                out);
  } else {
    emit_text(buf_, out);  // a held tail that never became a marker is text after all
  }
  buf_.clear();
  block_blanks_.clear();
  inside_ = false;
  if (calls_ == 0 && !blanks_.empty()) out.push_back(text_delta(OutputDelta::Kind::content, blanks_));
  blanks_.clear();
}

}  // namespace spk::rt
