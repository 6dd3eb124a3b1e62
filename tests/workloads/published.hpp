#pragma once
// What each rank tells the others before the workloads start (one all_gather): its engine's
// address and, where it has them, its weights arena and immediate block and the trainer's ack
// target. (MoE exchanges its own blob inside MoeGroup::create; KV in its handshake.)

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fabric/status.hpp"

namespace fabric::workloads::test {

struct Published {
  std::vector<std::byte> addr;     // NetAddr::encode of the engine weights run on
  std::vector<std::byte> kv_addr;  // of the engine KV runs on (the same one unless Plan::engines is 3)
  std::vector<std::byte> arena;  // inference ranks: the weights arena's MrDesc::encode
  std::uint32_t weights_first = 0, weights_count = 0;  // inference ranks: reserve_update_imms
  std::vector<std::byte> acks;   // the trainer: where inference ranks acknowledge a version
  std::uint32_t ack_first = 0;   // the trainer: its reserved ack values
};

[[nodiscard]] std::vector<std::byte> encode(const Published& p);
[[nodiscard]] Result<Published> decode_published(std::span<const std::byte> bytes);

}  // namespace fabric::workloads::test
