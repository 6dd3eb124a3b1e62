#pragma once
// Busy-polls the raw endpoint's CQ: local completions go to a callback,
// immediates of one value are counted, and a stuck round ends in an error.

#include <array>
#include <cstdint>
#include <stdexcept>

#include "raw/endpoint.hpp"
#include "stats.hpp"

namespace bench::raw {

class Poller {
 public:
  explicit Poller(std::uint64_t limit) : deadline_(now_ns() + limit) {}
  // Returns the op slots that completed; remote immediates go to `imms`.
  template <typename F>
  std::size_t drain(Endpoint& ep, std::uint32_t imm, std::uint64_t& imms, F&& on_done) {
    const std::size_t n = ep.poll(ev_.data(), ev_.size());
    for (std::size_t i = 0; i < n; ++i) {
      if ((ev_[i].flags & FI_REMOTE_CQ_DATA) != 0 && (ev_[i].flags & FI_WRITE) == 0) {
        if (ev_[i].data == imm) ++imms;
        continue;
      }
      on_done(static_cast<OpSlot*>(ev_[i].op_context));
    }
    if (n == 0 && ++idle_ % 4096 == 0 && now_ns() > deadline_) {
      throw std::runtime_error("raw round did not finish in time");
    }
    return n;
  }

 private:
  std::array<fi_cq_data_entry, 64> ev_{};
  std::uint64_t deadline_;
  std::uint32_t idle_ = 0;
};

}  // namespace bench::raw
