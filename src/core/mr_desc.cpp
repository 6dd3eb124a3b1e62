#include <fmt/format.h>

#include "common/checked.hpp"
#include "common/wire.hpp"
#include "core/text_form.hpp"
#include "fabric/memory.hpp"

namespace fabric {

struct MrDesc::Data {
  NetAddr owner;
  std::uint64_t base = 0;
  std::uint64_t length = 0;
  std::vector<RemoteKey> keys;
  std::uint32_t group = 0;
  Access access = Access::remote_write;
};

namespace {
constexpr std::uint8_t kMagic[3] = {'F', 'M', 'D'};
constexpr std::string_view kTextPrefix = "fmd3:";
constexpr std::string_view kTextPrefixWithAccess = "fmd4:";
constexpr auto kKnownAccess =
    static_cast<std::uint32_t>(Access::remote_write | Access::remote_read);

// Version 3 for the default (write-only) registration keeps those descriptors byte for byte what
// earlier builds wrote and read; only a region with other rights needs version 4.
std::uint8_t version_for(Access access) {
  return access == Access::remote_write ? MrDesc::kWireVersion : MrDesc::kWireVersionWithAccess;
}

Status malformed(std::string_view what) {
  return {Errc::malformed, fmt::format("MrDesc: {}", what)};
}
}  // namespace

Result<MrDesc> MrDesc::make(NetAddr owner, std::uint64_t base, std::uint64_t length,
                            std::vector<RemoteKey> keys, std::uint32_t group, Access access) {
  if (owner.empty()) return malformed("owner NetAddr is empty");
  if ((static_cast<std::uint32_t>(access) & ~kKnownAccess) != 0) {
    return malformed(fmt::format("unknown access bits {:#x}", static_cast<std::uint32_t>(access)));
  }
  if (length == 0) return malformed("length is 0");
  if (!checked::add(base, length)) {
    return malformed(fmt::format("base {:#x} + length {} overflows", base, length));
  }
  if (group >= owner.num_groups()) {
    return malformed(
        fmt::format("group {} of an owner with {} groups", group, owner.num_groups()));
  }
  if (keys.size() != owner.num_domains()) {
    return malformed(fmt::format("{} keys for an owner with {} domains", keys.size(),
                                 owner.num_domains()));
  }
  auto data = std::make_shared<Data>();
  data->owner = std::move(owner);
  data->base = base;
  data->length = length;
  data->keys = std::move(keys);
  data->group = group;
  data->access = access;
  MrDesc d;
  d.data_ = std::move(data);
  return d;
}

const NetAddr& MrDesc::owner() const {
  static const NetAddr kEmpty;
  return data_ ? data_->owner : kEmpty;
}
std::shared_ptr<const NetAddr> MrDesc::shared_owner() const {
  if (!data_) return nullptr;
  return {data_, &data_->owner};  // aliasing: shares data_'s ownership
}
std::uint64_t MrDesc::base() const noexcept { return data_ ? data_->base : 0; }
std::uint64_t MrDesc::size() const noexcept { return data_ ? data_->length : 0; }
std::uint32_t MrDesc::group() const noexcept { return data_ ? data_->group : 0; }
std::span<const RemoteKey> MrDesc::keys() const noexcept {
  return data_ ? std::span<const RemoteKey>(data_->keys) : std::span<const RemoteKey>();
}
Access MrDesc::access() const noexcept { return data_ ? data_->access : Access::remote_write; }

bool operator==(const MrDesc& a, const MrDesc& b) {
  if (a.data_ == b.data_) return true;
  if (!a.data_ || !b.data_) return false;
  return a.data_->owner == b.data_->owner && a.data_->base == b.data_->base &&
         a.data_->length == b.data_->length && a.data_->keys == b.data_->keys &&
         a.data_->group == b.data_->group && a.data_->access == b.data_->access;
}

std::vector<std::byte> MrDesc::encode() const {
  wire::Writer w;
  for (auto m : kMagic) w.u8(m);
  const std::uint8_t version = version_for(access());
  w.u8(version);
  w.u64(base());
  w.u64(size());
  const auto owner_bytes = owner().encode();
  w.u16(static_cast<std::uint16_t>(owner_bytes.size()));
  w.bytes(owner_bytes);
  w.u8(static_cast<std::uint8_t>(group()));
  const auto k = keys();
  w.u8(static_cast<std::uint8_t>(k.size()));
  for (const auto& key : k) {
    w.u64(key.addr_base);
    w.u64(key.rkey);
  }
  if (version == kWireVersionWithAccess) w.u8(static_cast<std::uint8_t>(access()));
  w.seal();
  return std::move(w).take();
}

Result<MrDesc> MrDesc::decode(std::span<const std::byte> bytes) {
  wire::Reader r(bytes);
  for (auto m : kMagic) {
    auto b = r.u8();
    if (!b) return malformed("truncated magic");
    if (*b != m) return malformed("bad magic (not a fabric-lib MrDesc)");
  }
  auto version = r.u8();
  if (!version) return malformed("truncated version");
  if (*version != kWireVersion && *version != kWireVersionWithAccess) {
    return malformed(fmt::format("unsupported version {} (this build reads {} and {}; an older "
                                 "version comes from an older fabric-lib: export it again)",
                                 *version, kWireVersion, kWireVersionWithAccess));
  }
  // Checked before any field is trusted: a corrupted descriptor must not parse
  // into one that names another peer, key or range.
  auto body = wire::unseal(bytes);
  if (!body) return malformed("checksum mismatch (corrupted, truncated or extended)");
  r = wire::Reader(*body);
  (void)r.bytes(sizeof(kMagic) + 1);
  auto base = r.u64();
  auto length = r.u64();
  auto owner_len = r.u16();
  if (!base || !length || !owner_len) return malformed("truncated header");
  auto owner_bytes = r.bytes(*owner_len);
  if (!owner_bytes) return malformed("truncated owner NetAddr");
  auto owner = NetAddr::decode(*owner_bytes);
  if (!owner) return malformed(fmt::format("owner: {}", owner.status().message()));
  auto group = r.u8();  // checked against the owner by make()
  if (!group) return malformed("truncated group");
  auto count = r.u8();
  if (!count) return malformed("truncated key count");
  if (*count != owner->num_domains()) {
    return malformed(fmt::format("{} keys for an owner with {} domains", *count,
                                 owner->num_domains()));
  }
  std::vector<RemoteKey> keys;
  for (unsigned i = 0; i < *count; ++i) {
    auto addr_base = r.u64();
    auto rkey = r.u64();
    if (!addr_base || !rkey) return malformed(fmt::format("truncated key {}", i));
    keys.push_back({*addr_base, *rkey});
  }
  Access access = Access::remote_write;  // version 3: the default registration
  if (*version == kWireVersionWithAccess) {
    auto bits = r.u8();
    if (!bits) return malformed("truncated access bits");
    // Unknown bits are refused by make(): a right this build cannot name is not granted.
    access = static_cast<Access>(*bits);
    // One encoding per descriptor: write-only is version 3's.
    if (access == Access::remote_write) return malformed("version 4 for write-only access");
  }
  if (r.remaining() != 0) return malformed(fmt::format("{} trailing bytes", r.remaining()));
  return make(std::move(owner).value(), *base, *length, std::move(keys), *group, access);
}

std::string MrDesc::to_string() const {
  const bool v4 = version_for(access()) == kWireVersionWithAccess;
  return std::string(v4 ? kTextPrefixWithAccess : kTextPrefix) + wire::to_hex(encode());
}

std::string MrDesc::describe() const {
  if (empty()) return "MrDesc(empty)";
  const std::uint64_t n = size();
  const std::string length = n % (1ULL << 20) == 0 && n != 0 ? fmt::format("{} MiB", n >> 20)
                             : n % (1ULL << 10) == 0 && n != 0 ? fmt::format("{} KiB", n >> 10)
                                                               : fmt::format("{} B", n);
  return fmt::format("MrDesc({} at {:#x} of group {} of {})", length, base(), group(),
                     owner().describe());
}

Result<MrDesc> MrDesc::parse(std::string_view text) {
  const bool v4 = text.starts_with(kTextPrefixWithAccess);
  auto bytes = text_form_bytes(text, v4 ? kTextPrefixWithAccess : kTextPrefix);
  if (!bytes) return malformed(bytes.status().message());
  // The prefix names the version: one that disagrees with the bytes' is a mangled text.
  const std::uint8_t want = v4 ? kWireVersionWithAccess : kWireVersion;
  if (bytes->size() > sizeof(kMagic) && static_cast<std::uint8_t>((*bytes)[sizeof(kMagic)]) != want) {
    return malformed(fmt::format("text form \"{}\" holds a version {} descriptor",
                                 text.substr(0, kTextPrefix.size()),
                                 static_cast<unsigned>((*bytes)[sizeof(kMagic)])));
  }
  return decode(*bytes);
}

}  // namespace fabric
