#include "fabric/doctor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "fabric/df_ping.h"
#include "fabric/gid_choice.h"
#include "fabric/ipv4.h"
#include "fabric/nccl_probe.h"
#include "fabric/tcp_bandwidth.h"

namespace spk::fabric {
namespace {

const std::set<std::string> kChecks = {"ip", "mtu", "rdma", "nccl", "ping", "bw"};

struct Doctor {
  const DoctorRequest& req;
  const NetView& net;
  DoctorResult res;

  void add(std::string check, bool ok, std::string message, std::string fix = {}) {
    res.findings.push_back({std::move(check), ok, std::move(message), ok ? std::string() : std::move(fix)});
    res.ok = res.ok && ok;
  }
  void add(const std::string& check, const Error& e) { add(check, false, e.message, e.fix); }
  bool on(const std::string& c) const {
    return std::find(req.skip.begin(), req.skip.end(), c) == req.skip.end();
  }
};

// NCCL_IB_HCA grammar: optional '^' (exclude) or '=' (exact) prefix, comma list, optional ":port".
std::vector<std::string> hca_names(const std::string& v, bool* exclude) {
  std::string s = v;
  *exclude = !s.empty() && s[0] == '^';
  if (!s.empty() && (s[0] == '^' || s[0] == '=')) s = s.substr(1);
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item.substr(0, item.find(':')));
  return out;
}

void check_rdma(Doctor& d, const Cidr& fab, std::string* iface) {
  const DoctorRequest& req = d.req;
  auto nf = discover({req.node, req.sysfs_root}, d.net);
  if (!nf.ok()) return d.add("rdma", nf.error());
  if (nf->devices.empty()) {
    d.res.verdict = kNoRdmaVerdict;
    return;
  }
  auto plan = choose_gids(*nf, {fab.str(), {}});
  if (!plan.ok()) return d.add("gid", plan.error());
  std::string chosen;
  for (auto& h : plan->hcas)
    chosen += (chosen.empty() ? "" : ", ") + h.device + " port " + std::to_string(h.port) + " index " +
              std::to_string(h.gid_index) + " (" + h.gid + ")";
  d.add("gid", true, nf->node + ": RoCE v2 GID " + chosen);
  if (iface->empty()) *iface = plan->netdev;
  if (!plan->indices_agree)
    d.add("gid", true, "halves use different GID indices: the env uses NCCL_IB_ADDR_RANGE=" + fab.network());
  if (req.expected_gid_index >= 0) {
    const int now = plan->hcas.front().gid_index;
    d.add("gid", now == req.expected_gid_index,
          nf->node + ": " + plan->hcas.front().device + " GID index is " + std::to_string(now) +
              ", the plan says " + std::to_string(req.expected_gid_index),
          "the table changed (reboot?): re-run `sparkctl plan` so NCCL_IB_GID_INDEX is resolved again");
  }
  for (auto& s : plan->skipped)
    d.add("halves", false,
          nf->node + ": " + s.device + " (other half of " + plan->hcas.front().device + ") " + s.reason +
              ": only ~100G usable",
          s.fix);
  if (plan->skipped.empty())
    d.add("halves", true,
          nf->node + ": " + std::to_string(plan->hcas.size()) + " device(s) usable: " + plan->hca_list());

  std::string hca = req.nccl_ib_hca;
  if (hca.empty())
    if (const char* e = std::getenv("NCCL_IB_HCA")) hca = e;
  if (hca.empty()) {
    d.add("nccl_ib_hca", true, "NCCL_IB_HCA unset here; sparkctl plan sets NCCL_IB_HCA=" + plan->hca_list());
  } else {
    bool exclude = false;
    auto names = hca_names(hca, &exclude);
    std::vector<std::string> missing;
    std::vector<std::string> all = {};
    for (auto& h : plan->hcas) all.push_back(h.device);
    for (auto& s : plan->skipped) all.push_back(s.device);
    for (auto& dev : all) {
      bool listed = std::find(names.begin(), names.end(), dev) != names.end();
      if (listed == exclude) missing.push_back(dev);
    }
    std::string miss;
    for (auto& m : missing) miss += (miss.empty() ? "" : ", ") + m;
    std::string want;
    for (auto& dev : all) want += (want.empty() ? "" : ",") + dev;
    d.add("nccl_ib_hca", missing.empty(),
          "NCCL_IB_HCA=" + hca +
              (missing.empty() ? " lists both halves" : " leaves out " + miss + ": ~100G only"),
          "set NCCL_IB_HCA=" + want + " (or leave it to sparkctl plan)");
  }
  for (auto& h : plan->hcas) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", h.rate_gbps);
    char want[32];
    std::snprintf(want, sizeof want, "%g", req.min_rate_gbps);
    d.add("rate", h.rate_gbps >= req.min_rate_gbps,
          h.device + " port " + std::to_string(h.port) + " rate " + rate + " Gb/s (want >= " + want + ")",
          "check the cable/transceiver and `ethtool " + h.netdev + "` (a half linking at reduced speed)");
  }
}

}  // namespace

Result<DoctorResult> run_doctor(const DoctorRequest& req, const NetView& net) {
  for (auto& s : req.skip)
    if (!kChecks.count(s))
      return make_error("unknown doctor check '" + s + "'",
                        "use one of ip, mtu, rdma, nccl, ping, bw with --skip");
  Doctor d{req, net, {}};
  d.res.node = req.node;
  Cidr fab;
  const bool have_fab = !req.fabric_cidr.empty();
  if (have_fab) {
    SPK_ASSIGN(fab, parse_cidr(req.fabric_cidr));
  }
  for (auto& p : req.peers) SPK_TRY(parse_ipv4(p));

  std::string iface = req.iface;
  if (d.on("rdma")) {
    if (have_fab) {
      check_rdma(d, fab, &iface);
    } else if (auto nf = discover({req.node, req.sysfs_root}, net); nf.ok() && nf->devices.empty()) {
      d.res.verdict = kNoRdmaVerdict;
    } else {
      d.add("rdma", false, "no fabric IP given: cannot resolve the GID",
            "pass --ip CIDR, or --cluster FILE whose node has fabric.ip");
    }
  }
  // No RDMA device and no --iface: no fabric netdev to look at; the verdict says why.
  if (iface.empty() && (d.on("ip") || d.on("mtu")) && d.res.verdict.empty())
    d.add("iface", false, "no fabric netdev known", "pass --iface NAME (see `sparkctl fabric show`)");

  if (!iface.empty() && d.on("ip") && have_fab) {
    auto addrs = net.addresses_of(iface);
    if (!addrs.ok()) {
      d.add("ip", addrs.error());
    } else {
      bool exact = std::find(addrs->begin(), addrs->end(), fab.str()) != addrs->end();
      std::string have;
      for (auto& a : *addrs) have += (have.empty() ? "" : ", ") + a;
      d.add(
          "ip", exact,
          iface + " has " + (have.empty() ? "no IPv4 address" : have) + (exact ? "" : ", wants " + fab.str()),
          "run `sparkctl fabric setup --iface " + iface + " --ip " + fab.str() + "` as root");
    }
  }
  if (!iface.empty() && d.on("mtu")) {
    auto li = net.link(iface);
    if (!li.ok()) {
      d.add("mtu", li.error());
    } else {
      // Above the asked MTU is fine (jumbo frames of 9216 carry 9000-byte ones); only below fails.
      d.add("mtu", li->mtu >= req.mtu,
            iface + " MTU " + std::to_string(li->mtu) +
                (li->mtu == req.mtu  ? ""
                 : li->mtu > req.mtu ? " (>= " + std::to_string(req.mtu) + " asked)"
                                     : ", wants " + std::to_string(req.mtu)),
            "run `sparkctl fabric setup --iface " + iface + " --mtu " + std::to_string(req.mtu) +
                "` (a reboot resets it to 1500)");
      const bool up = li->admin_up && (li->operstate == "up" || li->operstate == "unknown");
      d.add("link", up,
            iface + " is " + (li->admin_up ? "admin up" : "admin down") + ", operstate " + li->operstate,
            li->admin_up ? "check the cable and the peer's link"
                         : "run `sparkctl fabric setup --iface " + iface + "`");
    }
  }
  if (d.on("nccl")) {
    auto n = probe_nccl();
    if (n.ok())
      d.add("nccl", true, "NCCL " + n->version + " loaded from " + n->path);
    else
      d.add("nccl", n.error());
  }
  for (auto& peer : req.peers) {
    if (d.on("ping")) {
      auto rtt = df_ping({peer, req.mtu, 3, 1000});
      if (rtt.ok()) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "DF ping of %d bytes (payload %d) to %s: reply in %.3f ms", req.mtu,
                      req.mtu - 28, peer.c_str(), *rtt);
        d.add("ping", true, buf);
      } else {
        d.add("ping", rtt.error());
      }
    }
    if (d.on("bw")) {
      auto bw = bw_client(peer, req.bw_port, req.bw_bytes, req.bw_seconds);
      if (bw.ok()) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "TCP to %s: %.2f Gbit/s (%.0f MiB in %.2f s)", peer.c_str(),
                      bw->gbit_per_s, double(bw->bytes) / (1 << 20), bw->seconds);
        d.add("bw", true, buf);
      } else {
        d.add("bw", bw.error());
      }
    }
  }
  return d.res;
}

}  // namespace spk::fabric
