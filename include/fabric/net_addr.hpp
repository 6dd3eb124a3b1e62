#pragma once
// NetAddr: an engine's identity on the fabric, exchanged out of band.
// Wire format (version 3: group-aware, checksummed) is documented in docs/api.md#wire-formats.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/status.hpp"

namespace fabric {

enum class Backend : std::uint8_t { libfabric = 1, verbs = 2 };

[[nodiscard]] std::string_view backend_name(Backend backend) noexcept;

class NetAddr {
 public:
  static constexpr std::uint8_t kWireVersion = 3;
  // Per group: peers must agree on this count, not on the number of groups.
  static constexpr std::size_t kMaxDomains = 4;
  static constexpr std::size_t kMaxGroups = 16;
  static constexpr std::size_t kMaxDomainAddressBytes = 256;
  static constexpr std::size_t kMaxProviderNameBytes = 64;

  NetAddr() = default;
  // Validates the parts the same way decode() does. `domain_addresses` holds
  // num_groups groups of equal size, group-major: group g's Domain d at
  // [g * (size / num_groups) + d].
  static Result<NetAddr> make(Backend backend, std::string provider, std::uint64_t instance_id,
                              std::uint32_t max_message_size,
                              std::vector<std::vector<std::byte>> domain_addresses,
                              std::size_t num_groups = 1);

  static Result<NetAddr> decode(std::span<const std::byte> bytes);
  // Accepts the output of to_string().
  static Result<NetAddr> parse(std::string_view text);

  [[nodiscard]] std::vector<std::byte> encode() const;
  // Printable and parseable: "fna3:" followed by the hex of encode().
  [[nodiscard]] std::string to_string() const;
  // For humans and logs: provider, instance and per-domain addresses.
  [[nodiscard]] std::string describe() const;

  [[nodiscard]] bool empty() const noexcept { return domains_.empty(); }
  [[nodiscard]] Backend backend() const noexcept { return backend_; }
  [[nodiscard]] const std::string& provider() const noexcept { return provider_; }
  // Random per engine instance: a restarted peer has a new one.
  [[nodiscard]] std::uint64_t instance_id() const noexcept { return instance_id_; }
  // Largest message the engine's receive buffers hold; submit_send checks against it.
  [[nodiscard]] std::uint32_t max_message_size() const noexcept { return max_message_size_; }
  // Domains per group (every group has as many).
  [[nodiscard]] std::size_t num_domains() const noexcept { return domains_per_group_; }
  // DomainGroups of the engine: one per GPU it serves (docs/api.md#groups).
  [[nodiscard]] std::size_t num_groups() const noexcept {
    return domains_per_group_ == 0 ? 0 : domains_.size() / domains_per_group_;
  }
  // Domain i of group 0, which receives SENDs.
  [[nodiscard]] std::span<const std::byte> domain_address(std::size_t i) const {
    return domain_address(0, i);
  }
  [[nodiscard]] std::span<const std::byte> domain_address(std::size_t group, std::size_t i) const {
    if (i >= domains_per_group_ || group >= num_groups()) {
      throw std::out_of_range("NetAddr::domain_address: no such group or Domain");
    }
    return domains_[group * domains_per_group_ + i];
  }

  friend bool operator==(const NetAddr&, const NetAddr&) = default;

 private:
  Backend backend_ = Backend::libfabric;
  std::string provider_;
  std::uint64_t instance_id_ = 0;
  std::uint32_t max_message_size_ = 0;
  std::size_t domains_per_group_ = 0;
  std::vector<std::vector<std::byte>> domains_;  // group-major
};

}  // namespace fabric
