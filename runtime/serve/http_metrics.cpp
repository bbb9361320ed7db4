#include "runtime/serve/http_metrics.h"

namespace spk::rt {

std::string store_metrics(const ResponseStoreStats& s) {
  std::string o;
  auto metric = [&o](const char* name, const char* type, const char* help, uint64_t v) {
    o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         std::to_string(v) + "\n";
  };
  metric("sparkctl_responses_stored", "gauge", "Responses kept for previous_response_id and GET.", s.entries);
  metric("sparkctl_responses_stored_bytes", "gauge", "Serialised bytes of the responses kept.", s.bytes);
  metric("sparkctl_responses_store_max_bytes", "gauge", "The store's byte budget.", s.max_bytes);
  metric("sparkctl_responses_evicted_total", "counter", "Stored responses evicted to make room.", s.evicted);
  metric("sparkctl_responses_not_stored_total", "counter",
         "Responses with store: true not kept, larger than the whole byte budget alone.", s.refused);
  return o;
}

std::string front_metrics(const FrontStats& s) {
  std::string o =
      "# HELP sparkctl_connections_evicted_total Waiting connections closed to admit a newer one "
      "(reason: connection_cap = --http-max-connections reached, peer_limit = its client IP held "
      "--http-max-connections-per-peer).\n# TYPE sparkctl_connections_evicted_total counter\n";
  o +=
      "sparkctl_connections_evicted_total{reason=\"connection_cap\"} " + std::to_string(s.evicted_cap) + "\n";
  o += "sparkctl_connections_evicted_total{reason=\"peer_limit\"} " + std::to_string(s.evicted_peer) + "\n";
  o += "# HELP sparkctl_connections_refused_total New connections closed at once: at a limit with no waiting "
       "connection to close.\n# TYPE sparkctl_connections_refused_total counter\n";
  o += "sparkctl_connections_refused_total " + std::to_string(s.refused) + "\n";
  o += "# HELP sparkctl_connections_waiting Connections the front holds (waiting for or reading a "
       "request).\n# TYPE sparkctl_connections_waiting gauge\n";
  o += "sparkctl_connections_waiting " + std::to_string(s.connections) + "\n";
  return o;
}

}  // namespace spk::rt
