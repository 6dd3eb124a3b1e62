// Fencing a prefill rank that is silent or does not acknowledge a cancel: its keys are revoked
// and its connection dropped, so that nothing it still sends lands; where the provider cannot
// fence (shm), its requests' pages are quarantined instead.

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "receiver_impl.hpp"

namespace fabric::kv {

void Receiver::Impl::fence(std::uint32_t s, const std::string& why) {
  NetAddr addr;
  std::vector<Registered> regions;
  {
    std::lock_guard lock(mutex);
    Source& src = sources[s];
    if (src.fencing) return;
    src.fencing = true;
    src.alive = false;
    addr = src.addr;
    regions = std::move(src.regions);
    src.regions.clear();
  }
  spdlog::warn("fabric kv: fencing prefill rank {} ({}): {}", s, addr.describe(), why);
  for (const Registered& r : regions) {
    if (auto st = engine.dereg_mr(r.handle); !st.ok()) {
      spdlog::warn("fabric kv: revoking a region of prefill rank {}: {}", s, st.to_string());
    }
  }
  const Status fenced = engine.fence_peer(addr);
  const bool can_fence = fenced.ok();
  if (!can_fence) {
    spdlog::warn("fabric kv: prefill rank {} cannot be fenced ({}); its pages stay quarantined "
                 "for {} ms",
                 s, fenced.to_string(), config.quarantine.count());
  }
  Outbox a;
  {
    std::lock_guard lock(mutex);
    const auto now = Clock::now();
    for (auto& [id, e] : entries) {
      if (is_terminal(e.status.state)) continue;
      bool involved = false;
      for (Leg& l : e.legs) {
        if (l.source != s || l.quiet) continue;
        involved = true;
        l.quiet = true;
      }
      if (!involved) continue;
      if (!can_fence) {
        const auto until = now + config.quarantine;
        if (!e.quarantine_until || *e.quarantine_until < until) e.quarantine_until = until;
      }
      begin_stop(a, id, e, Status(Errc::timeout, fmt::format("prefill rank {} {}", s, why)),
                 false);
    }
    sources[s].fenced = true;
  }
  changed.notify_all();
  deliver(a);
}

}  // namespace fabric::kv
