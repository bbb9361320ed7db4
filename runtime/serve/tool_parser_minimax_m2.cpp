// minimax_m2 (MiniMax-M2 / M2.1 / M2.5): several calls per block,
//   <minimax:tool_call>\n<invoke name="NAME">\n<parameter name="P">VALUE</parameter>\n</invoke>\n
//   </minimax:tool_call>
// Names may be quoted ("x" or 'x') or bare. A value is trimmed, then typed by the tool's JSON schema like
// qwen3_coder (a value that does not parse as its type makes the call invalid).
#include "runtime/serve/tool_parser.h"

namespace spk::rt {

namespace {

using ojson = nlohmann::ordered_json;

std::string unquote(std::string_view s) {
  s = toolfmt::trim(s);
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    s = s.substr(1, s.size() - 2);
  return std::string(s);
}

// Body of <invoke NAME_ATTR> ... </invoke>, starting right after "<invoke".
bool parse_invoke(std::string_view body, const ToolSchemas& schemas, ScanStep& st) {
  constexpr std::string_view kName = "name=", kP = "<parameter", kPEnd = "</parameter>";
  body.remove_prefix(toolfmt::blank_prefix(body));
  if (body.substr(0, kName.size()) != kName) return false;
  const size_t gt = body.find('>');
  if (gt == std::string_view::npos) return false;
  std::string name = unquote(body.substr(kName.size(), gt - kName.size()));
  if (name.empty()) return false;
  std::string_view rest = body.substr(gt + 1);
  ojson args = ojson::object();
  while (true) {
    rest.remove_prefix(toolfmt::blank_prefix(rest));
    if (rest.empty()) break;
    if (rest.substr(0, kP.size()) != kP) return false;
    std::string_view attr = rest.substr(kP.size());
    attr.remove_prefix(toolfmt::blank_prefix(attr));
    if (attr.substr(0, kName.size()) != kName) return false;
    const size_t pgt = attr.find('>');
    const size_t pend = attr.find(kPEnd);
    if (pgt == std::string_view::npos || pend == std::string_view::npos || pend < pgt) return false;
    std::string param = unquote(attr.substr(kName.size(), pgt - kName.size()));
    if (param.empty()) return false;
    auto v = typed_value(std::string(toolfmt::trim(attr.substr(pgt + 1, pend - pgt - 1))),
                         schemas.param_type(name, param));
    if (!v) return false;
    args[param] = std::move(*v);
    rest = attr.substr(pend + kPEnd.size());
  }
  st.name = std::move(name);
  st.arguments = *toolfmt::object_text(args);
  return true;
}

class MinimaxM2Format : public ToolFormat {
 public:
  [[nodiscard]] std::string_view open_marker() const override { return "<minimax:tool_call>"; }
  [[nodiscard]] ScanStep scan(std::string_view inner, const ToolSchemas& schemas) const override {
    return toolfmt::scan_units(
        inner, "<invoke", "</invoke>", "</minimax:tool_call>",
        [&](std::string_view body, ScanStep& st) { return parse_invoke(body, schemas, st); });
  }
};

}  // namespace

std::unique_ptr<ToolFormat> make_minimax_m2_format() { return std::make_unique<MinimaxM2Format>(); }

}  // namespace spk::rt
