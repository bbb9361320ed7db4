#include "fabric/rtnetlink.h"

#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spk::fabric {
namespace {

// Builds one netlink message: header, fixed payload struct, then attributes (each 4-byte aligned).
class Msg {
 public:
  Msg(uint16_t type, uint16_t flags, const void* body, size_t len) {
    buf_.resize(NLMSG_HDRLEN);
    append(body, len);
    hdr()->nlmsg_type = type;
    hdr()->nlmsg_flags = NLM_F_REQUEST | flags;
  }
  void attr(uint16_t type, const void* data, size_t len) {
    rtattr a{};
    a.rta_len = uint16_t(RTA_LENGTH(len));
    a.rta_type = type;
    append(&a, sizeof a);
    append(data, len);
  }
  std::vector<char> done() {
    hdr()->nlmsg_len = uint32_t(buf_.size());
    return std::move(buf_);
  }

 private:
  nlmsghdr* hdr() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }
  void append(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    buf_.insert(buf_.end(), c, c + n);
    buf_.resize(NLMSG_ALIGN(buf_.size()), 0);
  }
  std::vector<char> buf_;
};

// RFC 2863 operstates as in linux/if.h (IF_OPER_*), spelled out: linux/if.h clashes with net/if.h.
std::string operstate_name(uint8_t s) {
  static const char* const names[] = {"unknown", "notpresent", "down", "lowerlayerdown",
                                      "testing", "dormant",    "up"};
  return s < 7 ? names[s] : "unknown";
}

LinkInfo parse_link(const nlmsghdr* h) {
  LinkInfo li;
  auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(h));
  li.index = ifi->ifi_index;
  li.admin_up = (ifi->ifi_flags & IFF_UP) != 0;
  int len = int(h->nlmsg_len) - int(NLMSG_LENGTH(sizeof *ifi));
  for (auto* a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == IFLA_IFNAME) li.name = static_cast<const char*>(RTA_DATA(a));
    if (a->rta_type == IFLA_MTU) std::memcpy(&li.mtu, RTA_DATA(a), sizeof li.mtu);
    if (a->rta_type == IFLA_OPERSTATE)
      li.operstate = operstate_name(*static_cast<const uint8_t*>(RTA_DATA(a)));
  }
  return li;
}

Error errno_error(const std::string& what, int err) {
  std::string fix = err == EPERM || err == EACCES ? "run as root on the node (CAP_NET_ADMIN is needed)" : "";
  return make_error(what + ": " + std::strerror(err), fix, err == EBUSY || err == EAGAIN);
}

}  // namespace

Result<Rtnl> Rtnl::open() {
  int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return errno_error("cannot open a NETLINK_ROUTE socket", errno);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    int e = errno;
    ::close(fd);
    return errno_error("cannot bind a NETLINK_ROUTE socket", e);
  }
  timeval tv{5, 0};  // a kernel that does not answer in 5 s is broken; do not hang the verb
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return Rtnl(fd);
}

Rtnl::~Rtnl() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::vector<std::vector<char>>> Rtnl::transact(std::vector<char> msg, const char* what) {
  auto* h = reinterpret_cast<nlmsghdr*>(msg.data());
  const unsigned seq = seq_++;
  h->nlmsg_seq = seq;
  const bool dump = (h->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
  if (!dump) h->nlmsg_flags |= NLM_F_ACK;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd_, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return errno_error(std::string(what) + ": netlink send failed", errno);
  std::vector<std::vector<char>> replies;
  std::vector<char> buf(64 * 1024);
  for (;;) {
    ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(std::string(what) + ": netlink receive failed", errno);
    }
    int len = int(n);
    for (auto* r = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(r, len); r = NLMSG_NEXT(r, len)) {
      if (r->nlmsg_seq != seq) continue;  // a stale answer to an earlier request
      if (r->nlmsg_type == NLMSG_DONE) return replies;
      if (r->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(r));
        if (e->error == 0) return replies;  // the ACK
        return errno_error(what, -e->error);
      }
      const char* p = reinterpret_cast<const char*>(r);
      replies.emplace_back(p, p + r->nlmsg_len);
    }
  }
}

Result<std::vector<LinkInfo>> Rtnl::links() {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  SPK_ASSIGN(auto replies, transact(Msg(RTM_GETLINK, NLM_F_DUMP, &ifi, sizeof ifi).done(), "list links"));
  std::vector<LinkInfo> out;
  for (auto& r : replies) {
    auto* h = reinterpret_cast<const nlmsghdr*>(r.data());
    if (h->nlmsg_type == RTM_NEWLINK) out.push_back(parse_link(h));
  }
  return out;
}

Result<LinkInfo> Rtnl::link(const std::string& ifname) {
  SPK_ASSIGN(auto all, links());
  for (auto& l : all)
    if (l.name == ifname) return l;
  std::string names;
  for (auto& l : all) names += (names.empty() ? "" : ", ") + l.name;
  return make_error("no network interface '" + ifname + "' (have: " + names + ")",
                    "pass the fabric netdev with --iface (see `sparkctl fabric show`)");
}

Result<std::vector<IfAddr>> Rtnl::addresses() {
  SPK_ASSIGN(auto all, links());
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET;
  SPK_ASSIGN(auto replies, transact(Msg(RTM_GETADDR, NLM_F_DUMP, &ifa, sizeof ifa).done(), "list addresses"));
  std::vector<IfAddr> out;
  for (auto& r : replies) {
    auto* h = reinterpret_cast<const nlmsghdr*>(r.data());
    if (h->nlmsg_type != RTM_NEWADDR) continue;
    auto* m = static_cast<const ifaddrmsg*>(NLMSG_DATA(h));
    if (m->ifa_family != AF_INET) continue;
    uint32_t local = 0, address = 0;
    bool have_local = false, have_address = false;
    int len = int(h->nlmsg_len) - int(NLMSG_LENGTH(sizeof *m));
    for (auto* a = IFA_RTA(m); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
      if (a->rta_type == IFA_LOCAL) std::memcpy(&local, RTA_DATA(a), 4), have_local = true;
      if (a->rta_type == IFA_ADDRESS) std::memcpy(&address, RTA_DATA(a), 4), have_address = true;
    }
    if (!have_local && !have_address) continue;
    IfAddr ia;
    for (auto& l : all)
      if (l.index == int(m->ifa_index)) ia.ifname = l.name;
    ia.cidr = Cidr{ntohl(have_local ? local : address), m->ifa_prefixlen}.str();
    out.push_back(std::move(ia));
  }
  return out;
}

Status Rtnl::add_address(int ifindex, const Cidr& cidr) {
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET;
  ifa.ifa_prefixlen = uint8_t(cidr.prefix);
  ifa.ifa_index = uint32_t(ifindex);
  ifa.ifa_scope = RT_SCOPE_UNIVERSE;
  Msg m(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof ifa);
  const uint32_t be = htonl(cidr.addr);
  m.attr(IFA_LOCAL, &be, 4);
  m.attr(IFA_ADDRESS, &be, 4);
  if (cidr.prefix < 31) {
    const uint32_t bcast = htonl(cidr.addr | (cidr.prefix == 0 ? ~0u : (~0u >> cidr.prefix)));
    m.attr(IFA_BROADCAST, &bcast, 4);
  }
  SPK_TRY(transact(m.done(), ("add " + cidr.str()).c_str()));
  return ok_status();
}

Status Rtnl::set_mtu(int ifindex, int mtu) {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  Msg m(RTM_NEWLINK, 0, &ifi, sizeof ifi);
  const uint32_t v = uint32_t(mtu);
  m.attr(IFLA_MTU, &v, 4);
  SPK_TRY(transact(m.done(), ("set mtu " + std::to_string(mtu)).c_str()));
  return ok_status();
}

Status Rtnl::set_up(int ifindex) {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  ifi.ifi_flags = IFF_UP;
  ifi.ifi_change = IFF_UP;
  SPK_TRY(transact(Msg(RTM_NEWLINK, 0, &ifi, sizeof ifi).done(), "set link up"));
  return ok_status();
}

}  // namespace spk::fabric
