#include "engine/registration.hpp"
#include "fabric/memory.hpp"

namespace fabric {

bool MrHandle::valid() const noexcept {
  return registration_ && registration_->alive.load(std::memory_order_acquire);
}
void* MrHandle::data() const noexcept { return registration_ ? registration_->ptr : nullptr; }
std::size_t MrHandle::size() const noexcept { return registration_ ? registration_->length : 0; }
Device MrHandle::device() const noexcept {
  return registration_ ? registration_->device : Device::host();
}

}  // namespace fabric
