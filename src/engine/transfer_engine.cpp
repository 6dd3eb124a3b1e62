#include <fmt/format.h>

#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <random>
#include <unordered_set>

#include "common/log.hpp"
#include "backends/nic_choice.hpp"
#include "backends/open_domains.hpp"
#include "engine/callback_thread.hpp"
#include "engine/validate.hpp"
#include "engine/abandoned.hpp"
#include "engine/engine_shared.hpp"
#include "engine/engine_metrics.hpp"
#include "engine/group_plan.hpp"
#include "engine/imm_space.hpp"
#include "engine/worker.hpp"
#include "watcher/watcher_thread.hpp"
#include "fabric/engine.hpp"

namespace fabric {

using engine::Op;
using engine::OpKind;
using engine::OpPtr;

struct TransferEngine::Impl {
  Impl(const EngineConfig& c, ThreadCpus t)
      : config(c),
        threads(std::move(t)),
        shared(std::make_shared<engine::EngineShared>(c.max_outstanding_requests, threads.cpus)) {}

  EngineConfig config;
  // Where every thread of this engine runs (fabric/threads.hpp), whoever called create().
  ThreadCpus threads;
  NetAddr address;
  std::vector<GroupInfo> group_info;
  engine::LocalIdentity identity;
  // The callback thread, the request bound and the immediate table of every group.
  std::shared_ptr<engine::EngineShared> shared;
  // Group g's worker at [g]. Group 0 also serves SENDs, receives, immediate-only writes and
  // barriers, which have no source memory to pick a group by.
  std::vector<std::unique_ptr<engine::Worker>> workers;
  std::atomic<std::uint64_t> next_peer_group{1};
  // Started on first use: an idle poller costs a core on small machines.
  std::mutex watcher_mutex;
  std::unique_ptr<watcher::WatcherThread> watcher;

  // Submitters announce themselves so stop() can wait until none is between
  // its accepting_ check and its enqueue.
  std::atomic<bool> accepting{true};
  std::atomic<std::uint32_t> entering{0};
  // Callers inside progress(). Apart from entering: stop() waits for these only once the
  // worker thread has ended, so a progress() pass stuck in the provider cannot hang it.
  std::atomic<std::uint32_t> progressing{0};
  std::mutex stop_mutex;
  bool stopped = false;

  // What metrics() reports beside the workers' request counts.
  engine::EngineCounters counters;
  // Reserved immediate blocks (reserve_imms); shared so a reservation can outlive the engine.
  std::shared_ptr<detail::ImmSpace> imm_space = std::make_shared<detail::ImmSpace>();

  std::mutex counters_mutex;
  std::unordered_set<std::uint32_t> counter_imms;

  engine::Worker& group0() { return *workers.front(); }
  // The worker of the group that owns a request's source memory.
  engine::Worker& worker_of(const detail::Registration& src) { return *workers[src.group]; }

  // reg_mr's group: the named one, else the device's GPU group, else the host group.
  Result<std::uint32_t> group_for(Device device, std::optional<std::uint32_t> group) const {
    return engine::owning_group(group_info, config.host_group, device, group);
  }

  // Peer groups as submitters validate against them.
  std::shared_mutex groups_mutex;
  std::unordered_map<std::uint64_t, std::vector<NetAddr>> groups;

  Status check_group(const std::optional<PeerGroupHandle>& group, std::size_t peers,
                     const std::function<const NetAddr&(std::size_t)>& owner_of) {
    if (!group) return Status::success();
    std::shared_lock lock(groups_mutex);
    auto it = groups.find(group->id);
    if (it == groups.end()) {
      return {Errc::not_found, fmt::format("unknown peer group {}", group->id)};
    }
    if (it->second.size() != peers) {
      return {Errc::invalid_argument, fmt::format("peer group {} has {} peers, request has {}",
                                                  group->id, it->second.size(), peers)};
    }
    for (std::size_t i = 0; i < peers; ++i) {
      if (!(owner_of(i) == it->second[i])) {
        return {Errc::invalid_argument,
                fmt::format("destination {} does not belong to peer {} of group {}", i, i,
                            group->id)};
      }
    }
    return Status::success();
  }

  class Entry {
   public:
    explicit Entry(Impl& impl) : impl_(impl) {
      impl_.entering.fetch_add(1, std::memory_order_seq_cst);
      open_ = impl_.accepting.load(std::memory_order_seq_cst);
    }
    ~Entry() { impl_.entering.fetch_sub(1, std::memory_order_seq_cst); }
    [[nodiscard]] bool open() const { return open_; }

   private:
    Impl& impl_;
    bool open_ = false;
  };

  static Status shut() { return {Errc::shutdown, "the engine is stopped"}; }

  // 0 unless record_post_timings: one branch on the hot path otherwise.
  [[nodiscard]] std::uint64_t stamp() const noexcept {
    return config.record_post_timings ? engine::now_ns() : 0;
  }

  Status enqueue(engine::Worker& worker, OpPtr op, std::uint64_t called, PostKind kind) {
    op->submitted_ns = config.metrics ? (called != 0 ? called : engine::now_ns()) : 0;
    if (config.record_post_timings) {
      op->timing.kind = kind;
      op->timing.called = called;
      op->timing.enqueued = engine::now_ns();
    }
    if (!worker.admit()) {
      return {Errc::again, fmt::format("{} requests outstanding (max_outstanding_requests)",
                                       config.max_outstanding_requests)};
    }
    // Accepted from here on: in flight for dereg_mr() before we return ok
    // (after admit(), so a refused request never holds the registration).
    if (op->src) op->src->in_flight.fetch_add(1, std::memory_order_acq_rel);
    worker.submit(std::move(op));
    return Status::success();
  }

  // Runs fn on every group's worker in turn, each bounded by control_timeout; the first error.
  Status on_every_group(const std::function<Status(engine::DomainGroup&)>& fn) {
    for (auto& w : workers) {
      auto* worker = w.get();
      auto done = worker->call<bool>(
          [worker, fn]() -> Result<bool> {
            if (auto st = fn(worker->domains()); !st.ok()) return st;
            return true;
          },
          config.control_timeout);
      if (!done) return done.status();
    }
    return Status::success();
  }

  // Stops every worker, letting them drain at once; false if one is stuck in the provider.
  bool stop_workers() {
    for (auto& w : workers) w->request_stop();
    bool all = true;
    for (auto& w : workers) all &= w->stop();
    return all;
  }
};

namespace {
// Opening may wait on a provider (a verbs device in a loaded VM): bounded, but generously.
std::chrono::milliseconds open_bound(const EngineConfig& config) {
  return config.control_timeout + config.stuck_worker_grace;
}
}  // namespace

TransferEngine::TransferEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TransferEngine::~TransferEngine() { stop(); }

Result<std::unique_ptr<TransferEngine>> TransferEngine::create(const EngineConfig& config) {
  if (config.max_message_size == 0) {
    return Status(Errc::invalid_argument, "max_message_size must be > 0");
  }
  if (config.max_outstanding_requests == 0 || config.send_slots == 0) {
    return Status(Errc::invalid_argument,
                  "max_outstanding_requests and send_slots must be > 0");
  }
  if (config.domains_per_group == 0 || config.domains_per_group > NetAddr::kMaxDomains) {
    return Status(Errc::invalid_argument,
                  fmt::format("domains_per_group {} not in 1..{}", config.domains_per_group,
                              NetAddr::kMaxDomains));
  }
  auto planned = engine::plan_groups(config);
  if (!planned) return planned.status();
  if (config.host_group >= planned->size()) {
    return Status(Errc::invalid_argument,
                  fmt::format("host_group {} does not exist (the engine has {} groups)",
                              config.host_group, planned->size()));
  }

  auto thread_cpus = engine_thread_cpus(config.thread_cpus);
  if (!thread_cpus) return thread_cpus.status();
  auto impl = std::make_unique<Impl>(config, std::move(thread_cpus).value());
  engine::EngineShared& shared = *impl->shared;
  for (std::size_t g = 0; g < planned->size(); ++g) {
    impl->workers.push_back(std::make_unique<engine::Worker>(
        static_cast<std::uint32_t>(g), config, shared.callbacks, shared.imms, shared.admission));
  }
  // Every group opens its Domains on its own worker at once; then they are checked in order.
  for (std::size_t g = 0; g < planned->size(); ++g) {
    const engine::PlannedGroup& plan = (*planned)[g];
    impl->workers[g]->start(engine::worker_thread_cpus(plan.cpus, impl->threads.cpus), [open = plan.open, index = plan.plan_index] {
      return domain::open_domains(open, index);
    });
  }
  std::vector<std::vector<std::byte>> addresses;
  Status failed;
  for (std::size_t g = 0; g < planned->size() && failed.ok(); ++g) {
    auto opened = impl->workers[g]->wait_started(open_bound(config));
    if (!opened) {
      failed = planned->size() == 1
                   ? opened.status()
                   : Status(opened.status().code(),
                            fmt::format("group {}: {}", g, opened.status().message()));
      break;
    }
    if (g == 0) {
      impl->identity = {impl.get(), opened->backend, opened->provider, opened->addresses.size(),
                        opened->reads};
    } else if (opened->provider != impl->identity.provider) {
      failed = Status(Errc::invalid_argument,
                      fmt::format("group {} opened provider {} but group 0 opened {}: every "
                                  "group must use one provider",
                                  g, opened->provider, impl->identity.provider));
      break;
    }
    impl->identity.reads = impl->identity.reads && opened->reads;
    for (auto& a : opened->addresses) addresses.push_back(std::move(a));
    impl->group_info.push_back(
        GroupInfo{(*planned)[g].gpu,
                  engine::worker_thread_cpus((*planned)[g].cpus, impl->threads.cpus),
                  std::move(opened->nics)});
  }
  std::random_device rd;
  const std::uint64_t instance = (std::uint64_t{rd()} << 32) ^ rd();
  if (failed.ok()) {
    auto address =
        NetAddr::make(impl->identity.backend, impl->identity.provider, instance,
                      config.max_message_size, std::move(addresses), planned->size());
    if (address) {
      impl->address = std::move(address).value();
    } else {
      failed = address.status();
    }
  }
  if (!failed.ok()) {
    if (!impl->stop_workers()) {
      engine::abandon(std::move(impl->workers), std::move(impl->shared));
      return failed;
    }
    impl->shared->callbacks.stop();
    return failed;
  }
  log::info("engine up: {}", impl->address.describe());
  log::info("engine threads: fabric-cb, fabric-watch on CPUs {} ({})",
            impl->threads.cpus.to_string(), impl->threads.source);
  for (std::size_t g = 0; g < impl->group_info.size(); ++g) {
    const GroupInfo& info = impl->group_info[g];
    for (std::size_t i = 0; i < info.nics.size(); ++i) {
      log::info("group {} (gpu {}, fabric-wk{} on CPUs {}) Domain {} ({}): {}", g, info.gpu, g,
                info.cpus.to_string(), i, impl->identity.provider,
                info.nics[i].to_string());
    }
  }
  return std::unique_ptr<TransferEngine>(new TransferEngine(std::move(impl)));
}

const NetAddr& TransferEngine::main_address() const noexcept { return impl_->address; }
const EngineConfig& TransferEngine::config() const noexcept { return impl_->config; }
const ThreadCpus& TransferEngine::thread_cpus() const noexcept { return impl_->threads; }

EngineMetrics TransferEngine::metrics() const {
  EngineMetrics m;
  for (const auto& w : impl_->workers) {
    w->request_metrics().add_to(m);
    m.messages_received += w->receives().delivered();
    m.registrations += w->registrar().live();
    m.registered_bytes += w->registrar().live_bytes();
  }
  impl_->counters.add_to(m);
  m.imms_received = impl_->shared->imms.arrivals();
  m.in_flight = outstanding_requests();
  return m;
}
std::size_t TransferEngine::num_domains() const noexcept { return impl_->address.num_domains(); }
std::size_t TransferEngine::num_groups() const noexcept { return impl_->group_info.size(); }
const std::vector<DomainNic>& TransferEngine::domain_nics() const noexcept {
  return impl_->group_info.front().nics;
}
const std::vector<GroupInfo>& TransferEngine::groups() const noexcept {
  return impl_->group_info;
}

Result<std::vector<DomainNic>> resolve_domain_nics(const EngineConfig& config) {
  return domain::resolve_nics(config);
}

void TransferEngine::stop() {
  if (impl_->shared && impl_->shared->callbacks.on_this_thread()) {
    // Joining the callback thread from itself would deadlock.
    log::error("stop() called from an engine callback; ignored (call it from another thread)");
    return;
  }
  std::lock_guard lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
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

// ---------------------------------------------------------------- memory

namespace {

Status check_registration(const void* ptr, std::size_t len, Access access) {
  if (ptr == nullptr || len == 0) {
    return Status(Errc::invalid_argument,
                  fmt::format("reg_mr needs a non-null pointer and a length > 0 (got {}, {})",
                              ptr, len));
  }
  // Any bit beyond the known ones is refused, even next to a known one: a
  // caller asking for a right this build does not know must not get a
  // registration that silently lacks it.
  constexpr auto kKnownAccess = static_cast<std::uint32_t>(Access::remote_write | Access::remote_read);
  if ((static_cast<std::uint32_t>(access) & ~kKnownAccess) != 0) {
    return Status(Errc::invalid_argument,
                  fmt::format("unknown Access bits {:#x}", static_cast<std::uint32_t>(access)));
  }
  return Status::success();
}

}  // namespace

Result<Registered> TransferEngine::reg_mr(void* ptr, std::size_t len, Device device,
                                          Access access, std::optional<std::uint32_t> group) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = check_registration(ptr, len, access); !st.ok()) return st;
  auto g = impl_->group_for(device, group);
  if (!g) return g.status();
  auto* worker = impl_->workers[*g].get();
  const NetAddr& self = impl_->address;
  const void* engine = impl_.get();
  return worker->call<Registered>(
      [=, &self]() { return worker->registrar().register_memory(ptr, len, device, access, self, engine); },
      impl_->config.control_timeout);
}

Result<std::vector<Registered>> TransferEngine::reg_mrs(std::span<const MemoryRange> ranges,
                                                        Access access) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  // Each range's group; every group's ranges are registered in one pass of its worker.
  std::vector<std::vector<std::size_t>> by_group(impl_->workers.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    Status st = check_registration(ranges[i].ptr, ranges[i].length, access);
    auto g = impl_->group_for(ranges[i].device, ranges[i].group);
    if (st.ok() && !g) st = g.status();
    if (!st.ok()) return Status(st.code(), fmt::format("reg_mrs range {}: {}", i, st.message()));
    by_group[*g].push_back(i);
  }
  const NetAddr& self = impl_->address;
  const void* engine = impl_.get();
  std::vector<std::optional<Registered>> placed(ranges.size());
  // Undoes the groups done so far: nothing used the fresh registrations yet, each closes at once.
  const auto roll_back = [&] {
    for (std::size_t i = 0; i < placed.size(); ++i) {
      if (!placed[i]) continue;
      auto reg = placed[i]->handle.registration();
      auto* worker = impl_->workers[reg->group].get();
      worker->post_task([worker, reg] { worker->registrar().deregister(reg, {}); });
    }
  };
  for (std::size_t g = 0; g < by_group.size(); ++g) {
    if (by_group[g].empty()) continue;
    auto* worker = impl_->workers[g].get();
    // Copies: the caller may give up after control_timeout while the worker still reads them.
    std::vector<MemoryRange> mine;
    for (std::size_t i : by_group[g]) mine.push_back(ranges[i]);
    auto done = worker->call<std::vector<Registered>>(
        [=, &self, mine = std::move(mine), index = by_group[g]]()
            -> Result<std::vector<Registered>> {
          std::vector<Registered> out;
          out.reserve(mine.size());
          for (std::size_t j = 0; j < mine.size(); ++j) {
            const MemoryRange& r = mine[j];
            auto reg = worker->registrar().register_memory(r.ptr, r.length, r.device, access, self, engine);
            if (!reg.ok()) {
              for (auto& ok : out) worker->registrar().deregister(ok.handle.registration(), {});
              return Status(reg.status().code(), fmt::format("reg_mrs range {}: {}", index[j],
                                                             reg.status().message()));
            }
            out.push_back(std::move(reg).value());
          }
          return out;
        },
        impl_->config.control_timeout);
    if (!done) {
      roll_back();
      return done.status();
    }
    for (std::size_t j = 0; j < by_group[g].size(); ++j) {
      placed[by_group[g][j]] = std::move((*done)[j]);
    }
  }
  std::vector<Registered> out;
  out.reserve(placed.size());
  for (auto& p : placed) out.push_back(std::move(*p));
  return out;
}

Status TransferEngine::dereg_mr(const MrHandle& handle) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_source(handle, impl_->identity); !st.ok()) return st;
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  auto reg = handle.registration();
  auto* worker = &impl_->worker_of(*reg);
  worker->post_task([worker, reg, promise] { worker->registrar().deregister(reg, std::move(*promise)); });
  if (future.wait_for(impl_->config.control_timeout) != std::future_status::ready) {
    return {Errc::timeout, "dereg_mr: transfers using the region did not finish in time"};
  }
  return future.get();
}

// ---------------------------------------------------------------- messages

Status TransferEngine::submit_send(const NetAddr& to, std::span<const std::byte> message,
                                   OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_peer(to, impl_->identity); !st.ok()) return st;
  if (message.size() > to.max_message_size()) {
    return {Errc::invalid_argument,
            fmt::format("message of {} bytes exceeds the receiver's buffer size of {} bytes",
                        message.size(), to.max_message_size())};
  }
  if (message.size() > impl_->config.max_message_size) {
    return {Errc::invalid_argument,
            fmt::format("message of {} bytes exceeds this engine's max_message_size of {}",
                        message.size(), impl_->config.max_message_size)};
  }
  engine::Worker& worker = impl_->group0();
  OpPtr op = worker.new_op();
  op->kind = OpKind::send;
  // Assigned into the pooled Op's storage: no allocation once it has held a message this long.
  op->send.to = to;
  op->send.message.assign(message.begin(), message.end());
  op->on_done = std::move(on_done);
  return impl_->enqueue(worker, std::move(op), called, PostKind::send);
}

Status TransferEngine::submit_recvs(std::size_t len, std::uint32_t count, RecvCallback on_recv) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (len < impl_->config.max_message_size) {
    return {Errc::invalid_argument,
            fmt::format("receive buffers of {} bytes cannot hold the advertised "
                        "max_message_size of {} bytes",
                        len, impl_->config.max_message_size)};
  }
  if (count == 0) return {Errc::invalid_argument, "submit_recvs needs count > 0"};
  if (!on_recv) return {Errc::invalid_argument, "submit_recvs needs a callback"};
  auto* worker = &impl_->group0();
  auto result = worker->call<bool>(
      [worker, len, count, cb = std::move(on_recv)]() mutable -> Result<bool> {
        if (auto st = worker->receives().add_pool(len, count, std::move(cb)); !st.ok()) return st;
        return true;
      },
      impl_->config.control_timeout);
  return result.status();
}

// ---------------------------------------------------------------- writes

Status TransferEngine::submit_single_write(const SingleWrite& request, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_single_write(request, impl_->identity); !st.ok()) return st;
  engine::Worker& worker = impl_->worker_of(*request.src.mr.registration());
  OpPtr op = worker.new_op();
  op->kind = OpKind::single;
  if (auto st = engine::plan_single_write_into(op->single.pieces, request.length, request.routing,
                                               static_cast<std::uint32_t>(num_domains()));
      !st.ok()) {
    return st;
  }
  op->single.src_offset = request.src.offset;
  op->single.dst_offset = request.dst.offset;
  op->on_done = std::move(on_done);
  op->imm = request.imm;
  op->src = request.src.mr.registration();
  op->dst = request.dst.mr;
  return impl_->enqueue(worker, std::move(op), called, PostKind::single_write);
}

Status TransferEngine::submit_paged_writes(const PagedWrite& request, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_paged_write(request, impl_->identity); !st.ok()) return st;
  engine::Worker& worker = impl_->worker_of(*request.src.registration());
  OpPtr op = worker.new_op();
  op->kind = OpKind::paged;
  op->paged.page_length = request.page_length;
  op->paged.src = request.src_pages;  // copy-assigned: reuses the pooled Op's storage
  op->paged.dst = request.dst_pages;
  op->on_done = std::move(on_done);
  op->imm = request.imm;
  op->src = request.src.registration();
  op->dst = request.dst;
  return impl_->enqueue(worker, std::move(op), called, PostKind::paged_write);
}

// ---------------------------------------------------------------- reads
// The op's `src` registration is the local destination (counted in flight like a write's
// source, so dereg_mr waits for it) and its `dst` descriptor the peer's memory read from.

Status TransferEngine::submit_single_read(const SingleRead& request, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_single_read(request, impl_->identity); !st.ok()) return st;
  engine::Worker& worker = impl_->worker_of(*request.dst.mr.registration());
  OpPtr op = worker.new_op();
  op->kind = OpKind::single_read;
  if (auto st = engine::plan_single_write_into(op->single.pieces, request.length, request.routing,
                                               static_cast<std::uint32_t>(num_domains()));
      !st.ok()) {
    return st;
  }
  op->single.src_offset = request.src.offset;
  op->single.dst_offset = request.dst.offset;
  op->on_done = std::move(on_done);
  op->imm.reset();
  op->src = request.dst.mr.registration();
  op->dst = request.src.mr;
  return impl_->enqueue(worker, std::move(op), called, PostKind::single_read);
}

Status TransferEngine::submit_paged_reads(const PagedRead& request, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_paged_read(request, impl_->identity); !st.ok()) return st;
  engine::Worker& worker = impl_->worker_of(*request.dst.registration());
  OpPtr op = worker.new_op();
  op->kind = OpKind::paged_read;
  op->paged.page_length = request.page_length;
  op->paged.src = request.src_pages;  // copy-assigned: reuses the pooled Op's storage
  op->paged.dst = request.dst_pages;
  op->on_done = std::move(on_done);
  op->imm.reset();
  op->src = request.dst.registration();
  op->dst = request.src;
  return impl_->enqueue(worker, std::move(op), called, PostKind::paged_read);
}

Status TransferEngine::submit_imm(std::uint32_t imm, const MrDesc& dst, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_remote(dst, impl_->identity); !st.ok()) return st;
  engine::Worker& worker = impl_->group0();
  OpPtr op = worker.new_op();
  op->kind = OpKind::imm;
  op->on_done = std::move(on_done);
  op->imm = imm;
  op->dst = dst;
  return impl_->enqueue(worker, std::move(op), called, PostKind::imm);
}

// ---------------------------------------------------------------- immediates

Status TransferEngine::expect_imm_count(std::uint32_t imm, std::uint64_t count,
                                        ImmCallback on_reached) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (!on_reached) return {Errc::invalid_argument, "expect_imm_count needs a callback"};
  {
    std::lock_guard lock(impl_->counters_mutex);
    if (impl_->counter_imms.contains(imm)) {
      return {Errc::invalid_argument,
              fmt::format("imm {} is counted by an ImmCounter; release it first", imm)};
    }
  }
  impl_->shared->imms.expect(imm, count, std::move(on_reached));
  return Status::success();
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

Status TransferEngine::expect_imm_count(std::uint32_t imm, std::uint64_t count,
                                        std::shared_ptr<GpuFlag> flag, std::uint64_t value) {
  if (!flag) return {Errc::invalid_argument, "expect_imm_count needs a GpuFlag"};
  return expect_imm_count(imm, count, [flag = std::move(flag), value](std::uint32_t i,
                                                                      std::uint64_t) {
    if (Status st = flag->store(value); !st.ok()) {
      log::error("imm {}: setting the GPU flag at {} failed: {}", i, flag->device_word(),
                 st.to_string());
    }
  });
}

Result<ImmReservation> TransferEngine::reserve_imms(std::uint32_t count, std::string owner) {
  if (!impl_->accepting.load(std::memory_order_acquire)) {
    return Status(Errc::shutdown, "reserve_imms: the engine is stopped");
  }
  return impl_->imm_space->reserve(count, std::move(owner));
}

Result<std::shared_ptr<ImmCounter>> TransferEngine::imm_counter(std::uint32_t imm) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  {
    std::lock_guard lock(impl_->counters_mutex);
    if (!impl_->counter_imms.insert(imm).second) {
      return Status(Errc::invalid_argument,
                    fmt::format("imm {} already has an ImmCounter", imm));
    }
  }
  auto counter = std::make_shared<ImmCounter>(imm);
  // Synchronous, so value() already holds the arrivals counted before this call.
  // Refused while an expectation of imm is pending (ImmTable::attach).
  if (Status st = impl_->shared->imms.attach(counter); !st.ok()) {
    std::lock_guard lock(impl_->counters_mutex);
    impl_->counter_imms.erase(imm);
    return st;
  }
  return counter;
}

Status TransferEngine::release_imm_counter(std::uint32_t imm) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  {
    std::lock_guard lock(impl_->counters_mutex);
    if (impl_->counter_imms.erase(imm) == 0) {
      return {Errc::not_found, fmt::format("imm {} has no ImmCounter", imm)};
    }
  }
  impl_->shared->imms.detach(imm);
  return Status::success();
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
  if (st.ok()) impl_->counters.peers_fenced.fetch_add(1, std::memory_order_relaxed);
  return st;
}

Status TransferEngine::submit_scatter(const Scatter& request, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_source(request.src, impl_->identity); !st.ok()) return st;
  const auto k = static_cast<std::uint32_t>(num_domains());
  if (auto st = engine::check_scatter_routing(request.routing, k); !st.ok()) return st;
  if (auto st = engine::check_scatter_slices(request.src, request.slices, impl_->identity);
      !st.ok()) {
    return st;
  }
  const auto& slices = request.slices;
  if (auto st = impl_->check_group(
          request.group, slices.size(),
          [&](std::size_t i) -> const NetAddr& { return slices[i].dst.owner(); });
      !st.ok()) {
    return st;
  }
  engine::Worker& worker = impl_->worker_of(*request.src.registration());
  OpPtr op = worker.new_op();
  op->kind = OpKind::scatter;
  if (auto st = engine::plan_scatter_into(op->scatter.pieces, slices, request.routing, k);
      !st.ok()) {
    return st;
  }
  for (const ScatterSlice& s : slices) op->scatter.dsts.push_back(s.dst);
  op->on_done = std::move(on_done);
  op->imm = request.imm;
  op->src = request.src.registration();
  if (request.group) op->group = request.group->id;
  return impl_->enqueue(worker, std::move(op), called, PostKind::scatter);
}

Status TransferEngine::submit_barrier(const Barrier& request, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  for (std::size_t i = 0; i < request.dsts.size(); ++i) {
    if (auto st = engine::check_remote(request.dsts[i], impl_->identity); !st.ok()) {
      return {st.code(), fmt::format("peer {}: {}", i, st.message())};
    }
  }
  if (auto st = impl_->check_group(
          request.group, request.dsts.size(),
          [&](std::size_t i) -> const NetAddr& { return request.dsts[i].owner(); });
      !st.ok()) {
    return st;
  }
  engine::Worker& worker = impl_->group0();
  OpPtr op = worker.new_op();
  op->kind = OpKind::barrier;
  op->barrier.dsts.assign(request.dsts.begin(), request.dsts.end());
  op->on_done = std::move(on_done);
  op->imm = request.imm;
  if (request.group) op->group = request.group->id;
  return impl_->enqueue(worker, std::move(op), called, PostKind::barrier);
}

// ---------------------------------------------------------------- watcher

Result<Watcher> TransferEngine::alloc_uvm_watcher(WatchCallback callback, WatcherMemory memory) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (!callback) return Status(Errc::invalid_argument, "alloc_uvm_watcher needs a callback");
  std::lock_guard lock(impl_->watcher_mutex);
  if (!impl_->watcher) {
    watcher::WatcherOptions options;
    options.cpus = impl_->threads.cpus;
    impl_->watcher = std::make_unique<watcher::WatcherThread>(std::move(options));
  }
  return impl_->watcher->alloc(std::move(callback), memory);
}

}  // namespace fabric
