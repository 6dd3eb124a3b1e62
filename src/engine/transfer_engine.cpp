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
#include "engine/worker.hpp"
#include "watcher/watcher_thread.hpp"
#include "fabric/engine.hpp"

namespace fabric {

using engine::Op;
using engine::OpKind;
using engine::OpPtr;

struct TransferEngine::Impl {
  EngineConfig config;
  NetAddr address;
  std::vector<DomainNic> nics;
  engine::LocalIdentity identity;
  std::unique_ptr<engine::CallbackThread> callbacks;
  std::unique_ptr<engine::Worker> worker;
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

  std::mutex counters_mutex;
  std::unordered_set<std::uint32_t> counter_imms;

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

  Status enqueue(OpPtr op, std::uint64_t called, PostKind kind) {
    if (config.record_post_timings) {
      op->timing.kind = kind;
      op->timing.called = called;
      op->timing.enqueued = engine::now_ns();
    }
    if (!worker->admit()) {
      return {Errc::again, fmt::format("{} requests outstanding (max_outstanding_requests)",
                                       config.max_outstanding_requests)};
    }
    // Accepted from here on: in flight for dereg_mr() before we return ok
    // (after admit(), so a refused request never holds the registration).
    if (op->src) op->src->in_flight.fetch_add(1, std::memory_order_acq_rel);
    worker->submit(std::move(op));
    return Status::success();
  }
};

namespace {
// The CPUs of the host group's NUMA node (or core) when pinning is on.
CpuSet worker_placement(const EngineConfig& config) {
  const Pinning pinning = config.pinning.value_or(default_pinning());
  if (pinning == Pinning::off) return {};
  auto topo = detect_topology(TopologyOptions{});
  if (!topo || topo->groups.empty()) {
    log::warn("pinning {} requested but topology detection failed: {}", to_string(pinning),
              topo.status().to_string());
    return {};
  }
  return worker_cpus(topo->groups.front(), pinning);
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
  auto opened = domain::open_domains(config);
  if (!opened) return opened.status();

  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->nics = opened->nics;
  std::vector<std::vector<std::byte>> addresses;
  for (const auto& d : opened->domains) {
    addresses.emplace_back(d->address().begin(), d->address().end());
  }
  std::random_device rd;
  const std::uint64_t instance = (std::uint64_t{rd()} << 32) ^ rd();
  auto address = NetAddr::make(opened->backend, opened->provider, instance,
                               config.max_message_size, std::move(addresses));
  if (!address) return address.status();
  impl->address = std::move(address).value();
  impl->identity = {impl.get(), opened->backend, opened->provider, opened->domains.size()};

  impl->callbacks = std::make_unique<engine::CallbackThread>();
  impl->worker = std::make_unique<engine::Worker>(std::move(opened->domains), config,
                                                  *impl->callbacks);
  if (auto st = impl->worker->prepare(); !st.ok()) {
    impl->callbacks->stop();
    return st;
  }
  impl->worker->start(worker_placement(config));
  log::info("engine up: {}", impl->address.describe());
  for (std::size_t i = 0; i < impl->nics.size(); ++i) {
    log::info("Domain {} ({}): {}", i, opened->provider, impl->nics[i].to_string());
  }
  return std::unique_ptr<TransferEngine>(new TransferEngine(std::move(impl)));
}

const NetAddr& TransferEngine::main_address() const noexcept { return impl_->address; }
const EngineConfig& TransferEngine::config() const noexcept { return impl_->config; }
std::size_t TransferEngine::num_domains() const noexcept { return impl_->address.num_domains(); }
const std::vector<DomainNic>& TransferEngine::domain_nics() const noexcept { return impl_->nics; }

Result<std::vector<DomainNic>> resolve_domain_nics(const EngineConfig& config) {
  return domain::resolve_nics(config);
}

void TransferEngine::stop() {
  if (impl_->callbacks && impl_->callbacks->on_this_thread()) {
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
  if (!impl_->worker->stop()) {
    // The worker thread still runs (stuck in the provider) and uses both: leak them rather
    // than free what it may touch once the provider lets it go.
    engine::abandon(std::move(impl_->worker), std::move(impl_->callbacks));
    return;
  }
  // The worker ran its shutdown after any assist() pass in flight, and later passes return at
  // once: what is left is callers between their check of accepting and assist()'s return.
  while (impl_->progressing.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  // Callbacks may still reference receive buffers: finish them before the
  // worker (and its buffers) go away.
  impl_->callbacks->stop();
  impl_->worker.reset();
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
                                          Access access) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = check_registration(ptr, len, access); !st.ok()) return st;
  auto* worker = impl_->worker.get();
  const NetAddr& self = impl_->address;
  const void* engine = impl_.get();
  return worker->call<Registered>(
      [=, &self]() { return worker->register_memory(ptr, len, device, access, self, engine); },
      impl_->config.control_timeout);
}

Result<std::vector<Registered>> TransferEngine::reg_mrs(std::span<const MemoryRange> ranges,
                                                        Access access) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (auto st = check_registration(ranges[i].ptr, ranges[i].length, access); !st.ok()) {
      return Status(st.code(), fmt::format("reg_mrs range {}: {}", i, st.message()));
    }
  }
  if (ranges.empty()) return std::vector<Registered>{};
  auto* worker = impl_->worker.get();
  const NetAddr& self = impl_->address;
  const void* engine = impl_.get();
  // A copy: the caller may give up after control_timeout while the worker still reads them.
  std::vector<MemoryRange> copy(ranges.begin(), ranges.end());
  return worker->call<std::vector<Registered>>(
      [=, &self, ranges = std::move(copy)]() -> Result<std::vector<Registered>> {
        std::vector<Registered> out;
        out.reserve(ranges.size());
        for (std::size_t i = 0; i < ranges.size(); ++i) {
          const MemoryRange& r = ranges[i];
          auto reg = worker->register_memory(r.ptr, r.length, r.device, access, self, engine);
          if (!reg.ok()) {
            // Nothing used the fresh registrations yet: each closes at once.
            for (auto& done : out) worker->deregister(done.handle.registration(), {});
            return Status(reg.status().code(),
                          fmt::format("reg_mrs range {}: {}", i, reg.status().message()));
          }
          out.push_back(std::move(reg).value());
        }
        return out;
      },
      impl_->config.control_timeout);
}

Status TransferEngine::dereg_mr(const MrHandle& handle) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_source(handle, impl_->identity); !st.ok()) return st;
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  auto* worker = impl_->worker.get();
  worker->post_task([worker, reg = handle.registration(), promise] {
    worker->deregister(reg, std::move(*promise));
  });
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
  OpPtr op = impl_->worker->new_op();
  op->kind = OpKind::send;
  // Assigned into the pooled Op's storage: no allocation once it has held a message this long.
  op->send.to = to;
  op->send.message.assign(message.begin(), message.end());
  op->on_done = std::move(on_done);
  return impl_->enqueue(std::move(op), called, PostKind::send);
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
  auto* worker = impl_->worker.get();
  auto result = worker->call<bool>(
      [worker, len, count, cb = std::move(on_recv)]() mutable -> Result<bool> {
        if (auto st = worker->add_recv_pool(len, count, std::move(cb)); !st.ok()) return st;
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
  OpPtr op = impl_->worker->new_op();
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
  return impl_->enqueue(std::move(op), called, PostKind::single_write);
}

Status TransferEngine::submit_paged_writes(const PagedWrite& request, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_paged_write(request, impl_->identity); !st.ok()) return st;
  OpPtr op = impl_->worker->new_op();
  op->kind = OpKind::paged;
  op->paged.page_length = request.page_length;
  op->paged.src = request.src_pages;  // copy-assigned: reuses the pooled Op's storage
  op->paged.dst = request.dst_pages;
  op->on_done = std::move(on_done);
  op->imm = request.imm;
  op->src = request.src.registration();
  op->dst = request.dst;
  return impl_->enqueue(std::move(op), called, PostKind::paged_write);
}

Status TransferEngine::submit_imm(std::uint32_t imm, const MrDesc& dst, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_remote(dst, impl_->identity); !st.ok()) return st;
  OpPtr op = impl_->worker->new_op();
  op->kind = OpKind::imm;
  op->on_done = std::move(on_done);
  op->imm = imm;
  op->dst = dst;
  return impl_->enqueue(std::move(op), called, PostKind::imm);
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
  auto* worker = impl_->worker.get();
  worker->post_task([worker, imm, count, cb = std::move(on_reached)]() mutable {
    worker->imms().expect(imm, count, std::move(cb));
  });
  return Status::success();
}

bool TransferEngine::progress() {
  impl_->progressing.fetch_add(1, std::memory_order_seq_cst);
  const bool did = impl_->accepting.load(std::memory_order_seq_cst) && impl_->worker->assist();
  impl_->progressing.fetch_sub(1, std::memory_order_seq_cst);
  return did;
}

std::uint32_t TransferEngine::outstanding_requests() const noexcept {
  return impl_->worker ? impl_->worker->outstanding() : 0;
}

std::vector<PostTiming> TransferEngine::take_post_timings() {
  if (!impl_->worker) return {};  // stopped
  return impl_->worker->take_post_timings();
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
  auto* worker = impl_->worker.get();
  // Synchronous, so value() already holds the arrivals counted before this call.
  // Refused while an expectation of imm is pending (ImmTable::attach).
  auto attached = worker->call<bool>(
      [worker, counter]() -> Result<bool> {
        if (Status st = worker->imms().attach(counter); !st.ok()) return st;
        return true;
      },
      impl_->config.control_timeout);
  if (!attached) {
    std::lock_guard lock(impl_->counters_mutex);
    impl_->counter_imms.erase(imm);
    return attached.status();
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
  auto* worker = impl_->worker.get();
  worker->post_task([worker, imm] { worker->imms().detach(imm); });
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
  auto* worker = impl_->worker.get();
  auto id = worker->call<std::uint64_t>([worker, peers] { return worker->add_peer_group(peers); },
                                        impl_->config.control_timeout);
  if (!id) return id.status();
  {
    std::unique_lock lock(impl_->groups_mutex);
    impl_->groups.emplace(*id, peers);
  }
  return PeerGroupHandle{*id, static_cast<std::uint32_t>(peers.size())};
}

Status TransferEngine::fence_peer(const NetAddr& peer) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_peer(peer, impl_->identity); !st.ok()) return st;
  auto* worker = impl_->worker.get();
  auto done = worker->call<bool>(
      [worker, peer]() -> Result<bool> {
        if (auto st = worker->fence_peer(peer); !st.ok()) return st;
        return true;
      },
      impl_->config.control_timeout);
  return done.status();
}

Status TransferEngine::submit_scatter(const Scatter& request, OnDone on_done) {
  const std::uint64_t called = impl_->stamp();
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (auto st = engine::check_source(request.src, impl_->identity); !st.ok()) return st;
  const auto k = static_cast<std::uint32_t>(num_domains());
  if (auto st = engine::check_scatter_routing(request.routing, k); !st.ok()) return st;
  for (std::size_t i = 0; i < request.slices.size(); ++i) {
    const ScatterSlice& s = request.slices[i];
    Status st = engine::check_remote(s.dst, impl_->identity);
    if (st.ok()) st = engine::check_local_range(request.src, s.src_offset, s.length);
    if (st.ok()) st = engine::check_remote_range(s.dst, s.dst_offset, s.length);
    if (!st.ok()) return {st.code(), fmt::format("slice {}: {}", i, st.message())};
  }
  const auto& slices = request.slices;
  if (auto st = impl_->check_group(
          request.group, slices.size(),
          [&](std::size_t i) -> const NetAddr& { return slices[i].dst.owner(); });
      !st.ok()) {
    return st;
  }
  OpPtr op = impl_->worker->new_op();
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
  return impl_->enqueue(std::move(op), called, PostKind::scatter);
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
  OpPtr op = impl_->worker->new_op();
  op->kind = OpKind::barrier;
  op->barrier.dsts.assign(request.dsts.begin(), request.dsts.end());
  op->on_done = std::move(on_done);
  op->imm = request.imm;
  if (request.group) op->group = request.group->id;
  return impl_->enqueue(std::move(op), called, PostKind::barrier);
}

// ---------------------------------------------------------------- watcher

Result<Watcher> TransferEngine::alloc_uvm_watcher(WatchCallback callback, WatcherMemory memory) {
  Impl::Entry entry(*impl_);
  if (!entry.open()) return Impl::shut();
  if (!callback) return Status(Errc::invalid_argument, "alloc_uvm_watcher needs a callback");
  std::lock_guard lock(impl_->watcher_mutex);
  if (!impl_->watcher) impl_->watcher = std::make_unique<watcher::WatcherThread>();
  return impl_->watcher->alloc(std::move(callback), memory);
}

}  // namespace fabric
