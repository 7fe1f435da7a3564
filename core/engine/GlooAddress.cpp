#include "core/engine/GlooAddress.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace stagescope::engine {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::string numeric(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

// The first address of `host` (numeric), or "".
std::string resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return "";
  std::string out = numeric(res->ai_addr);
  freeaddrinfo(res);
  return out;
}

// The local address the kernel picks to reach host:port (a UDP connect sends nothing).
std::string routeTo(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port > 0 ? port : 9);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || res == nullptr) return "";
  std::string out;
  for (addrinfo* ai = res; ai != nullptr && out.empty(); ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0)
      out = numeric(reinterpret_cast<sockaddr*>(&local));
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

// The first IPv4 (else IPv6) address of interface `name`, or "".
std::string interfaceAddress(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string v4, v6;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || name != i->ifa_name) continue;
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) v4 = numeric(i->ifa_addr);
    if (i->ifa_addr->sa_family == AF_INET6 && v6.empty()) v6 = numeric(i->ifa_addr);
  }
  freeifaddrs(list);
  return v4.empty() ? v6 : v4;
}

}  // namespace

bool isLoopbackAddress(const std::string& a) {
  return a == "localhost" || a == "::1" || a.rfind("127.", 0) == 0;
}

std::string GlooAddress::describe() const {
  switch (source) {
    case Source::Override:
      return value + " (STAGESCOPE_GLOO_HOST)";
    case Source::Interface:
      return value + " = " + (address.empty() ? "?" : address) + " (GLOO_SOCKET_IFNAME)";
    case Source::RouteToMaster:
      return value + " (route to MASTER_ADDR)";
    case Source::Hostname:
      return value + " = " + (address.empty() ? "?" : address) + " (host name)";
  }
  return value;
}

std::string resolveProblem(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (res != nullptr) freeaddrinfo(res);
  if (rc == 0) return "";
  return rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc);
}

GlooAddress chooseGlooAddress(const std::string& masterAddr, int masterPort) {
  GlooAddress g;
  if (const char* host = env("STAGESCOPE_GLOO_HOST")) {
    g.source = GlooAddress::Source::Override;
    g.value = host;
    g.address = resolve(host);
  } else if (const char* ifs = env("GLOO_SOCKET_IFNAME")) {
    g.source = GlooAddress::Source::Interface;
    g.value = std::string(ifs).substr(0, std::string(ifs).find(','));
    g.address = interfaceAddress(g.value);
  } else if (std::string route = routeTo(masterAddr, masterPort); !route.empty()) {
    g.source = GlooAddress::Source::RouteToMaster;
    g.value = g.address = route;
  } else {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    g.source = GlooAddress::Source::Hostname;
    g.value = name;
    g.address = resolve(name);
  }
  g.loopback = isLoopbackAddress(g.address.empty() ? g.value : g.address);
  return g;
}

}  // namespace stagescope::engine
