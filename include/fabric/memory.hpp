#pragma once
// Registered memory: MrHandle is the local side (a transfer's source), MrDesc
// the serialisable remote side (a transfer's destination).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/device.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/status.hpp"

namespace fabric {

namespace detail {
struct Registration;
}

// What remote peers may do to a registration. Local use as a source is always allowed.
enum class Access : std::uint32_t {
  remote_write = 1u << 0,
  remote_read = 1u << 1,
};
constexpr Access operator|(Access a, Access b) noexcept {
  return static_cast<Access>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}
constexpr bool has_access(Access set, Access bit) noexcept {
  return (static_cast<std::uint32_t>(set) & static_cast<std::uint32_t>(bit)) != 0;
}

// Shared, cheap to copy. Becomes invalid after dereg_mr().
class MrHandle {
 public:
  MrHandle() = default;
  explicit MrHandle(std::shared_ptr<detail::Registration> registration)
      : registration_(std::move(registration)) {}

  [[nodiscard]] bool valid() const noexcept;
  [[nodiscard]] void* data() const noexcept;
  [[nodiscard]] std::size_t size() const noexcept;
  [[nodiscard]] Device device() const noexcept;
  [[nodiscard]] const std::shared_ptr<detail::Registration>& registration() const noexcept {
    return registration_;
  }

 private:
  std::shared_ptr<detail::Registration> registration_;
};

// How one Domain of the owner reaches the region: the remote address of offset 0
// (the virtual address, or 0 on providers that address by offset) and the key.
struct RemoteKey {
  std::uint64_t addr_base = 0;
  std::uint64_t rkey = 0;
  friend bool operator==(const RemoteKey&, const RemoteKey&) = default;
};

// Immutable and cheap to copy. Wire format (checksummed) in docs/api.md#wire-formats: version 3
// for a region peers may only write (the default registration), version 4, which adds the
// access bits, for any other; both decode.
class MrDesc {
 public:
  static constexpr std::uint8_t kWireVersion = 3;
  static constexpr std::uint8_t kWireVersionWithAccess = 4;

  MrDesc() = default;
  // keys: one per Domain of the owner's group `group`, which registered the memory with
  // `access` (what peers may do to it; a reader checks Access::remote_read before it posts).
  static Result<MrDesc> make(NetAddr owner, std::uint64_t base, std::uint64_t length,
                             std::vector<RemoteKey> keys, std::uint32_t group = 0,
                             Access access = Access::remote_write);

  static Result<MrDesc> decode(std::span<const std::byte> bytes);
  // Accepts the output of to_string().
  static Result<MrDesc> parse(std::string_view text);
  [[nodiscard]] std::vector<std::byte> encode() const;
  // Printable and parseable: "fmd3:" followed by the hex of encode().
  [[nodiscard]] std::string to_string() const;
  // For humans and logs: size, base and the owner's describe().
  [[nodiscard]] std::string describe() const;

  [[nodiscard]] bool empty() const noexcept { return data_ == nullptr; }
  [[nodiscard]] const NetAddr& owner() const;
  // The same owner, kept alive by the pointer (shares this descriptor's immutable state): a
  // cache may hold it and know the object at that address still holds those bytes. Null when
  // empty.
  [[nodiscard]] std::shared_ptr<const NetAddr> shared_owner() const;
  // The owner's virtual address of the region (informational).
  [[nodiscard]] std::uint64_t base() const noexcept;
  [[nodiscard]] std::uint64_t size() const noexcept;
  // The owner's DomainGroup that registered the region: writes to it go to that group's NICs.
  [[nodiscard]] std::uint32_t group() const noexcept;
  // One per Domain of that group, in Domain order.
  [[nodiscard]] std::span<const RemoteKey> keys() const noexcept;
  // What the owner let peers do (reg_mr's `access`). Informational for the owner's safety: the
  // owner's provider enforces it on the keys whatever a descriptor claims.
  [[nodiscard]] Access access() const noexcept;

  friend bool operator==(const MrDesc& a, const MrDesc& b);

 private:
  struct Data;
  std::shared_ptr<const Data> data_;
};

// One region for TransferEngine::reg_mrs(): [ptr, ptr + length) on `device`.
struct MemoryRange {
  void* ptr = nullptr;
  std::size_t length = 0;
  Device device = Device::host();
  // As reg_mr's `group`: unset, the device's group (host memory:
  // EngineConfig::host_group). The initializer lets {ptr, length} leave it out
  // without -Wmissing-field-initializers.
  std::optional<std::uint32_t> group = std::nullopt;
};

// reg_mr()'s result.
struct Registered {
  MrHandle handle;
  MrDesc desc;
};

}  // namespace fabric
