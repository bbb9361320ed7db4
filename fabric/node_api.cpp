#include "fabric/node_api.h"

#include "fabric/doctor.h"
#include "fabric/fabric_env.h"
#include "fabric/link_setup.h"

namespace spk::fabric {
namespace {

Result<std::unique_ptr<NetView>> view_for(const nlohmann::json& request) {
  if (!request.contains("addresses")) return kernel_net_view();
  SPK_ASSIGN(auto v, StaticNetView::from_json(request.at("addresses")));
  return std::unique_ptr<NetView>(std::make_unique<StaticNetView>(std::move(v)));
}

template <class T>
Result<T> parse(const nlohmann::json& j, const std::string& verb) {
  try {
    return j.get<T>();
  } catch (const nlohmann::json::exception& e) {
    return make_error(verb + ": bad request: " + e.what(),
                      "send the request fields documented in fabric/node_api.h");
  }
}

}  // namespace

Result<nlohmann::json> run_node_request(const std::string& verb, const nlohmann::json& request) {
  if (!request.is_object()) return make_error(verb + ": request is not a JSON object", "send {\"...\": ...}");
  SPK_ASSIGN(auto net, view_for(request));
  if (verb == "fabric-show") {
    SPK_ASSIGN(auto req, parse<DiscoverRequest>(request, verb));
    SPK_ASSIGN(auto nf, discover(req, *net));
    return nlohmann::json(nf);
  }
  if (verb == "fabric-env") {
    SPK_ASSIGN(auto dreq, parse<DiscoverRequest>(request.value("discover", nlohmann::json::object()), verb));
    SPK_ASSIGN(auto ereq, parse<EnvRequest>(request.value("env", nlohmann::json::object()), verb));
    SPK_ASSIGN(auto nf, discover(dreq, *net));
    SPK_ASSIGN(auto env, fabric_env(nf, ereq));
    return nlohmann::json(env);
  }
  if (verb == "fabric-setup") {
    SPK_ASSIGN(auto req, parse<SetupRequest>(request, verb));
    SPK_ASSIGN(auto res, setup_links(req));
    return nlohmann::json(res);
  }
  if (verb == "fabric-doctor") {
    SPK_ASSIGN(auto req, parse<DoctorRequest>(request, verb));
    SPK_ASSIGN(auto res, run_doctor(req, *net));
    return nlohmann::json(res);
  }
  return make_error("unknown fabric node verb '" + verb + "'",
                    "use fabric-show, fabric-env, fabric-setup or fabric-doctor");
}

}  // namespace spk::fabric
