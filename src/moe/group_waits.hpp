#pragma once
// The spin-waits of the phase machine, templates over what each waits for: until every source
// is ready, a peer reports a death, or the deadline and its grace pass.

#include <algorithm>
#include <chrono>
#include <thread>

#include "group_impl.hpp"

namespace fabric::moe {

// Polls until `ready(s)` holds for every listed source or the deadline;
// an abort notice from any peer ends the wait at once.
template <typename Ready>
std::vector<std::uint32_t> MoeGroup::Impl::poll_until(std::vector<std::uint32_t> pending,
                                                     Ready ready, bool& aborted) {
  auto deadline = Clock::now() + config.timeout;
  bool in_grace = false;
  std::uint32_t spins = 0;
  aborted = false;
  while (!pending.empty()) {
    std::erase_if(pending, [&](std::uint32_t s) { return ready(s); });
    if (pending.empty()) break;
    if ((spins & 63) == 0 && !reported_dead().empty()) {
      aborted = true;
      break;
    }
    if (Clock::now() >= deadline) {
      // Survivors that began this wait together time out together, and one
      // blocked by the dead rank sends nothing either. A short grace lets the
      // first one's abort notice arrive, so that every survivor names the rank
      // that died rather than a survivor that stopped sending because of it.
      if (in_grace) break;
      in_grace = true;
      deadline = Clock::now() + std::min<std::chrono::milliseconds>(
                                    config.timeout / 4, std::chrono::milliseconds(300));
      continue;
    }
    // Spin briefly, then yield: peers run on other cores, or wait for one.
    if (++spins > 256) std::this_thread::yield();
  }
  return pending;
}

// Waits until each listed node peer raised its flag word (where(rank)) to this epoch.
template <typename Where>
Status MoeGroup::Impl::await_flags(const std::vector<std::uint32_t>& ranks, Where where,
                                   const char* what) {
  bool aborted = false;
  auto missing = poll_until(
      ranks, [&](std::uint32_t r) { return load_flag(where(r)) >= epoch; }, aborted);
  if (!missing.empty()) return fail_naming(what, std::move(missing));
  return Status::success();
}

}  // namespace fabric::moe
