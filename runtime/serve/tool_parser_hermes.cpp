// hermes (Qwen2.5, Qwen3, Hermes): one call per block,
//   <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
// as Qwen3's chat template writes an assistant message's tool_calls. `arguments` may also come as a string
// holding the JSON object (some fine-tunes do that); anything else is not a call.
#include "runtime/serve/tool_parser.h"

namespace spk::rt {

namespace {

using ojson = nlohmann::ordered_json;
constexpr std::string_view kClose = "</tool_call>";

class HermesFormat : public ToolFormat {
 public:
  [[nodiscard]] std::string_view open_marker() const override { return "<tool_call>"; }
  [[nodiscard]] ScanStep scan(std::string_view inner, const ToolSchemas&) const override {
    ScanStep st;
    const size_t close = inner.find(kClose);
    if (close == std::string_view::npos) return st;
    st.used = close + kClose.size();
    st.closes_block = true;
    st.kind = ScanStep::invalid;
    const ojson j = ojson::parse(toolfmt::trim(inner.substr(0, close)), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string() ||
        j["name"].get<std::string>().empty())
      return st;
    ojson args = j.contains("arguments") ? j["arguments"] : ojson::object();
    if (args.is_string()) args = ojson::parse(args.get<std::string>(), nullptr, false);
    auto text = toolfmt::object_text(args);
    if (!text) return st;
    st.kind = ScanStep::call;
    st.name = j["name"].get<std::string>();
    st.arguments = std::move(*text);
    return st;
  }
};

}  // namespace

std::unique_ptr<ToolFormat> make_hermes_format() { return std::make_unique<HermesFormat>(); }

}  // namespace spk::rt
