// `fabric doctor` on one node: every check becomes a Finding with the value seen and the fix. The
// exit code of the verb is "all findings ok". Checks (names usable in `skip`):
//   ip     the fabric IP/CIDR is on the fabric netdev           mtu    netdev MTU >= wanted, link up
//   rdma   GID choice (per node), GID drift against a plan, both CX7 halves usable and listed in
//          NCCL_IB_HCA, port rate >= min_rate_gbps
//   nccl   libnccl.so.2 loads and ncclGetVersion answers        ping   DF ping at MTU-28 to each peer
//   bw     TCP bandwidth to each peer's `fabric bw-serve` (1 GiB or 2 s, whichever first)
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "fabric/net_view.h"

namespace spk::fabric {

struct DoctorRequest {
  std::string node;
  std::string sysfs_root = "/sys";
  std::string iface;        // fabric netdev; empty = the primary RDMA device's netdev
  std::string fabric_cidr;  // "192.168.100.1/24"; empty = skip ip and rdma checks that need it
  int mtu = 9000;
  std::vector<std::string> peers;  // other nodes' fabric IPv4s
  int bw_port = 29610;
  double bw_seconds = 2.0;
  uint64_t bw_bytes = 1ull << 30;
  double min_rate_gbps = 100;     // per device; a CX7 half is ~100G
  int expected_gid_index = -1;    // from an earlier plan; -1 = no drift check
  std::string nccl_ib_hca;        // what the launch env says; empty = $NCCL_IB_HCA, unset = not checked
  std::vector<std::string> skip;  // check names to leave out
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DoctorRequest, node, sysfs_root, iface, fabric_cidr, mtu,
                                                peers, bw_port, bw_seconds, bw_bytes, min_rate_gbps,
                                                expected_gid_index, nccl_ib_hca, skip)

struct Finding {
  std::string check;  // "mtu"
  bool ok = false;
  std::string message;  // what was seen, with the value
  std::string fix;      // empty when ok
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Finding, check, ok, message, fix)

// The one-line answer for a node without any RDMA device (a plain VM or server NIC): not a failure of
// the node, a fact about what TP across nodes would run on.
inline constexpr const char* kNoRdmaVerdict = "no RDMA NIC: TP across nodes would use Gloo/TCP";

struct DoctorResult {
  std::string node;
  std::vector<Finding> findings;
  bool ok = true;       // every finding ok
  std::string verdict;  // kNoRdmaVerdict when the node has no RDMA device; empty otherwise
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DoctorResult, node, findings, ok, verdict)

// A node with no RDMA device gets no rdma findings (nothing to check) but `verdict`; ip/mtu still run on
// --iface. Runs the checks in the calling thread's network namespace. Failures are findings, not errors; an
// error is returned only for a malformed request (bad CIDR, unknown check name).
Result<DoctorResult> run_doctor(const DoctorRequest& req, const NetView& net);

}  // namespace spk::fabric
