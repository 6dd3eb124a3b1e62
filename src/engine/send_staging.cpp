#include "engine/send_staging.hpp"

namespace fabric::engine {

Result<SendStaging> SendStaging::create(domain::Domain& domain, std::size_t slot_size,
                                        std::size_t slots) {
  SendStaging s;
  s.slot_size_ = slot_size;
  s.memory_ = std::make_unique<std::byte[]>(slot_size * slots);
  auto region = domain.register_memory(domain::MemorySpan::host(s.memory_.get(), slot_size * slots),
                                       static_cast<Access>(0));
  if (!region) return region.status();
  s.region_ = std::move(region).value();
  for (std::size_t i = slots; i > 0; --i) s.free_.push_back(static_cast<int>(i - 1));
  return s;
}

std::optional<int> SendStaging::acquire() {
  if (free_.empty()) return std::nullopt;
  int slot = free_.back();
  free_.pop_back();
  return slot;
}

}  // namespace fabric::engine
