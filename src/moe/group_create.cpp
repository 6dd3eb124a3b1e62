// Building a group: the arena, its registration, the all-gather of every rank's address,
// descriptor and shared-memory name, the peer group and the counters; and its accessors.

#include <string>

#include "blob.hpp"
#include "group_impl.hpp"

namespace fabric::moe {

MoeGroup::MoeGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MoeGroup::~MoeGroup() {
  if (!impl_) return;
  auto& m = *impl_;
  m.leave();
  for (std::size_t i = 0; i < m.counters.size(); ++i)
    if (m.counters[i]) (void)m.engine->release_imm_counter(m.counters[i]->imm());
  if (m.reg.handle.valid()) (void)m.engine->dereg_mr(m.reg.handle);
}

Result<std::unique_ptr<MoeGroup>> MoeGroup::create(TransferEngine& engine, const MoeConfig& config,
                                                   const AllGather& all_gather) {
  if (auto st = validate(config); !st.ok()) return st;
  // Owned by the group from the start, so a failure half way releases what
  // was made (the registration, the counters) through the destructor.
  std::unique_ptr<MoeGroup> group(new MoeGroup(std::make_unique<Impl>()));
  auto& m = *group->impl_;
  m.engine = &engine;
  m.config = config;
  m.placement = Placement(config);
  const std::uint32_t n = config.world_size;
  for (std::uint32_t r = 0; r < n; ++r) m.layouts.push_back(arena_layout(config, r));
  for (std::uint32_t r = 0; r < n; ++r) {
    if (r == config.rank) continue;
    m.peers.push_back(r);
    if (m.placement.same_node(r, config.rank)) m.node_peers.push_back(r);
  }

  const auto& own_layout = m.layouts[config.rank];
  auto arena = Arena::create(own_layout.total_bytes, !m.node_peers.empty());
  if (!arena.ok()) return arena.status();
  m.own = std::move(arena.value());
  auto reg = engine.reg_mr(m.own.data(), m.own.size());
  if (!reg.ok()) return reg.status();
  m.reg = reg.value();

  GroupBlob mine{config.rank, config_fingerprint(config), engine.main_address().encode(),
                 m.reg.desc.encode(), m.own.name()};
  auto gathered = all_gather(encode_blob(mine));
  if (!gathered.ok()) return gathered.status();
  if (gathered->size() != n)
    return Status(Errc::invalid_argument, "moe: all_gather returned " +
                                              std::to_string(gathered->size()) + " blobs for " +
                                              std::to_string(n) + " ranks");
  m.base.assign(n, nullptr);
  m.mapped.resize(n);
  m.base[config.rank] = m.own.data();
  for (std::uint32_t r = 0; r < n; ++r) {
    auto blob = decode_blob((*gathered)[r]);
    if (!blob.ok()) return blob.status();
    if (blob->rank != r)
      return Status(Errc::invalid_argument, "moe: blob " + std::to_string(r) + " is rank " +
                                                std::to_string(blob->rank) + "'s");
    if (blob->fingerprint != mine.fingerprint)
      return Status(Errc::invalid_argument,
                    "moe: rank " + std::to_string(r) + " was created with a different config");
    auto addr = NetAddr::decode(blob->addr);
    if (!addr.ok()) return addr.status();
    auto desc = MrDesc::decode(blob->desc);
    if (!desc.ok()) return desc.status();
    if (desc->size() < m.layouts[r].total_bytes)
      return Status(Errc::invalid_argument,
                    "moe: rank " + std::to_string(r) + "'s arena is too small");
    m.addrs.push_back(addr.value());
    m.descs.push_back(desc.value());
    if (r != config.rank && m.placement.same_node(r, config.rank)) {
      auto peer = Arena::open(blob->shm_name, m.layouts[r].total_bytes);
      if (!peer.ok()) return peer.status();
      m.mapped[r] = std::move(peer.value());
      m.base[r] = m.mapped[r].data();
    }
  }
  // Everyone has mapped its node peers' arenas: the names can go.
  auto mapped = all_gather(std::vector<std::byte>{});
  if (!mapped.ok()) return mapped.status();
  m.own.unlink();

  if (!m.peers.empty()) {
    std::vector<NetAddr> peer_addrs;
    for (const auto r : m.peers) peer_addrs.push_back(m.addrs[r]);
    auto peer_group = engine.add_peer_group(peer_addrs);
    if (!peer_group.ok()) return peer_group.status();
    m.group = peer_group.value();
  }
  auto imms = agree_imm_block(engine, config, all_gather);
  if (!imms.ok()) return imms.status();
  m.imms = std::move(imms).value();
  m.counters.resize(kImmKinds * std::size_t{n});
  for (std::uint32_t kind = 0; kind < kImmKinds; ++kind)
    for (const auto s : m.peers) {
      auto counter = engine.imm_counter(m.imm(static_cast<ImmKind>(kind), s));
      if (!counter.ok()) return counter.status();
      m.counters[kind * std::size_t{n} + s] = counter.value();
    }
  m.dispatch_writes.assign(n, 0);
  m.combine_writes.assign(n, 0);
  return group;
}

const MoeConfig& MoeGroup::config() const noexcept { return impl_->config; }
const Placement& MoeGroup::placement() const noexcept { return impl_->placement; }
const ArenaLayout& MoeGroup::layout(std::uint32_t rank) const noexcept {
  return impl_->layouts[rank];
}
std::byte* MoeGroup::arena(std::uint32_t rank) const noexcept {
  return rank < impl_->base.size() ? impl_->base[rank] : nullptr;
}
std::uint32_t MoeGroup::epoch() const noexcept { return impl_->epoch; }
const SendPlan& MoeGroup::send_plan() const noexcept { return impl_->send; }
const ReceivePlan& MoeGroup::receive_plan() const noexcept { return impl_->recv; }
const Timeline& MoeGroup::timeline() const noexcept { return impl_->timeline; }
GroupStats MoeGroup::stats() const noexcept {
  auto s = impl_->stats;
  s.submissions = impl_->submitted;
  s.completions = impl_->done->completed();
  return s;
}
std::uint32_t MoeGroup::imm(ImmKind kind, std::uint32_t source) const noexcept {
  return impl_->imm(kind, source);
}

}  // namespace fabric::moe
