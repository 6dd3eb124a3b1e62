// A VerbsDomain's peer table: resolving addresses to handles, fencing a peer, failing its queue.

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "common/log.hpp"
#include "verbs/verbs_domain.hpp"

namespace fabric::verbs {

Result<Peer*> VerbsDomain::find_or_add_peer(const VerbsAddress& address) {
  const auto bytes = address.encode();
  std::string key(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (auto it = peer_index_.find(key); it != peer_index_.end()) return peers_[it->second].get();
  auto ah = create_ah(pd_.get(), local_, address);
  if (!ah) return ah.status();
  auto peer = std::make_unique<Peer>();
  peer->handle = peers_.size();
  peer->address = address;
  peer->ah = std::move(ah).value();
  peer_index_.emplace(std::move(key), peer->handle);
  peers_.push_back(std::move(peer));
  return peers_.back().get();
}

Result<domain::PeerHandle> VerbsDomain::resolve_peer(std::span<const std::byte> address) {
  auto decoded = VerbsAddress::decode(address);
  if (!decoded) {
    return Status(Errc::invalid_argument,
                  fmt::format("not a verbs peer address: {}", decoded.status().message()));
  }
  auto peer = find_or_add_peer(*decoded);
  if (!peer) return peer.status();
  return (*peer)->handle;
}

Status VerbsDomain::fence_peer(std::span<const std::byte> address) {
  auto decoded = VerbsAddress::decode(address);
  if (!decoded) {
    return {Errc::invalid_argument,
            fmt::format("fence_peer: not a verbs peer address: {}", decoded.status().message())};
  }
  // A peer never seen here is recorded too: its handshakes are refused from now on.
  auto found = find_or_add_peer(*decoded);
  if (!found) return found.status();
  Peer& peer = **found;
  if (peer.fenced) return Status::success();
  peer.fenced = true;
  fail_queued(peer, Status(Errc::provider, kFencedPeer));
  std::erase(connecting_, &peer);
  std::erase(waiting_peers_, &peer);
  peer.waiting = false;
  for (std::unique_ptr<Connection>* conn : {&peer.outgoing, &peer.incoming}) {
    if (!*conn) continue;
    // The error state is the fence: the device drops what the peer still sends to these queue
    // pairs (its WRITEs fail on its side once its retries run out) and flushes what we posted.
    break_connection(**conn, kFencedPeer);
    fenced_connections_.push_back(std::move(*conn));
  }
  log::info("verbs: fenced {}", peer_name(peer));
  return Status::success();
}

void VerbsDomain::fail_queued(Peer& peer, const Status& status) {
  for (const QueuedRequest& q : peer.queued) {
    emit({domain::Event::Kind::tx_done, q.write.token, 0, 0, status});
  }
  peer.queued.clear();
}

}  // namespace fabric::verbs
