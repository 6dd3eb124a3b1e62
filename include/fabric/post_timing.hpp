#pragma once
// Where a request's time goes before its WRITEs reach the NIC, recorded per
// request when EngineConfig::record_post_timings is on (fabric-bench
// --breakdown). Every stamp is std::chrono::steady_clock, in nanoseconds.

#include <cstdint>

namespace fabric {

enum class PostKind : std::uint8_t {
  send,
  single_write,
  paged_write,
  imm,
  scatter,
  barrier,
  single_read,
  paged_read,
};

struct PostTiming {
  PostKind kind = PostKind::single_write;
  std::uint32_t posts = 0;        // WRITEs/SENDs the request posted
  std::uint64_t called = 0;       // submit_* entered
  std::uint64_t enqueued = 0;     // validated, planned and pushed to the worker's queue
  std::uint64_t picked_up = 0;    // the worker took it off the queue
  std::uint64_t first_post = 0;   // its first WRITE/SEND was accepted by a Domain
  std::uint64_t last_post = 0;    // its last one was
};

}  // namespace fabric
