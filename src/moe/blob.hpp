#pragma once
// What each rank publishes when a group is created: its rank, a fingerprint
// of the config (ranks built with different shapes refuse to talk), its
// engine address, its arena's descriptor and the arena's shared-memory name.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fabric/moe/config.hpp"
#include "fabric/status.hpp"

namespace fabric::moe {

struct GroupBlob {
  std::uint32_t rank = 0;
  std::uint64_t fingerprint = 0;
  std::vector<std::byte> addr;
  std::vector<std::byte> desc;
  std::string shm_name;
};

[[nodiscard]] std::uint64_t config_fingerprint(const MoeConfig& config) noexcept;
[[nodiscard]] std::vector<std::byte> encode_blob(const GroupBlob& blob);
[[nodiscard]] Result<GroupBlob> decode_blob(std::span<const std::byte> bytes);

// A round of the immediate block agreement (group_imms.cpp): the first value a rank reserved,
// 0 when it could not reserve.
[[nodiscard]] std::vector<std::byte> encode_imm_offer(std::uint32_t first);
[[nodiscard]] Result<std::uint32_t> decode_imm_offer(std::span<const std::byte> bytes);

}  // namespace fabric::moe
