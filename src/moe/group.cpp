#include "fabric/moe/group.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "arena.hpp"
#include "blob.hpp"

namespace fabric::moe {

namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { idle, planned, private_posted, staged, dispatched, combine_posted, pushed, combined };

std::string rank_list(const std::vector<std::uint32_t>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

const char* kind_name(ImmKind kind) {
  switch (kind) {
    case ImmKind::routes: return "dispatch routes";
    case ImmKind::overflow: return "dispatch tokens";
    case ImmKind::combine: return "combine rows";
    case ImmKind::barrier: return "buffer-reuse barrier";
    case ImmKind::abort: return "abort notice";
  }
  return "?";
}

std::uint64_t load_flag(const std::byte* word) {
  return std::atomic_ref<const std::uint64_t>(*reinterpret_cast<const std::uint64_t*>(word))
      .load(std::memory_order_acquire);
}
void store_flag(std::byte* word, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(word))
      .store(value, std::memory_order_release);
}

}  // namespace

struct MoeGroup::Impl {
  TransferEngine* engine = nullptr;
  MoeConfig config;
  Placement placement{MoeConfig{}};
  std::vector<ArenaLayout> layouts;
  Arena own;
  std::vector<Arena> mapped;           // node peers' arenas, by rank (empty elsewhere)
  std::vector<std::byte*> base;        // arena pointer per rank (self and node peers)
  Registered reg;
  std::vector<MrDesc> descs;           // per rank
  std::vector<NetAddr> addrs;          // per rank
  std::vector<std::uint32_t> peers;    // every rank but self, in rank order
  std::vector<std::uint32_t> node_peers;
  std::optional<PeerGroupHandle> group;
  std::vector<std::shared_ptr<ImmCounter>> counters;  // [kind * N + source]
  std::shared_ptr<CompletionCounter> done = std::make_shared<CompletionCounter>();
  std::shared_ptr<CompletionCounter> notices = std::make_shared<CompletionCounter>();
  bool barrier_pending = false;  // the last iteration's barrier is not consumed yet
  std::uint64_t submitted = 0;

  std::uint32_t epoch = 0;
  Phase phase = Phase::idle;
  SendPlan send;
  ReceivePlan recv;
  std::vector<std::uint32_t> dispatch_writes;  // per peer, this iteration
  std::vector<std::uint32_t> combine_writes;

  mutable std::mutex error_mutex;
  Status error;
  std::vector<std::uint32_t> broken;
  GroupStats stats;
  Timeline timeline;
  static std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          Clock::now().time_since_epoch())
                                          .count());
  }

  [[nodiscard]] std::uint32_t n() const { return config.world_size; }
  [[nodiscard]] std::uint32_t self() const { return config.rank; }
  [[nodiscard]] std::uint32_t imm(ImmKind kind, std::uint32_t source) const {
    return config.imm_base + static_cast<std::uint32_t>(kind) * n() + source;
  }
  ImmCounter& counter(ImmKind kind, std::uint32_t source) {
    return *counters[static_cast<std::size_t>(kind) * n() + source];
  }

  Status fail(Status status, std::vector<std::uint32_t> ranks = {}) {
    std::lock_guard lock(error_mutex);
    if (error.ok()) {
      error = std::move(status);
      broken = std::move(ranks);
    }
    return error;
  }
  Status check(Phase expected, const char* step) {
    {
      std::lock_guard lock(error_mutex);
      if (!error.ok()) return error;
    }
    if (phase != expected)
      return {Errc::invalid_argument, std::string("moe: ") + step + " called out of order"};
    return Status::success();
  }

  // Ranks that some peer reported dead (abort notices received), if any.
  std::vector<std::uint32_t> reported_dead() {
    std::vector<std::uint32_t> dead;
    for (const auto r : peers)
      if (counter(ImmKind::abort, r).value() > 0) dead.push_back(r);
    return dead;
  }

  // Fails the group naming `ranks`, and tells every other peer so that it
  // names the same ranks instead of the survivors that stopped talking to it.
  Status fail_naming(const std::string& what, std::vector<std::uint32_t> ranks) {
    const auto dead = reported_dead();
    std::string text;
    if (!dead.empty()) {
      ranks = dead;
      text = "moe " + what + " (epoch " + std::to_string(epoch) + "): rank(s) " +
             rank_list(ranks) + " reported dead or unreachable by a peer";
    } else {
      text = "moe " + what + " (epoch " + std::to_string(epoch) + "): nothing from rank(s) " +
             rank_list(ranks) + " within " + std::to_string(config.timeout.count()) +
             " ms (dead or unreachable)";
    }
    for (const auto p : peers) {
      if (std::find(ranks.begin(), ranks.end(), p) != ranks.end()) continue;
      for (const auto r : ranks)
        (void)engine->submit_imm(imm(ImmKind::abort, r), descs[p], notices);
    }
    return fail({Errc::timeout, text}, std::move(ranks));
  }

  // Polls until `ready(s)` holds for every listed source or the deadline;
  // an abort notice from any peer ends the wait at once.
  template <typename Ready>
  std::vector<std::uint32_t> poll_until(std::vector<std::uint32_t> pending, Ready ready,
                                        bool& aborted) {
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

  // Waits for expected[s] immediates of `kind` from each source, within one
  // deadline; names every source that fell short, then checks that nothing
  // beyond the plan arrived.
  Status await_imms(ImmKind kind, const std::vector<std::uint32_t>& expected) {
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

  // Waits until each listed node peer raised its flag word (where(rank)) to this epoch.
  template <typename Where>
  Status await_flags(const std::vector<std::uint32_t>& ranks, Where where, const char* what) {
    bool aborted = false;
    auto missing = poll_until(
        ranks, [&](std::uint32_t r) { return load_flag(where(r)) >= epoch; }, aborted);
    if (!missing.empty()) return fail_naming(what, std::move(missing));
    return Status::success();
  }

  Status submit(Scatter scatter) {
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
};

MoeGroup::MoeGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MoeGroup::~MoeGroup() {
  if (!impl_) return;
  auto& m = *impl_;
  // Let WRITEs that read the arena finish before it is unmapped (bounded).
  (void)m.done->wait(m.submitted, m.config.timeout);
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
      return Status(Errc::invalid_argument, "moe: rank " + std::to_string(r) + "'s arena is too small");
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

std::vector<std::uint32_t> MoeGroup::broken_ranks() const {
  std::lock_guard lock(impl_->error_mutex);
  return impl_->broken;
}
Status MoeGroup::error() const {
  std::lock_guard lock(impl_->error_mutex);
  return impl_->error;
}

std::uint64_t MoeGroup::stray_immediates() const {
  std::uint64_t total = 0;
  for (const auto& c : impl_->counters)
    if (c) total += c->value();
  return total;
}

Result<const SendPlan*> MoeGroup::begin_dispatch(std::span<const std::int32_t> topk_idx,
                                                 std::uint32_t group_tokens) {
  auto& m = *impl_;
  if (auto st = m.check(Phase::idle, "begin_dispatch"); !st.ok()) return st;
  m.timeline = Timeline{};
  m.timeline.begin_dispatch = Impl::now_ns();
  if (m.barrier_pending) {
    // Every peer finished reading what this rank wrote last time, and is done
    // with its own buffers that this rank is about to write.
    std::vector<std::uint32_t> expected(m.n(), 1);
    if (auto st = m.await_imms(ImmKind::barrier, expected); !st.ok()) return st;
    m.barrier_pending = false;
  }
  ++m.epoch;
  auto plan = plan_routes(m.config, m.epoch, topk_idx, group_tokens,
                          std::span<std::byte>(m.own.data(), m.own.size()));
  if (!plan.ok()) {
    --m.epoch;  // bad input loses nothing: the iteration did not start
    return plan.status();
  }
  m.send = std::move(plan.value());
  std::fill(m.dispatch_writes.begin(), m.dispatch_writes.end(), 0);
  std::fill(m.combine_writes.begin(), m.combine_writes.end(), 0);
  m.phase = Phase::planned;
  return &m.send;
}

Status MoeGroup::post_private() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::planned, "post_private"); !st.ok()) return st;
  const auto& own = m.layouts[m.self()];
  const auto& p = m.send;
  // This rank's own routes go straight into its private region for itself.
  {
    const std::uint32_t d = m.self();
    std::memmove(m.own.data() + own.header_offset(d) - p.list_bytes[d],
                 m.own.data() + p.header[d] - p.list_bytes[d], p.list_bytes[d] + own.header_bytes);
  }
  Scatter scatter;
  scatter.group = m.group;
  scatter.imm = m.imm(ImmKind::routes, m.self());
  for (const auto d : m.peers) {
    const bool direct = m.placement.same_node(d, m.self());
    const std::uint64_t slots = direct ? 0 : std::min(p.count[d], own.private_tokens);
    ScatterSlice slice;
    slice.dst = m.descs[d];
    slice.length = p.list_bytes[d] + own.header_bytes + slots * own.slot_bytes;
    slice.src_offset = p.header[d] - p.list_bytes[d];
    slice.dst_offset = m.layouts[d].header_offset(m.self()) - p.list_bytes[d];
    scatter.slices.push_back(slice);
    if (!direct) ++m.dispatch_writes[d];
  }
  m.timeline.peers_posted = static_cast<std::uint32_t>(scatter.slices.size());
  if (auto st = m.submit(std::move(scatter)); !st.ok()) return st;
  m.timeline.private_posted = Impl::now_ns();
  m.phase = Phase::private_posted;
  return Status::success();
}

Status MoeGroup::mark_staged() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::private_posted, "mark_staged"); !st.ok()) return st;
  store_flag(m.own.data() + m.layouts[m.self()].flag_send_ready(), m.epoch);
  m.phase = Phase::staged;
  return Status::success();
}

Result<const ReceivePlan*> MoeGroup::complete_dispatch() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::staged, "complete_dispatch"); !st.ok()) return st;
  const std::uint32_t n = m.n();
  const std::uint32_t self = m.self();
  if (auto st = m.await_imms(ImmKind::routes, std::vector<std::uint32_t>(n, 1)); !st.ok()) return st;
  m.timeline.routes_in = Impl::now_ns();
  auto plan = plan_receive(m.config, m.epoch,
                           std::span<const std::byte>(m.own.data(), m.own.size()));
  if (!plan.ok()) return m.fail(plan.status());
  m.recv = std::move(plan.value());

  // The rest of each inter-node destination's tokens, now that every
  // source's counts say where they go.
  const auto& own = m.layouts[self];
  Scatter overflow;
  overflow.imm = m.imm(ImmKind::overflow, self);
  for (const auto d : m.peers) {
    if (m.placement.same_node(d, self) || m.send.count[d] <= own.private_tokens) continue;
    ScatterSlice slice;
    slice.dst = m.descs[d];
    slice.length = std::uint64_t{m.send.count[d] - own.private_tokens} * own.slot_bytes;
    slice.src_offset = m.send.slot(own, d, own.private_tokens);
    slice.dst_offset = m.layouts[d].exchange_slot(overflow_first_slot(m.config, m.recv.counts, self, d));
    overflow.slices.push_back(slice);
    ++m.dispatch_writes[d];
  }
  if (auto st = m.submit(std::move(overflow)); !st.ok()) return st;
  m.timeline.overflow_posted = Impl::now_ns();
  for (const auto d : m.peers)
    m.stats.max_writes_per_peer_dispatch =
        std::max<std::uint64_t>(m.stats.max_writes_per_peer_dispatch, m.dispatch_writes[d]);

  std::vector<std::uint32_t> expected(n, 0);
  std::vector<std::uint32_t> direct_sources;
  for (const auto s : m.peers) {
    const std::uint32_t sent = m.recv.counts[std::size_t{s} * n + self];
    if (m.placement.same_node(s, self)) {
      if (sent > 0) direct_sources.push_back(s);
    } else if (sent > own.private_tokens) {
      expected[s] = 1;
    }
  }
  if (auto st = m.await_imms(ImmKind::overflow, expected); !st.ok()) return st;
  if (auto st = m.await_flags(
          direct_sources,
          [&](std::uint32_t r) { return m.base[r] + m.layouts[r].flag_send_ready(); },
          "dispatch staging");
      !st.ok())
    return st;
  for (const auto s : direct_sources)
    m.stats.direct_bytes += std::uint64_t{m.recv.counts[std::size_t{s} * n + self]} * own.slot_bytes;
  m.timeline.tokens_in = Impl::now_ns();
  m.phase = Phase::dispatched;
  return &m.recv;
}

Status MoeGroup::post_combine() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::dispatched, "post_combine"); !st.ok()) return st;
  const std::uint32_t self = m.self();
  const auto& own = m.layouts[self];
  Scatter scatter;
  scatter.imm = m.imm(ImmKind::combine, self);
  for (const auto& w : m.recv.combine_writes) {
    for (std::uint32_t member = 0; member < m.config.dp_size; ++member) {
      const std::uint32_t p = w.dp_group * m.config.dp_size + member;
      if (p == self || m.placement.same_node(p, self)) continue;
      ScatterSlice slice;
      slice.dst = m.descs[p];
      slice.length = w.rows * own.row_bytes;
      slice.src_offset = own.exchange_row(w.first_row);
      slice.dst_offset = m.layouts[p].combine_row(w.dst_row);
      scatter.slices.push_back(slice);
      ++m.combine_writes[p];
    }
  }
  if (auto st = m.submit(std::move(scatter)); !st.ok()) return st;
  m.timeline.combine_posted = Impl::now_ns();
  for (const auto d : m.peers)
    m.stats.max_writes_per_peer_combine =
        std::max<std::uint64_t>(m.stats.max_writes_per_peer_combine, m.combine_writes[d]);
  m.phase = Phase::combine_posted;
  return Status::success();
}

Status MoeGroup::push_combine_direct() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::combine_posted, "push_combine_direct"); !st.ok()) return st;
  const std::uint32_t self = m.self();
  const auto& own = m.layouts[self];
  for (const auto& w : m.recv.combine_writes) {
    for (std::uint32_t member = 0; member < m.config.dp_size; ++member) {
      const std::uint32_t p = w.dp_group * m.config.dp_size + member;
      if (p != self && !m.placement.same_node(p, self)) continue;
      std::memcpy(m.base[p] + m.layouts[p].combine_row(w.dst_row),
                  m.own.data() + own.exchange_row(w.first_row), w.rows * own.row_bytes);
      if (p != self) m.stats.direct_bytes += w.rows * own.row_bytes;
    }
  }
  return Status::success();
}

Status MoeGroup::mark_combine_pushed() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::combine_posted, "mark_combine_pushed"); !st.ok()) return st;
  for (const auto p : m.node_peers)
    store_flag(m.base[p] + m.layouts[p].flag_combine_from(m.self()), m.epoch);
  m.phase = Phase::pushed;
  return Status::success();
}

Status MoeGroup::await_combine() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::pushed, "await_combine"); !st.ok()) return st;
  const std::uint32_t self = m.self();
  std::vector<std::uint32_t> expected(m.n(), 0);
  for (const auto d : m.peers)
    if (!m.placement.same_node(d, self) && m.send.rows_from[d] > 0) expected[d] = 1;
  if (auto st = m.await_imms(ImmKind::combine, expected); !st.ok()) return st;
  if (auto st = m.await_flags(
          m.node_peers,
          [&](std::uint32_t r) { return m.own.data() + m.layouts[self].flag_combine_from(r); },
          "combine rows");
      !st.ok())
    return st;
  m.timeline.combine_in = Impl::now_ns();
  m.phase = Phase::combined;
  return Status::success();
}

Status MoeGroup::finish_combine() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::combined, "finish_combine"); !st.ok()) return st;
  // This rank's WRITEs read its send and exchange regions; they must be done
  // before any peer, told by the barrier, overwrites what they read.
  if (auto st = m.done->wait(m.submitted, m.config.timeout); !st.ok()) {
    return m.fail({st.code(), "moe: this rank's WRITEs of epoch " + std::to_string(m.epoch) +
                                  " did not complete: " + st.message()});
  }
  if (!m.peers.empty()) {
    Barrier barrier;
    barrier.group = m.group;
    barrier.imm = m.imm(ImmKind::barrier, m.self());
    for (const auto d : m.peers) barrier.dsts.push_back(m.descs[d]);
    auto st = m.engine->submit_barrier(barrier, m.done);
    if (!st.ok()) return m.fail(st);
    ++m.submitted;
  }
  ++m.stats.iterations;
  m.barrier_pending = true;
  m.phase = Phase::idle;
  return Status::success();
}

Status MoeGroup::quiesce() {
  auto& m = *impl_;
  if (auto st = m.check(Phase::idle, "quiesce"); !st.ok()) return st;
  if (m.barrier_pending) {
    if (auto st = m.await_imms(ImmKind::barrier, std::vector<std::uint32_t>(m.n(), 1)); !st.ok())
      return st;
    m.barrier_pending = false;
  }
  if (auto st = m.done->wait(m.submitted, m.config.timeout); !st.ok()) return m.fail(st);
  if (const auto stray = stray_immediates(); stray != 0)
    return m.fail({Errc::malformed, "moe: " + std::to_string(stray) +
                                        " immediate(s) arrived beyond the plans"});
  return Status::success();
}

}  // namespace fabric::moe
