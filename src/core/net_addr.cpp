#include "fabric/net_addr.hpp"

#include <fmt/format.h>

#include "common/wire.hpp"
#include "core/text_form.hpp"
#include "core/address_text.hpp"

namespace fabric {

namespace {
constexpr std::uint8_t kMagic[3] = {'F', 'N', 'A'};
constexpr std::string_view kTextPrefix = "fna3:";

Status malformed(std::string_view what) {
  return {Errc::malformed, fmt::format("NetAddr: {}", what)};
}

Status check_parts(Backend backend, const std::string& provider, std::uint32_t max_message_size,
                   const std::vector<std::vector<std::byte>>& domains, std::size_t groups) {
  if (backend != Backend::libfabric && backend != Backend::verbs) {
    return malformed(fmt::format("unknown backend {}", static_cast<int>(backend)));
  }
  if (provider.empty() || provider.size() > NetAddr::kMaxProviderNameBytes) {
    return malformed(fmt::format("provider name length {} not in 1..{}", provider.size(),
                                 NetAddr::kMaxProviderNameBytes));
  }
  // Provider names are C strings to libfabric: a NUL inside would name one
  // provider on the wire and another in every comparison and log line.
  if (const auto nul = provider.find('\0'); nul != std::string::npos) {
    return malformed(fmt::format("provider name has a NUL byte at position {}", nul));
  }
  if (max_message_size == 0) return malformed("max_message_size is 0");
  if (groups == 0 || groups > NetAddr::kMaxGroups) {
    return malformed(fmt::format("group count {} not in 1..{}", groups, NetAddr::kMaxGroups));
  }
  if (domains.size() % groups != 0) {
    return malformed(fmt::format("{} domain addresses do not split into {} equal groups",
                                 domains.size(), groups));
  }
  const std::size_t per_group = domains.size() / groups;
  if (per_group == 0 || per_group > NetAddr::kMaxDomains) {
    return malformed(
        fmt::format("domain count {} not in 1..{}", per_group, NetAddr::kMaxDomains));
  }
  for (std::size_t i = 0; i < domains.size(); ++i) {
    if (domains[i].empty() || domains[i].size() > NetAddr::kMaxDomainAddressBytes) {
      return malformed(fmt::format("domain {} address length {} not in 1..{}", i,
                                   domains[i].size(), NetAddr::kMaxDomainAddressBytes));
    }
  }
  return Status::success();
}
}  // namespace

std::string_view backend_name(Backend backend) noexcept {
  switch (backend) {
    case Backend::libfabric: return "libfabric";
    case Backend::verbs: return "verbs";
  }
  return "unknown";
}

Result<NetAddr> NetAddr::make(Backend backend, std::string provider, std::uint64_t instance_id,
                              std::uint32_t max_message_size,
                              std::vector<std::vector<std::byte>> domain_addresses,
                              std::size_t num_groups) {
  if (auto st = check_parts(backend, provider, max_message_size, domain_addresses, num_groups);
      !st.ok()) {
    return st;
  }
  NetAddr a;
  a.backend_ = backend;
  a.provider_ = std::move(provider);
  a.instance_id_ = instance_id;
  a.max_message_size_ = max_message_size;
  a.domains_per_group_ = domain_addresses.size() / num_groups;
  a.domains_ = std::move(domain_addresses);
  return a;
}

std::vector<std::byte> NetAddr::encode() const {
  wire::Writer w;
  for (auto m : kMagic) w.u8(m);
  w.u8(kWireVersion);
  w.u8(static_cast<std::uint8_t>(backend_));
  w.u8(static_cast<std::uint8_t>(provider_.size()));
  w.text(provider_);
  w.u64(instance_id_);
  w.u32(max_message_size_);
  w.u8(static_cast<std::uint8_t>(num_groups()));
  w.u8(static_cast<std::uint8_t>(domains_per_group_));
  for (const auto& d : domains_) {
    w.u16(static_cast<std::uint16_t>(d.size()));
    w.bytes(d);
  }
  w.seal();
  return std::move(w).take();
}

Result<NetAddr> NetAddr::decode(std::span<const std::byte> bytes) {
  wire::Reader r(bytes);
  for (auto m : kMagic) {
    auto b = r.u8();
    if (!b) return malformed("truncated magic");
    if (*b != m) return malformed("bad magic (not a fabric-lib NetAddr)");
  }
  auto version = r.u8();
  if (!version) return malformed("truncated version");
  if (*version != kWireVersion) {
    return malformed(fmt::format("unsupported version {} (this build reads {}; an older "
                                 "version comes from an older fabric-lib: export it again)",
                                 *version, kWireVersion));
  }
  // Checked before any field is trusted: a corrupted descriptor must not parse
  // into one that names another peer, key or range.
  auto body = wire::unseal(bytes);
  if (!body) return malformed("checksum mismatch (corrupted, truncated or extended)");
  r = wire::Reader(*body);
  (void)r.bytes(sizeof(kMagic) + 1);
  auto backend = r.u8();
  auto name_len = r.u8();
  if (!backend || !name_len) return malformed("truncated header");
  auto name = r.bytes(*name_len);
  if (!name) return malformed("truncated provider name");
  auto instance = r.u64();
  auto max_msg = r.u32();
  auto groups = r.u8();
  auto count = r.u8();
  if (!instance || !max_msg || !groups || !count) return malformed("truncated header");
  if (*groups == 0 || *groups > kMaxGroups) {
    return malformed(fmt::format("group count {} not in 1..{}", *groups, kMaxGroups));
  }
  if (*count == 0 || *count > kMaxDomains) {
    return malformed(fmt::format("domain count {} not in 1..{}", *count, kMaxDomains));
  }
  std::vector<std::vector<std::byte>> domains;
  for (unsigned i = 0; i < unsigned{*groups} * *count; ++i) {
    auto len = r.u16();
    if (!len) return malformed(fmt::format("truncated length of domain {}", i));
    auto addr = r.bytes(*len);
    if (!addr) return malformed(fmt::format("truncated address of domain {}", i));
    domains.emplace_back(addr->begin(), addr->end());
  }
  if (r.remaining() != 0) return malformed(fmt::format("{} trailing bytes", r.remaining()));
  std::string provider(reinterpret_cast<const char*>(name->data()), name->size());
  return make(static_cast<Backend>(*backend), std::move(provider), *instance, *max_msg,
              std::move(domains), *groups);
}

std::string NetAddr::to_string() const {
  return std::string(kTextPrefix) + wire::to_hex(encode());
}

Result<NetAddr> NetAddr::parse(std::string_view text) {
  auto bytes = text_form_bytes(text, kTextPrefix);
  if (!bytes) return malformed(bytes.status().message());
  return decode(*bytes);
}

std::string NetAddr::describe() const {
  if (empty()) return "NetAddr(empty)";
  std::string out = fmt::format("NetAddr({} ", provider_);
  for (std::size_t i = 0; i < domains_.size(); ++i) {
    if (i) out += domains_per_group_ > 0 && i % domains_per_group_ == 0 ? " | " : ", ";
    out += describe_domain_address(backend_, domains_[i]);
  }
  out += fmt::format(" instance={:08x})", instance_id_ >> 32);
  return out;
}

}  // namespace fabric
