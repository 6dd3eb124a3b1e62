#pragma once
// Registered staging buffers for SENDs on providers that only send from
// registered memory (FI_MR_LOCAL). Worker-owned.

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "domain/domain.hpp"

namespace fabric::engine {

class SendStaging {
 public:
  static Result<SendStaging> create(domain::Domain& domain, std::size_t slot_size,
                                    std::size_t slots);

  [[nodiscard]] std::optional<int> acquire();
  void release(int slot) { free_.push_back(slot); }
  [[nodiscard]] std::byte* data(int slot) const {
    return memory_.get() + static_cast<std::size_t>(slot) * slot_size_;
  }
  [[nodiscard]] void* desc() const { return region_->local_desc(); }

 private:
  std::size_t slot_size_ = 0;
  std::unique_ptr<std::byte[]> memory_;
  std::unique_ptr<domain::MemoryRegion> region_;
  std::vector<int> free_;
};

}  // namespace fabric::engine
