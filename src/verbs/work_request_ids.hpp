#pragma once
// How a VerbsDomain encodes what it hands the device and gets back in completions: the wr_id
// of each work request and the local_desc of each registered region.

#include <cstdint>

namespace fabric::verbs {

// Receive work requests are told apart from sends by their wr_id's top bits; a send's wr_id is
// its TxSlot index.
inline constexpr std::uint64_t kImmRecvTag = 1ull << 63;
inline constexpr std::uint64_t kMsgRecvTag = 1ull << 62;
inline constexpr std::uint64_t kTagMask = kImmRecvTag | kMsgRecvTag;

// local_desc carries the lkey, kept non-null so "no descriptor" stays distinct, and whether the
// region is host memory, which the CPU may copy into a work request (IBV_SEND_INLINE).
inline constexpr std::uint64_t kDescMark = 1ull << 32;
inline constexpr std::uint64_t kHostMark = 1ull << 33;
inline void* desc_of(std::uint32_t lkey, bool host) {
  return reinterpret_cast<void*>(
      static_cast<std::uintptr_t>(kDescMark | (host ? kHostMark : 0) | lkey));
}
inline std::uint32_t lkey_of(void* desc) {
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(desc));
}
inline bool host_memory(void* desc) {
  return (reinterpret_cast<std::uintptr_t>(desc) & kHostMark) != 0;
}

}  // namespace fabric::verbs
