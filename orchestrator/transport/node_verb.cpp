#include "orchestrator/transport/node_verb.h"

#include <array>
#include <utility>

namespace spk {

namespace {
constexpr std::array<std::pair<NodeVerb, std::string_view>, 14> kVerbs{{
    {NodeVerb::kVersion, "version"},
    {NodeVerb::kEcho, "echo"},
    {NodeVerb::kFacts, "facts"},
    {NodeVerb::kPreflight, "preflight"},
    {NodeVerb::kClean, "clean"},
    {NodeVerb::kLaunch, "launch"},
    {NodeVerb::kStop, "stop"},
    {NodeVerb::kPs, "ps"},
    {NodeVerb::kLogTail, "log-tail"},
    {NodeVerb::kStageRecv, "stage-recv"},
    {NodeVerb::kStageVerify, "stage-verify"},
    {NodeVerb::kFabricDoctor, "fabric-doctor"},
    {NodeVerb::kFabricSetup, "fabric-setup"},
    {NodeVerb::kFabricEnv, "fabric-env"},
}};
}  // namespace

std::string_view node_verb_name(NodeVerb verb) {
  for (const auto& [v, name] : kVerbs)
    if (v == verb) return name;
  return "version";  // unreachable: every enumerator is in the table
}

std::optional<NodeVerb> parse_node_verb(std::string_view name) {
  for (const auto& [v, n] : kVerbs)
    if (n == name) return v;
  return std::nullopt;
}

}  // namespace spk
