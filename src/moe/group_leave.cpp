// Leaving a group: no peer may still write into this rank's arena once its registration is
// gone, and no write of this rank may reach a peer's arena after the peer deregistered it.
// On connected providers such a write is not just lost: the target closes the connection
// (tcp) or moves the queue pair to error (verbs), and every other workload's operations to
// that peer on the same engine fail with it. The two survivors of a death fail at the same
// moment (poll_until's grace lines them up) and each sends the other an abort notice; without
// this handshake the notice raced the other side's teardown and broke their connection under
// the group they rebuilt next.

#include <algorithm>
#include <thread>

#include "group_impl.hpp"

namespace fabric::moe {

namespace {

// Polls until every listed peer's counter of `kind` holds `at_least`, or the deadline.
template <typename Counter>
std::vector<std::uint32_t> await_each(std::vector<std::uint32_t> pending, Counter counter,
                                      std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::uint32_t spins = 0;
  while (!pending.empty()) {
    std::erase_if(pending, [&](std::uint32_t p) { return counter(p).value() > 0; });
    if (pending.empty() || Clock::now() >= deadline) break;
    if (++spins > 256) std::this_thread::yield();
  }
  return pending;
}

}  // namespace

void MoeGroup::Impl::leave() {
  // Let WRITEs that read the arena, and the notices this rank sent, finish (bounded): after
  // this, nothing of this rank is on its way to any peer's arena.
  (void)done->wait(submitted, config.timeout);
  (void)notices->wait(notices_submitted, config.timeout);
  // A group whose creation stopped half way has no counters to hear the peers with.
  if (peers.empty() || counters.size() != std::size_t{kImmKinds} * n() ||
      !counters[static_cast<std::size_t>(ImmKind::leave) * n() + peers.front()])
    return;
  // A rank that ended its last iteration cleanly needs no handshake: every peer's WRITEs of that
  // iteration came before its barrier, and no peer writes again before this rank's next
  // routes. Only the barrier may still be on its way; it is awaited here, as quiesce() would.
  // (No leave word is sent then either: a peer that also ended cleanly may have deregistered
  // already, and the word itself would be the late write.)
  bool clean = false;
  {
    std::lock_guard lock(error_mutex);
    clean = error.ok() && phase == Phase::idle;
  }
  if (clean && barrier_pending) {
    clean = await_each(peers, [&](std::uint32_t p) -> ImmCounter& { return counter(ImmKind::barrier, p); },
                       config.timeout)
                .empty();
  }
  if (clean) return;
  // Otherwise (a failure, or an iteration left half way) peers may still be writing, or about
  // to send abort notices: tell each peer not named broken that nothing more of this rank's
  // will arrive, and wait for the same word from each before the registration goes.
  std::vector<std::uint32_t> alive;
  {
    std::lock_guard lock(error_mutex);
    for (const auto p : peers)
      if (std::find(broken.begin(), broken.end(), p) == broken.end()) alive.push_back(p);
  }
  std::vector<std::uint32_t> told;
  for (const auto p : alive)
    if (engine->submit_imm(imm(ImmKind::leave, self()), descs[p], notices).ok()) told.push_back(p);
  // Peers that could not be told (a refused post) are not waited for either: they may be gone.
  (void)await_each(
      told, [&](std::uint32_t p) -> ImmCounter& { return counter(ImmKind::leave, p); }, config.timeout);
}

}  // namespace fabric::moe
