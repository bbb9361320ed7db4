// The compiled-in allowlist of node verbs. The head runs exactly `<sparkctl> node <verb>` on a node, where
// <verb> is one of these names: never a string taken from a recipe, an inventory or a user.
#pragma once

#include <optional>
#include <string_view>

namespace spk {

enum class NodeVerb {
  kVersion,
  kEcho,
  kFacts,
  kPreflight,
  kClean,
  kLaunch,
  kStop,
  kPs,
  kLogTail,
  kStageRecv,
  kStageVerify,
  kFabricDoctor,
  kFabricSetup,
  kFabricEnv
};

// "version", "echo", "facts", "preflight", "clean", "launch", "stop", "ps", "log-tail", "stage-recv",
// "stage-verify", "fabric-doctor", "fabric-setup", "fabric-env".
std::string_view node_verb_name(NodeVerb verb);

// Inverse of node_verb_name; nullopt for anything outside the allowlist.
std::optional<NodeVerb> parse_node_verb(std::string_view name);

}  // namespace spk
