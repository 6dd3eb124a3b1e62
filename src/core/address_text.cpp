#include "core/address_text.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/wire.hpp"
#include "verbs/wire_format.hpp"

namespace fabric {

namespace {

std::string ip_text(int family, const void* raw) {
  char text[INET6_ADDRSTRLEN] = {};
  return ::inet_ntop(family, raw, text, sizeof text) != nullptr ? text : "?";
}

// A sockaddr_in or sockaddr_in6, as libfabric's IP providers name endpoints.
std::string sockaddr_text(std::span<const std::byte> a) {
  sa_family_t family = 0;
  if (a.size() < sizeof family) return {};
  std::memcpy(&family, a.data(), sizeof family);
  if (family == AF_INET && a.size() >= sizeof(sockaddr_in)) {
    sockaddr_in sa{};
    std::memcpy(&sa, a.data(), sizeof sa);
    return fmt::format("{}:{}", ip_text(AF_INET, &sa.sin_addr), ntohs(sa.sin_port));
  }
  if (family == AF_INET6 && a.size() >= sizeof(sockaddr_in6)) {
    sockaddr_in6 sa{};
    std::memcpy(&sa, a.data(), sizeof sa);
    return fmt::format("[{}]:{}", ip_text(AF_INET6, &sa.sin6_addr), ntohs(sa.sin6_port));
  }
  return {};
}

// A NUL-terminated printable name (shm's "fi_shm://pid/name").
std::string name_text(std::span<const std::byte> a) {
  const auto end = std::find(a.begin(), a.end(), std::byte{0});
  const std::size_t len = static_cast<std::size_t>(end - a.begin());
  if (len < 4) return {};
  const bool printable = std::all_of(a.begin(), end, [](std::byte b) {
    return std::to_integer<int>(b) >= 0x20 && std::to_integer<int>(b) < 0x7f;
  });
  return printable ? std::string(reinterpret_cast<const char*>(a.data()), len) : std::string();
}

}  // namespace

std::string describe_domain_address(Backend backend, std::span<const std::byte> address) {
  if (backend == Backend::verbs) {
    if (auto v = verbs::VerbsAddress::decode(address)) {
      return fmt::format("gid {} qpn {:#x}", ip_text(AF_INET6, v->gid.data()), v->ud_qpn);
    }
  }
  if (std::string ip = sockaddr_text(address); !ip.empty()) return ip;
  if (std::string name = name_text(address); !name.empty()) return name;
  constexpr std::size_t kShown = 8;
  const std::string head = wire::to_hex(address.first(std::min(address.size(), kShown)));
  return address.size() > kShown ? fmt::format("{}.. ({} B)", head, address.size()) : head;
}

}  // namespace fabric
