// The waits on peers that are not templates: immediates counted per source, checked for
// surplus once they are in, and the scatter retried under back-pressure until the deadline.

#include <chrono>
#include <string>
#include <thread>

#include "group_waits.hpp"

namespace fabric::moe {

namespace {

const char* kind_name(ImmKind kind) {
  switch (kind) {
    case ImmKind::routes: return "dispatch routes";
    case ImmKind::overflow: return "dispatch tokens";
    case ImmKind::combine: return "combine rows";
    case ImmKind::barrier: return "buffer-reuse barrier";
    case ImmKind::abort: return "abort notice";
    case ImmKind::leave: return "leave notice";
  }
  return "?";
}

}  // namespace

// Waits for expected[s] immediates of `kind` from each source, within one
// deadline; names every source that fell short, then checks that nothing
// beyond the plan arrived.
Status MoeGroup::Impl::await_imms(ImmKind kind, const std::vector<std::uint32_t>& expected) {
  std::vector<std::uint32_t> pending;
  for (std::uint32_t s = 0; s < n(); ++s)
    if (s != self() && expected[s] > 0) pending.push_back(s);
  bool aborted = false;
  auto missing = poll_until(
      pending, [&](std::uint32_t s) { return counter(kind, s).value() >= expected[s]; }, aborted);
  if (!missing.empty()) return fail_naming(kind_name(kind), std::move(missing));
  for (std::uint32_t s = 0; s < n(); ++s) {
    if (s == self()) continue;
    auto& c = counter(kind, s);
    if (expected[s] > 0 && !c.try_consume(expected[s]))
      return fail({Errc::malformed, "moe: immediate count went down (internal)"});
    // Nothing of a later iteration of this kind can be here yet (it needs
    // this rank's next messages first), so any remainder is surplus.
    if (c.value() != 0)
      return fail({Errc::malformed, std::string("moe ") + kind_name(kind) + ": " +
                                        std::to_string(c.value()) +
                                        " surplus immediate(s) from rank " + std::to_string(s) +
                                        " in epoch " + std::to_string(epoch)},
                  {s});
    stats.imms_expected += expected[s];
    stats.imms_consumed += expected[s];
  }
  return Status::success();
}

Status MoeGroup::Impl::submit(Scatter scatter) {
  if (scatter.slices.empty()) return Status::success();
  for (const auto& slice : scatter.slices) stats.bytes_posted += slice.length;
  stats.writes_posted += scatter.slices.size();
  scatter.src = reg.handle;
  scatter.routing = ScatterRouting::peers();
  auto st = engine->submit_scatter(scatter, done);
  // Back-pressure is bounded by the deadline, never a silent drop.
  const auto deadline = Clock::now() + config.timeout;
  while (st.code() == Errc::again && Clock::now() < deadline) {
    std::this_thread::yield();
    st = engine->submit_scatter(scatter, done);
  }
  if (!st.ok()) return fail(st);
  ++submitted;
  return Status::success();
}

}  // namespace fabric::moe
