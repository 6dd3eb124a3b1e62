#include "fabric/weights/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>

#include "weights/geometry.hpp"

namespace fabric::weights {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

struct Executor::Impl {
  TransferEngine& engine;
  Schedule s;
  ExecutorConfig cfg;
  ExecutorPeers peers;
  ImmReservation own_imms;
  // This rank's writes per target, grouped by chunk in posting order.
  std::vector<std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>>> plan;
  std::vector<std::byte> staging_memory;
  Registered staging;
  std::optional<PeerGroupHandle> trainer_group;
  std::optional<PeerGroupHandle> inference_group;
  std::vector<MrDesc> other_trainers;

  std::mutex mu;
  std::condition_variable cv;
  std::map<std::uint64_t, std::uint64_t> free_blocks;  // offset -> length
  std::uint64_t in_use = 0;
  std::uint64_t outstanding = 0;
  Status first_error;
  std::uint64_t version = 0;
  bool started = false;
  bool abandoned = false;
  ExecutorStats stats;

  Impl(TransferEngine& e, Schedule sched, ExecutorConfig c, ExecutorPeers p, ImmReservation own)
      : engine(e), s(std::move(sched)), cfg(c), peers(std::move(p)), own_imms(std::move(own)) {}

  // The value inference rank r counts for this version (its block's, or the fixed one).
  [[nodiscard]] std::uint32_t data_value(std::uint32_t r) const {
    return peers.inference_imms.empty() ? data_imm(version) : data_imm(peers.inference_imms[r], version);
  }
  [[nodiscard]] std::uint32_t barrier_value(std::uint32_t t, std::uint32_t group) const {
    return peers.trainer_imms.empty() ? barrier_imm(version, group)
                                      : barrier_imm(peers.trainer_imms[t], version, group);
  }

  // One immediate to each of `dsts`, value(i) to the i-th; every completion waited for (bounded).
  template <typename Value>
  Status imm_to_each(const std::vector<MrDesc>& dsts, Value value) {
    std::vector<std::shared_ptr<CompletionFlag>> flags;
    Status first;
    for (std::size_t i = 0; i < dsts.size(); ++i) {
      auto flag = std::make_shared<CompletionFlag>();
      Status st = engine.submit_imm(value(i), dsts[i], flag);
      if (!st.ok()) {
        if (first.ok()) first = st;
        continue;
      }
      flags.push_back(std::move(flag));
    }
    for (const auto& f : flags) {
      Status st = f->wait(cfg.timeout);
      if (!st.ok() && first.ok()) first = st;
    }
    return first;
  }

  // First fit; waits (bounded) for completions to free staging.
  Result<std::uint64_t> allocate(std::uint64_t len) {
    len = std::max<std::uint64_t>(64, (len + 63) / 64 * 64);
    const auto t0 = Clock::now();
    std::unique_lock lock(mu);
    std::optional<std::uint64_t> got;
    auto fits = [&] {
      if (!first_error.ok()) return true;
      for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it) {
        if (it->second >= len) {
          got = it->first;
          std::uint64_t rest = it->second - len;
          free_blocks.erase(it);
          if (rest) free_blocks[*got + len] = rest;
          return true;
        }
      }
      return false;
    };
    if (!cv.wait_for(lock, cfg.timeout, fits)) {
      return Status(Errc::timeout, fmt::format("trainer rank {}: no staging memory freed within {} ms "
                                               "(writes not completing: a dead inference rank?)",
                                               cfg.rank, cfg.timeout.count()));
    }
    stats.staging_wait_s += seconds_since(t0);
    if (!first_error.ok()) return first_error;
    in_use += len;
    stats.peak_staging_bytes = std::max(stats.peak_staging_bytes, in_use);
    return *got;
  }

  void release(std::uint64_t off, std::uint64_t len) {  // with mu held
    len = std::max<std::uint64_t>(64, (len + 63) / 64 * 64);
    in_use -= len;
    auto [it, ok] = free_blocks.emplace(off, len);
    auto next = std::next(it);
    if (next != free_blocks.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_blocks.erase(next);
    }
    if (it != free_blocks.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_blocks.erase(it);
      }
    }
  }

  Status wait_drained() {
    const auto t0 = Clock::now();
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, cfg.timeout, [&] { return outstanding == 0; })) {
      return Status(Errc::timeout, fmt::format("trainer rank {}: {} writes of version {} still in flight after {} ms",
                                               cfg.rank, outstanding, version, cfg.timeout.count()));
    }
    stats.drain_wait_s += seconds_since(t0);
    return first_error;
  }
};

Executor::Executor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Executor::~Executor() {
  if (!impl_ || impl_->abandoned) return;
  (void)impl_->wait_drained();
  if (impl_->staging.handle.valid()) (void)impl_->engine.dereg_mr(impl_->staging.handle);
}

void Executor::abandon() noexcept { impl_->abandoned = true; }

namespace {

Status check_blocks(const std::vector<ImmBlock>& blocks, std::size_t ranks, const char* who) {
  if (blocks.empty()) return {};
  if (blocks.size() != ranks) {
    return Status(Errc::invalid_argument, fmt::format("{} immediate blocks for {} {} ranks", blocks.size(),
                                                      ranks, who));
  }
  for (std::size_t r = 0; r < ranks; ++r) {
    if (blocks[r].count < kUpdateImms) {
      return Status(Errc::invalid_argument, fmt::format("{} rank {}'s immediate block [{:#x}, +{}) is "
                                                        "smaller than kUpdateImms ({})",
                                                        who, r, blocks[r].first, blocks[r].count, kUpdateImms));
    }
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Executor>> Executor::create(TransferEngine& engine, Schedule schedule,
                                                   ExecutorConfig config, ExecutorPeers peers,
                                                   ImmReservation own_imms) {
  auto bad = [](std::string m) { return Status(Errc::invalid_argument, std::move(m)); };
  const auto T = schedule.trainer_ranks;
  const auto R = schedule.inference_ranks;
  if (config.rank >= T) return bad(fmt::format("trainer rank {} of a {}-trainer schedule", config.rank, T));
  if (peers.inference_arenas.size() != R) {
    return bad(fmt::format("{} inference arenas for a {}-inference-rank schedule", peers.inference_arenas.size(), R));
  }
  if (T > 1 && peers.trainer_barriers.size() != T) {
    return bad(fmt::format("{} trainer barrier descriptors for {} trainers", peers.trainer_barriers.size(), T));
  }
  if (T > 1 && peers.inference_imms.empty() != peers.trainer_imms.empty()) {
    return bad("give immediate blocks for both inference and trainer ranks, or for neither");
  }
  if (auto st = check_blocks(peers.inference_imms, R, "inference"); !st.ok()) return st;
  if (auto st = check_blocks(peers.trainer_imms, T, "trainer"); !st.ok()) return st;
  if (!peers.inference_imms.empty() && schedule.group_names.size() > kMaxMeshGroups) {
    return bad(fmt::format("{} mesh groups; an immediate block has barrier values for {}",
                           schedule.group_names.size(), kMaxMeshGroups));
  }
  if (own_imms.count() > 0 &&
      (peers.trainer_imms.size() <= config.rank || block_of(own_imms) != peers.trainer_imms[config.rank])) {
    return bad(fmt::format("trainer rank {}'s own reservation \"{}\" is not its entry of trainer_imms",
                           config.rank, own_imms.owner()));
  }
  if (engine.num_domains() != schedule.num_domains) {
    return bad(fmt::format("the schedule counts immediates for {} domains, the engine has {}", schedule.num_domains,
                           engine.num_domains()));
  }
  for (std::uint32_t r = 0; r < R; ++r) {
    const auto& d = peers.inference_arenas[r];
    if (d.empty() || d.size() < schedule.arena_bytes[r]) {
      return bad(fmt::format("inference rank {} registered {} bytes, the schedule needs {}", r,
                             d.empty() ? 0 : d.size(), schedule.arena_bytes[r]));
    }
  }
  auto impl = std::make_shared<Impl>(engine, std::move(schedule), config, std::move(peers),
                                     std::move(own_imms));
  const Schedule& s = impl->s;
  impl->plan.assign(s.targets.size(), {});
  std::uint64_t largest = 0;
  for (std::uint32_t i = 0; i < s.writes.size(); ++i) {
    const WriteOp& op = s.writes[i];
    if (op.trainer != config.rank) continue;
    const Chunk& c = s.chunks[op.chunk];
    auto& list = impl->plan[s.images[c.image].target];
    if (list.empty() || list.back().first != op.chunk) list.push_back({op.chunk, {}});
    list.back().second.push_back(i);
    largest = std::max(largest, c.bytes + c.scale_bytes + 128);
  }
  if (largest > config.watermark_bytes) {
    return bad(fmt::format("watermark of {} bytes holds no chunk of {} bytes (plan with a smaller max_chunk_bytes)",
                           config.watermark_bytes, largest));
  }
  impl->staging_memory.resize(std::max<std::uint64_t>(64, config.watermark_bytes));
  auto reg = engine.reg_mr(impl->staging_memory.data(), impl->staging_memory.size());
  if (!reg.ok()) return reg.status();
  impl->staging = *reg;
  impl->free_blocks[0] = impl->staging_memory.size();
  if (T > 1) {
    std::vector<NetAddr> addrs;
    for (std::uint32_t t = 0; t < T; ++t) {
      if (t == config.rank) continue;
      addrs.push_back(impl->peers.trainer_barriers[t].owner());
      impl->other_trainers.push_back(impl->peers.trainer_barriers[t]);
    }
    auto g = engine.add_peer_group(addrs);
    if (!g.ok()) return g.status();
    impl->trainer_group = *g;
  }
  std::vector<NetAddr> inf;
  for (const auto& d : impl->peers.inference_arenas) inf.push_back(d.owner());
  auto g = engine.add_peer_group(inf);
  if (!g.ok()) return g.status();
  impl->inference_group = *g;
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

const Schedule& Executor::schedule() const noexcept { return impl_->s; }

bool Executor::sends(std::uint32_t target) const {
  return target < impl_->plan.size() && !impl_->plan[target].empty();
}

Status Executor::begin(std::uint64_t version) {
  Impl& m = *impl_;
  if (m.started && version <= m.version) {
    return Status(Errc::invalid_argument, fmt::format("version {} after version {}: versions only grow", version, m.version));
  }
  if (version == 0) return Status(Errc::invalid_argument, "versions start at 1");
  // A failed update may have left writes in flight; they must be gone first.
  {
    std::unique_lock lock(m.mu);
    if (!m.cv.wait_for(lock, m.cfg.timeout, [&] { return m.outstanding == 0; })) {
      return Status(Errc::timeout, "writes of the previous update are still in flight");
    }
    m.first_error = Status::success();
  }
  m.version = version;
  m.started = true;
  return {};
}

Status Executor::send_target(std::uint32_t target, std::span<const SourceView> sources) {
  Impl& m = *impl_;
  if (!m.started) return Status(Errc::invalid_argument, "send_target before begin");
  if (target >= m.s.targets.size()) return Status(Errc::invalid_argument, fmt::format("target {} of {}", target, m.s.targets.size()));
  const PlannedTarget& t = m.s.targets[target];
  std::vector<const SourceView*> by_part(t.sources.size(), nullptr);
  for (const auto& v : sources) {
    for (std::size_t p = 0; p < t.sources.size(); ++p) {
      if (t.sources[p] == v.name) by_part[p] = &v;
    }
  }
  for (const auto& [chunk_index, writes] : m.plan[target]) {
    const Chunk& c = m.s.chunks[chunk_index];
    auto off = m.allocate(c.bytes + c.scale_bytes);
    if (!off.ok()) return off.status();
    const auto t0 = Clock::now();
    auto* base = m.staging_memory.data() + *off;
    Status st = prepare_chunk(m.s, c, by_part, {base, c.bytes}, {base + c.bytes, c.scale_bytes});
    m.stats.prepare_s += seconds_since(t0);
    const std::uint64_t block = *off;
    const std::uint64_t len = c.bytes + c.scale_bytes;
    auto refs = std::make_shared<std::atomic<std::size_t>>(writes.size());
    auto done = [self = impl_, refs, block, len](const Status& s) {
      std::lock_guard lock(self->mu);
      if (!s.ok() && self->first_error.ok()) self->first_error = s;
      --self->outstanding;
      if (refs->fetch_sub(1) == 1) self->release(block, len);
      self->cv.notify_all();
    };
    if (!st.ok()) {
      std::lock_guard lock(m.mu);
      m.release(block, len);
      return st;
    }
    const auto p0 = Clock::now();
    for (std::size_t k = 0; k < writes.size(); ++k) {
      const WriteOp& op = m.s.writes[writes[k]];
      SingleWrite w;
      w.length = op.length;
      w.imm = m.data_value(op.inference);
      w.src = LocalSlice{m.staging.handle, block + (op.scale ? c.bytes : 0)};
      w.dst = RemoteSlice{m.peers.inference_arenas[op.inference], op.dst_offset};
      {
        std::lock_guard lock(m.mu);
        ++m.outstanding;
      }
      Status sub = m.engine.submit_single_write(w, OnDone(DoneCallback(done)));
      if (!sub.ok()) {
        // Not sent: account for this and every later write of the chunk as failed.
        for (std::size_t rest = k; rest < writes.size(); ++rest) {
          if (rest > k) {
            std::lock_guard lock(m.mu);
            ++m.outstanding;
          }
          done(sub);
        }
        return sub;
      }
      ++m.stats.writes;
      m.stats.bytes += op.length;
    }
    m.stats.post_s += seconds_since(p0);
  }
  std::lock_guard lock(m.mu);
  return m.first_error;
}

Status Executor::finish_group(std::uint32_t group) {
  Impl& m = *impl_;
  if (auto st = m.wait_drained(); !st.ok()) return st;
  if (!m.trainer_group) return {};
  const std::uint32_t imm = m.barrier_value(m.cfg.rank, group);
  auto counter = m.engine.imm_counter(imm);
  if (!counter.ok()) return counter.status();
  Status st;
  if (m.peers.trainer_imms.empty()) {
    auto flag = std::make_shared<CompletionFlag>();
    Barrier b;
    b.group = m.trainer_group;
    b.imm = imm;
    b.dsts = m.other_trainers;
    st = m.engine.submit_barrier(b, flag);
    if (st.ok()) st = flag->wait(m.cfg.timeout);
  } else {
    // Each trainer counts in its own block: one value per destination, so one immediate each.
    std::vector<std::uint32_t> ranks;
    for (std::uint32_t t = 0; t < m.s.trainer_ranks; ++t) {
      if (t != m.cfg.rank) ranks.push_back(t);
    }
    st = m.imm_to_each(m.other_trainers, [&](std::size_t i) { return m.barrier_value(ranks[i], group); });
  }
  const auto t0 = Clock::now();
  const std::uint64_t others = m.s.trainer_ranks - 1;
  if (st.ok()) {
    st = (*counter)->wait(others, m.cfg.timeout);
    if (!st.ok()) {
      st = Status(Errc::timeout, fmt::format("barrier after mesh group {} of version {}: {} of {} other trainers "
                                             "arrived within {} ms",
                                             group, m.version, (*counter)->value(), others, m.cfg.timeout.count()));
    }
  }
  m.stats.barrier_wait_s += seconds_since(t0);
  (void)m.engine.release_imm_counter(imm);
  return st;
}

Status Executor::commit() {
  Impl& m = *impl_;
  if (auto st = m.wait_drained(); !st.ok()) return st;
  if (!m.peers.inference_imms.empty()) {
    return m.imm_to_each(m.peers.inference_arenas, [&](std::size_t r) {
      return m.data_value(static_cast<std::uint32_t>(r));
    });
  }
  auto flag = std::make_shared<CompletionFlag>();
  Barrier b;
  b.group = m.inference_group;
  b.imm = data_imm(m.version);
  b.dsts = m.peers.inference_arenas;
  if (auto st = m.engine.submit_barrier(b, flag); !st.ok()) return st;
  return flag->wait(m.cfg.timeout);
}

ExecutorStats Executor::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

}  // namespace fabric::weights
