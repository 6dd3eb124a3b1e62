#include "verbs/device.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "common/log.hpp"
#include "verbs/verbs_error.hpp"

namespace fabric::verbs {

namespace {

double lane_gbps(std::uint8_t speed) {
  switch (speed) {
    case 1: return 2.5;
    case 2: return 5.0;
    case 4:
    case 8: return 10.0;
    case 16: return 14.0;
    case 32: return 25.0;
    case 64: return 50.0;
    case 128: return 100.0;
    default: return 0;
  }
}

int lanes(std::uint8_t width) {
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

const char* gid_type_name(std::uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    default: return "unknown";
  }
}

bool ipv4_mapped(const ibv_gid& gid) {
  static constexpr std::uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, kPrefix, sizeof kPrefix) == 0;
}

bool zero_gid(const ibv_gid& gid) {
  static constexpr ibv_gid kZero{};
  return std::memcmp(gid.raw, kZero.raw, sizeof gid.raw) == 0;
}

// RoCE v2 routes over IP, so prefer it; an IPv4-mapped GID matches the
// address peers reach us by. InfiniBand ports use GID 0.
std::optional<ibv_gid_entry> pick_gid(ibv_context* ctx, std::uint8_t port,
                                      const ibv_port_attr& attr,
                                      std::optional<std::uint32_t> wanted) {
  std::optional<ibv_gid_entry> first_v2;
  std::optional<ibv_gid_entry> first_any;
  for (int i = 0; i < attr.gid_tbl_len; ++i) {
    const auto index = static_cast<std::uint32_t>(i);
    if (wanted && index != *wanted) continue;
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(ctx, port, index, &entry, 0) != 0) continue;
    if (zero_gid(entry.gid)) continue;
    if (wanted) return entry;
    if (attr.link_layer != IBV_LINK_LAYER_ETHERNET) return entry;
    if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 && ipv4_mapped(entry.gid)) return entry;
    if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 && !first_v2) first_v2 = entry;
    if (!first_any) first_any = entry;
  }
  if (first_v2) return first_v2;
  return first_any;
}

struct PortProbe {
  VerbsPortInfo info;
  std::optional<ibv_gid_entry> gid;
  ibv_port_attr attr{};
};

Result<PortProbe> probe_port(ibv_context* ctx, const char* name, std::uint8_t port,
                             std::optional<std::uint32_t> wanted_gid) {
  PortProbe probe;
  if (int rc = ibv_query_port(ctx, port, &probe.attr); rc != 0) {
    return verbs_error(fmt::format("ibv_query_port({} port {})", name, port), rc);
  }
  const ibv_port_attr& attr = probe.attr;
  VerbsPortInfo& info = probe.info;
  info.device = name;
  info.port = port;
  info.active = attr.state == IBV_PORT_ACTIVE;
  info.link_layer = attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
  info.active_mtu = mtu_bytes(attr.active_mtu);
  info.link_gbps = lanes(attr.active_width) * lane_gbps(attr.active_speed);
  info.lid = attr.lid;
  probe.gid = pick_gid(ctx, port, attr, wanted_gid);
  if (probe.gid) {
    info.gid_index = static_cast<int>(probe.gid->gid_index);
    info.gid = gid_text(probe.gid->gid);
    info.gid_type = gid_type_name(probe.gid->gid_type);
  }
  return probe;
}

Result<DeviceListPtr> device_list(int& count) {
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    const int err = errno;
    // No kernel support or no providers is "no devices", not a failure.
    if (err == ENOSYS || err == 0) {
      count = 0;
      return DeviceListPtr(nullptr);
    }
    return verbs_error("ibv_get_device_list", err);
  }
  return DeviceListPtr(list);
}

}  // namespace

Result<DeviceListPtr> device_list_for_query(int& count) { return device_list(count); }
Result<VerbsPortInfo> probe_port_for_query(ibv_context* ctx, const char* name, std::uint8_t port,
                                           std::optional<std::uint32_t> wanted_gid) {
  auto probe = probe_port(ctx, name, port, wanted_gid);
  if (!probe) return probe.status();
  return std::move(probe->info);
}

std::string gid_text(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, text, sizeof text);
  return text;
}

std::uint32_t mtu_bytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

Result<OpenedPort> open_port(const VerbsConfig& config, std::size_t domain_index) {
  int count = 0;
  auto list = device_list(count);
  if (!list) return list.status();
  struct Candidate {
    ibv_device* device;
    PortProbe probe;
  };
  std::vector<Candidate> candidates;
  std::string seen;
  for (int i = 0; i < count; ++i) {
    ibv_device* dev = list->get()[i];
    const char* name = ibv_get_device_name(dev);
    if (!config.device.empty() && config.device != name) continue;
    ContextPtr ctx(ibv_open_device(dev));
    if (!ctx) continue;
    auto probe = probe_port(ctx.get(), name, config.port, config.gid_index);
    if (!probe) continue;
    seen += fmt::format(" {}:{}({}{})", name, config.port, probe->info.active ? "active" : "down",
                        probe->gid ? "" : ", no usable GID");
    if (probe->info.active && probe->gid) candidates.push_back({dev, std::move(probe).value()});
  }
  if (candidates.empty()) {
    return Status(Errc::unsupported,
                  fmt::format("verbs: no active port {} with a usable GID{}{} (devices seen:{})",
                              config.port, config.device.empty() ? "" : " on device ",
                              config.device, seen.empty() ? " none" : seen));
  }
  Candidate& chosen = candidates[domain_index % candidates.size()];
  OpenedPort out;
  out.context.reset(ibv_open_device(chosen.device));
  if (!out.context) {
    const int err = errno;  // before formatting the device's name can change it
    return verbs_error(fmt::format("ibv_open_device({})", chosen.probe.info.device), err);
  }
  if (int rc = ibv_query_device(out.context.get(), &out.device_attr); rc != 0) {
    return verbs_error("ibv_query_device", rc);
  }
  out.info = chosen.probe.info;
  out.port = config.port;
  out.gid_index = chosen.probe.gid->gid_index;
  out.gid = chosen.probe.gid->gid;
  out.mtu = chosen.probe.attr.active_mtu;
  log::info("verbs: {} port {} GID[{}] {} ({}), MTU {}, {} Gbit/s", out.info.device, out.port,
            out.gid_index, out.info.gid, out.info.gid_type, out.info.active_mtu,
            out.info.link_gbps);
  return out;
}

}  // namespace fabric::verbs

namespace fabric {

Result<std::vector<VerbsPortInfo>> list_verbs_ports() {
  int count = 0;
  auto list = verbs::device_list_for_query(count);
  if (!list) return list.status();
  std::vector<VerbsPortInfo> out;
  for (int i = 0; i < count; ++i) {
    ibv_device* dev = list->get()[i];
    verbs::ContextPtr ctx(ibv_open_device(dev));
    if (!ctx) continue;
    ibv_device_attr attr{};
    if (ibv_query_device(ctx.get(), &attr) != 0) continue;
    for (std::uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
      auto probe = verbs::probe_port_for_query(ctx.get(), ibv_get_device_name(dev), p, std::nullopt);
      if (probe) out.push_back(std::move(probe).value());
    }
  }
  return out;
}

bool backend_available(Backend backend) {
  if (backend == Backend::libfabric) return true;
  auto ports = list_verbs_ports();
  if (!ports) return false;
  for (const auto& p : *ports) {
    if (p.active && p.gid_index >= 0) return true;
  }
  return false;
}

}  // namespace fabric
