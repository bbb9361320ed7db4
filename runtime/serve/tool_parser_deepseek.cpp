// deepseek_v3 and deepseek_v31: several calls per block between <｜tool▁calls▁begin｜> and
// <｜tool▁calls▁end｜>, each <｜tool▁call▁begin｜> ... <｜tool▁call▁end｜>:
//   V3 / R1:  function<｜tool▁sep｜>NAME\n```json\n{...}\n```      (DeepSeek-V3's chat template)
//   V3.1:     NAME<｜tool▁sep｜>{...}
// The arguments must be one JSON object (a ```json fence around it is accepted in both). DeepSeek-V3's
// template writes no calls_end after a single call: the block then ends with the output, and every call
// that completed before counts.
#include "runtime/serve/tool_parser.h"

namespace spk::rt {

namespace {

using ojson = nlohmann::ordered_json;
constexpr std::string_view kBlockOpen = "<｜tool▁calls▁begin｜>", kBlockClose = "<｜tool▁calls▁end｜>",
                           kOpen = "<｜tool▁call▁begin｜>", kClose = "<｜tool▁call▁end｜>",
                           kSep = "<｜tool▁sep｜>";

bool arguments(std::string_view a, ScanStep& st) {
  a = toolfmt::trim(a);
  constexpr std::string_view kFence = "```json", kFenceEnd = "```";
  if (a.substr(0, kFence.size()) == kFence) {
    if (a.size() < kFence.size() + kFenceEnd.size() || a.substr(a.size() - kFenceEnd.size()) != kFenceEnd)
      return false;
    a = toolfmt::trim(a.substr(kFence.size(), a.size() - kFence.size() - kFenceEnd.size()));
  }
  auto text = toolfmt::object_text(ojson::parse(a, nullptr, /*allow_exceptions=*/false));
  if (!text) return false;
  st.arguments = std::move(*text);
  return true;
}

class DeepseekFormat : public ToolFormat {
 public:
  explicit DeepseekFormat(bool v31) : v31_(v31) {}
  [[nodiscard]] std::string_view open_marker() const override { return kBlockOpen; }
  [[nodiscard]] ScanStep scan(std::string_view inner, const ToolSchemas&) const override {
    return toolfmt::scan_units(inner, kOpen, kClose, kBlockClose,
                               [this](std::string_view body, ScanStep& st) {
                                 const size_t sep = body.find(kSep);
                                 if (sep == std::string_view::npos) return false;
                                 std::string_view rest = body.substr(sep + kSep.size());
                                 if (v31_) {
                                   st.name = std::string(toolfmt::trim(body.substr(0, sep)));
                                 } else {
                                   if (toolfmt::trim(body.substr(0, sep)) != "function") return false;
                                   const size_t nl = rest.find('\n');
                                   if (nl == std::string_view::npos) return false;
                                   st.name = std::string(toolfmt::trim(rest.substr(0, nl)));
                                   rest = rest.substr(nl + 1);
                                 }
                                 return !st.name.empty() && arguments(rest, st);
                               });
  }

 private:
  bool v31_;
};

}  // namespace

std::unique_ptr<ToolFormat> make_deepseek_v3_format() { return std::make_unique<DeepseekFormat>(false); }
std::unique_ptr<ToolFormat> make_deepseek_v31_format() { return std::make_unique<DeepseekFormat>(true); }

}  // namespace spk::rt
