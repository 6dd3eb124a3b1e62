// TransferEngine::watch_peer: the engine's one PeerLiveness, made on the first watch.

#include "engine/engine_impl.hpp"

namespace fabric {

Result<PeerWatch> TransferEngine::watch_peer(const NetAddr& peer, PeerStateCallback on_change,
                                             const PeerWatchOptions& options) {
  if (auto st = engine::check_peer(peer, impl_->identity); !st.ok()) return st;
  if (peer.instance_id() == impl_->address.instance_id()) {
    return Status{Errc::invalid_argument, "watch_peer: a peer, not this engine itself"};
  }
  std::shared_ptr<engine::PeerLiveness> service;
  {
    std::lock_guard lock(impl_->liveness_mutex);
    if (impl_->liveness_closed) return TransferEngine::Impl::shut();
    if (!impl_->liveness) {
      auto channel = impl_->channels->liveness_channel();
      if (!channel) {
        return Status{channel.status().code(), "watch_peer: " + channel.status().message()};
      }
      impl_->liveness = std::make_shared<engine::PeerLiveness>(
          impl_->channels, std::move(channel).value(), thread_cpus().cpus,
          impl_->config.request_timeout);
      impl_->channels->set_liveness(impl_->liveness);
    }
    service = impl_->liveness;
  }
  return service->watch(peer, std::move(on_change), options);
}

}  // namespace fabric
