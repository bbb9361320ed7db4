// qwen3_coder (Qwen3-Coder, Qwen3-Next): one call per block, parameters as XML-ish tags,
//   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
// A value loses one leading and one trailing newline, then is typed by the tool's JSON schema (a string
// stays text; integer, number, boolean, object, array must parse as that type or the call is invalid).
#include "runtime/serve/tool_parser.h"

namespace spk::rt {

namespace {

using ojson = nlohmann::ordered_json;
constexpr std::string_view kClose = "</tool_call>";

std::string strip_newlines(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return std::string(v);
}

// <function=NAME> (<parameter=P>VALUE</parameter>)* </function>, blanks between tags.
bool parse_function(std::string_view body, const ToolSchemas& schemas, ScanStep& st) {
  body = toolfmt::trim(body);
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>",
                             kP = "<parameter=", kPEnd = "</parameter>";
  if (body.substr(0, kFn.size()) != kFn) return false;
  const size_t gt = body.find('>');
  if (gt == std::string_view::npos) return false;
  std::string name(toolfmt::trim(body.substr(kFn.size(), gt - kFn.size())));
  if (name.empty() || body.size() < kFnEnd.size() || body.substr(body.size() - kFnEnd.size()) != kFnEnd)
    return false;
  std::string_view rest = body.substr(gt + 1, body.size() - kFnEnd.size() - gt - 1);
  ojson args = ojson::object();
  while (true) {
    rest.remove_prefix(toolfmt::blank_prefix(rest));
    if (rest.empty()) break;
    if (rest.substr(0, kP.size()) != kP) return false;
    const size_t pgt = rest.find('>');
    const size_t pend = rest.find(kPEnd);
    if (pgt == std::string_view::npos || pend == std::string_view::npos || pend < pgt) return false;
    std::string param(toolfmt::trim(rest.substr(kP.size(), pgt - kP.size())));
    if (param.empty()) return false;
    auto v =
        typed_value(strip_newlines(rest.substr(pgt + 1, pend - pgt - 1)), schemas.param_type(name, param));
    if (!v) return false;
    args[param] = std::move(*v);
    rest.remove_prefix(pend + kPEnd.size());
  }
  st.name = std::move(name);
  st.arguments = *toolfmt::object_text(args);
  return true;
}

class Qwen3CoderFormat : public ToolFormat {
 public:
  [[nodiscard]] std::string_view open_marker() const override { return "<tool_call>"; }
  [[nodiscard]] ScanStep scan(std::string_view inner, const ToolSchemas& schemas) const override {
    ScanStep st;
    const size_t close = inner.find(kClose);
    if (close == std::string_view::npos) return st;
    st.used = close + kClose.size();
    st.closes_block = true;
    st.kind = parse_function(inner.substr(0, close), schemas, st) ? ScanStep::call : ScanStep::invalid;
    return st;
  }
};

}  // namespace

std::unique_ptr<ToolFormat> make_qwen3_coder_format() { return std::make_unique<Qwen3CoderFormat>(); }

}  // namespace spk::rt
