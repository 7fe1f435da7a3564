// Which local address a rank advertises to its Gloo peers, found without configuration the
// way torch does, in this order:
//   1. STAGESCOPE_GLOO_HOST (a host name or address): an explicit override;
//   2. GLOO_SOCKET_IFNAME (torch's variable; the first interface of a comma-separated list);
//   3. the local address of the route to MASTER_ADDR (what the kernel would use to reach the
//      store host: the right interface on a multi-homed host, loopback on a one-host run);
//   4. this host's name, resolved.
// Torch-free (POSIX sockets only).
#pragma once

#include <string>

namespace stagescope::engine {

struct GlooAddress {
  enum class Source { Override, Interface, RouteToMaster, Hostname };
  Source source = Source::RouteToMaster;
  std::string value;    // a host name or address; for Interface, the interface name
  std::string address;  // the numeric address it stands for ("" when unknown)
  bool loopback = false;
  // "10.0.0.2 (route to MASTER_ADDR)", "eth1 = 10.0.0.2 (GLOO_SOCKET_IFNAME)", ...
  std::string describe() const;
};

GlooAddress chooseGlooAddress(const std::string& masterAddr, int masterPort);

// Why `host` does not resolve to an address ("Name or service not known"), or "" when it does.
std::string resolveProblem(const std::string& host);

// True for 127.0.0.0/8, ::1 and "localhost".
bool isLoopbackAddress(const std::string& address);

}  // namespace stagescope::engine
