// Receiver::connect: the handshake with a prefill rank (regions registered for it alone, HELLO,
// wait for HELLO_ACK), a second connect() to the same rank, and re-admission after a fence.

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "receiver_impl.hpp"

namespace fabric::kv {

Result<std::uint32_t> Receiver::Impl::join_connect(std::uint32_t index, const NetAddr& sender,
                                                   std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex);
  // By index, never by reference: another connect() may grow `sources` while this waits.
  const bool settled = changed.wait_for(lock, timeout, [&] {
    return sources[index].joined || !sources[index].alive || !sources[index].hello_error.ok();
  });
  const Source& s = sources[index];
  if (s.joined && s.alive) return index;
  if (!settled) {
    return Status(Errc::timeout, fmt::format("KV receiver: prefill rank {} did not answer "
                                             "within {} ms",
                                             sender.describe(), timeout.count()));
  }
  return Status(Errc::invalid_argument,
                fmt::format("KV receiver: prefill rank {} failed before ({}); a restarted rank "
                            "has a new address",
                            sender.describe(),
                            s.hello_error.ok() ? std::string("dead") : s.hello_error.to_string()));
}

Result<std::uint32_t> Receiver::connect(const NetAddr& sender, std::chrono::milliseconds timeout) {
  auto& im = *impl_;
  std::uint32_t index = 0;
  {
    std::unique_lock lock(im.mutex);
    auto known = im.sources.index_of(sender.instance_id());
    if (known && !im.sources[*known].fenced) {
      lock.unlock();
      return im.join_connect(*known, sender, timeout);
    }
    if (known) {
      // Declared dead and fenced, and asked for again (a process that was stopped or starved
      // and runs again): a new epoch under the same index. The fence revoked the old epoch's
      // keys, so nothing it still had in flight can land; the handshake below registers fresh
      // regions for it. On verbs the fenced instance refuses the handshake (docs/kv.md).
      spdlog::info("fabric kv: prefill rank {} ({}) speaks again after its fence: re-admitted "
                   "with new keys",
                   *known, sender.describe());
    }
    Impl::Source fresh;
    fresh.addr = sender;
    fresh.last_seen = Clock::now();
    index = im.sources.put(std::move(fresh));
  }
  // Marks the handshake failed, waking a concurrent connect() to the same rank that waits on it.
  auto fail = [&](Status st) {
    {
      std::lock_guard lock(im.mutex);
      im.sources[index].alive = false;
    }
    im.changed.notify_all();
    return st;
  };
  // One registration per region for this sender: fencing it revokes these keys only.
  // One batch: a worker round trip per region cost most of connect on a loaded host (docs/kv.md).
  std::vector<MemoryRange> ranges;
  for (const RegionMemory& r : im.config.regions) ranges.push_back({r.ptr, r.length, r.device});
  auto registered = im.engine.reg_mrs(ranges);
  if (!registered.ok()) return fail(registered.status());
  std::vector<Registered> regions = std::move(registered).value();
  std::vector<MrDesc> descs;
  for (const Registered& r : regions) descs.push_back(r.desc);
  {
    std::lock_guard lock(im.mutex);
    im.sources[index].regions = std::move(regions);
  }
  if (auto st = im.link.send(sender, msg::Hello{im.engine.main_address(), im.config.layout, descs});
      !st.ok()) {
    return fail(st);
  }
  std::unique_lock lock(im.mutex);
  const bool answered = im.changed.wait_for(lock, timeout, [&] {
    return im.sources[index].joined || !im.sources[index].hello_error.ok();
  });
  Impl::Source& s = im.sources[index];
  if (!answered || !s.hello_error.ok()) {
    s.alive = false;
    const Status refused = s.hello_error;  // `s` may move once the lock is dropped
    lock.unlock();
    im.changed.notify_all();
    return answered ? refused
                    : Status(Errc::timeout, fmt::format("KV receiver: prefill rank {} did not "
                                                        "answer within {} ms",
                                                        sender.describe(), timeout.count()));
  }
  s.last_seen = Clock::now();
  if (auto w = im.link.watch(sender); w.ok()) {
    s.watch = std::move(w).value();
  } else {
    spdlog::warn("fabric kv: prefill rank {} is judged by its KV messages only: {}",
                 sender.describe(), w.status().to_string());
  }
  return index;
}

Result<KvLayout> Receiver::source_layout(std::uint32_t source) const {
  std::lock_guard lock(impl_->mutex);
  if (!impl_->sources.joined(source)) {
    return Status(Errc::not_found, fmt::format("KV receiver: no connected source {}", source));
  }
  return impl_->sources[source].layout;
}

}  // namespace fabric::kv
