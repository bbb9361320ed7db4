// A raw NETLINK_ROUTE socket: the few rtnetlink requests fabric setup and the kernel NetView need.
// Written against linux/rtnetlink.h; every request asks for an ACK so errors come back as errno values.
// Acts in the network namespace of the thread that opened it. Changing links/addresses needs CAP_NET_ADMIN.
#pragma once

#include <vector>

#include "fabric/ipv4.h"
#include "fabric/net_view.h"

namespace spk::fabric {

class Rtnl {
 public:
  static Result<Rtnl> open();
  Rtnl(Rtnl&& o) noexcept : fd_(o.fd_), seq_(o.seq_) { o.fd_ = -1; }
  Rtnl& operator=(Rtnl&&) = delete;
  ~Rtnl();

  Result<std::vector<LinkInfo>> links();
  Result<LinkInfo> link(const std::string& ifname);
  Result<std::vector<IfAddr>> addresses();  // IPv4 only

  Status add_address(int ifindex, const Cidr& cidr);  // RTM_NEWADDR, IFA_LOCAL+IFA_ADDRESS(+broadcast)
  Status set_mtu(int ifindex, int mtu);               // RTM_NEWLINK with IFLA_MTU
  Status set_up(int ifindex);                         // RTM_NEWLINK, ifi_change = IFF_UP

 private:
  explicit Rtnl(int fd) : fd_(fd) {}
  // Sends one request; collects every reply message until DONE/ACK. Error carries the kernel errno.
  Result<std::vector<std::vector<char>>> transact(std::vector<char> msg, const char* what);

  int fd_ = -1;
  unsigned seq_ = 1;
};

}  // namespace spk::fabric
