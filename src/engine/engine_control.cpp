// The engine's lifetime and its calls on every group: stop() and the entry gate it closes,
// caller-driven progress, metrics and post timings, peer groups and fences.

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "common/log.hpp"
#include "engine/abandoned.hpp"
#include "engine/engine_impl.hpp"

namespace fabric {

void TransferEngine::stop() {
  if (impl_->shared && impl_->shared->callbacks.on_this_thread()) {
    // Joining the callback thread from itself would deadlock.
    log::error("stop() called from an engine callback; ignored (call it from another thread)");
    return;
  }
  std::lock_guard lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  {
    // Its pings go through the router, which refuses them from here on.
    std::lock_guard liveness_lock(impl_->liveness_mutex);
    impl_->liveness_closed = true;
    if (impl_->liveness) impl_->liveness->stop();
  }
  impl_->channels->detach();
  impl_->accepting.store(false, std::memory_order_seq_cst);
  while (impl_->entering.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  {
    // Watcher callbacks may submit work: stop them before the worker.
    std::lock_guard watcher_lock(impl_->watcher_mutex);
    if (impl_->watcher) impl_->watcher->stop();
  }
  if (!impl_->stop_workers()) {
    // A worker thread still runs (stuck in the provider) and uses its Domains and the
    // callback thread: leak them rather than free what it may touch once the provider lets go.
    engine::abandon(std::move(impl_->workers), std::move(impl_->shared));
    return;
  }
  // The worker ran its shutdown after any assist() pass in flight, and later passes return at
  // once: what is left is callers between their check of accepting and assist()'s return.
  while (impl_->progressing.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  // Callbacks may still reference receive buffers: finish them before the
  // workers (and their buffers) go away.
  impl_->shared->callbacks.stop();
  impl_->workers.clear();
}

bool TransferEngine::progress() {
  impl_->progressing.fetch_add(1, std::memory_order_seq_cst);
  bool did = false;
  if (impl_->accepting.load(std::memory_order_seq_cst)) {
    for (auto& w : impl_->workers) did |= w->assist();
  }
  impl_->progressing.fetch_sub(1, std::memory_order_seq_cst);
  return did;
}

std::uint32_t TransferEngine::outstanding_requests() const noexcept {
  return impl_->shared ? impl_->shared->admission.outstanding() : 0;
}

std::vector<PostTiming> TransferEngine::take_post_timings() {
  std::vector<PostTiming> all;
  for (auto& w : impl_->workers) {
    auto mine = w->take_post_timings();
    all.insert(all.end(), mine.begin(), mine.end());
  }
  if (impl_->workers.size() > 1) {
    std::stable_sort(all.begin(), all.end(),
                     [](const PostTiming& a, const PostTiming& b) { return a.called < b.called; });
  }
  return all;
}

EngineMetrics TransferEngine::metrics() const {
  EngineMetrics m;
  m.messages_unrouted = impl_->channels->unrouted();
  const engine::PeerIndex& peers = impl_->shared->peers;
  m.peers.resize(peers.slots());  // by worker slot: PeerIndex's, the rest's last
  for (const auto& w : impl_->workers) {
    w->request_metrics().add_to(m, impl_->config.metrics ? w->outstanding() : 0);
    m.messages_received += w->receives().delivered();
    m.registrations += w->registrar().live();
    m.registered_bytes += w->registrar().live_bytes();
  }
  if (!m.peers.empty()) {
    // Read after the sums: a slot any request was counted under has its peer by then. Slots
    // not handed out yet hold nothing and are dropped.
    const std::vector<std::uint64_t> ids = peers.labelled_peers();
    m.peers.back().other = true;
    for (std::size_t i = 0; i < ids.size(); ++i) m.peers[i].peer = ids[i];
    m.peers.erase(m.peers.begin() + static_cast<std::ptrdiff_t>(ids.size()), m.peers.end() - 1);
  }
  impl_->counters.add_to(m);
  const engine::PeerIndex::Counts counts = peers.counts();
  m.peers_known = counts.known;
  m.peers_lost = counts.lost;
  m.imms_received = impl_->shared->imms.arrivals();
  m.in_flight = outstanding_requests();
  return m;
}

// ---------------------------------------------------------------- peer groups

Result<PeerGroupHandle> TransferEngine::add_peer_group(const std::vector<NetAddr>& peers) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (peers.empty()) return Status(Errc::invalid_argument, "a peer group needs peers");
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (auto st = engine::check_peer(peers[i], impl_->identity); !st.ok()) {
      return Status(st.code(), fmt::format("peer {}: {}", i, st.message()));
    }
  }
  const std::uint64_t id = impl_->next_peer_group.fetch_add(1, std::memory_order_relaxed);
  // Resolved on every group's worker: a scatter runs on the group of its source.
  if (auto st = impl_->on_every_group(
          [id, &peers](engine::DomainGroup& g) { return g.add_peer_group(id, peers); });
      !st.ok()) {
    // The groups that did resolve it would keep a table under an id nobody holds. A worker's
    // calls run in order, so this drop also follows an add that outlived control_timeout.
    (void)impl_->on_every_group([id](engine::DomainGroup& g) {
      g.drop_peer_group(id);
      return Status::success();
    });
    return st;
  }
  {
    std::unique_lock lock(impl_->groups_mutex);
    impl_->groups.emplace(id, peers);
  }
  return PeerGroupHandle{id, static_cast<std::uint32_t>(peers.size())};
}

Status TransferEngine::fence_peer(const NetAddr& peer) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_peer(peer, impl_->identity); !st.ok()) return st;
  // Every group of ours may hear from every group of the peer.
  Status st =
      impl_->on_every_group([&peer](engine::DomainGroup& g) { return g.fence_peer(peer); });
  if (st.ok()) {
    impl_->counters.peers_fenced.fetch_add(1, std::memory_order_relaxed);
    impl_->shared->peers.fenced(peer.instance_id());
  }
  return st;
}

}  // namespace fabric
