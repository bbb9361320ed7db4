#include "orchestrator/node/fabric_verbs.h"

#include <cstdlib>
#include <string>

#include "fabric/doctor.h"
#include "fabric/node_api.h"

namespace spk {

namespace {

using nlohmann::json;

// $SPARKCTL_SYSFS_ROOT fills a missing sysfs_root; an explicit one in the request wins.
void default_sysfs_root(json& obj) {
  const char* root = std::getenv("SPARKCTL_SYSFS_ROOT");
  if (!root || !*root || !obj.is_object() || obj.contains("sysfs_root")) return;
  obj["sysfs_root"] = root;
}

}  // namespace

VerbOutput run_fabric_verb(NodeVerb verb, const json& in) {
  json req = in;
  if (verb == NodeVerb::kFabricEnv) {
    if (!req.contains("discover")) req["discover"] = json::object();
    default_sysfs_root(req["discover"]);
  } else if (verb == NodeVerb::kFabricDoctor) {
    default_sysfs_root(req);
  }
  const std::string name(node_verb_name(verb));
  if (verb == NodeVerb::kFabricEnv) {  // no RDMA device: a fact about the node, not a failure
    json show = req["discover"];
    if (req.contains("addresses")) show["addresses"] = req["addresses"];
    auto nf = fabric::run_node_request("fabric-show", show);
    if (nf.ok() && nf->value("devices", json::array()).empty())
      return {kNodeOk,
              json{{"ok", true}, {"node", nf->value("node", "")}, {"verdict", fabric::kNoRdmaVerdict}}};
  }
  auto r = fabric::run_node_request(name, req);
  if (!r.ok())
    return {kNodeCheckFailed, json{{"ok", false}, {"error", r.error().message}, {"fix", r.error().fix}}};
  json body = *r;
  bool ok = true;
  if (verb == NodeVerb::kFabricDoctor) ok = body.value("ok", false);
  body["ok"] = ok;
  return {ok ? kNodeOk : kNodeCheckFailed, body};
}

}  // namespace spk
