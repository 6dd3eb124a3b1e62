#pragma once
// TransferEngine: the whole public API. Contract in docs/api.md.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fabric/channel.hpp"
#include "fabric/completion.hpp"
#include "fabric/device.hpp"
#include "fabric/domain_nic.hpp"
#include "fabric/gpu_flag.hpp"
#include "fabric/imm_counter.hpp"
#include "fabric/imm_reservation.hpp"
#include "fabric/memory.hpp"
#include "fabric/metrics.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/peer_watch.hpp"
#include "fabric/post_timing.hpp"
#include "fabric/requests.hpp"
#include "fabric/status.hpp"
#include "fabric/threads.hpp"
#include "fabric/topology.hpp"
#include "fabric/verbs_config.hpp"
#include "fabric/watcher.hpp"

namespace fabric {

// One DomainGroup (docs/api.md#groups): the Domains, on the NICs near one GPU,
// that serve that GPU's memory, with their own worker thread.
struct GroupConfig {
  // The CUDA device whose memory reg_mr() gives this group; -1: none (host
  // memory only, when reg_mr names the group).
  int gpu = -1;
  // As EngineConfig::nics, for this group's Domains; empty: what the topology
  // plan (or the provider default) gives the group at this position.
  std::vector<std::string> nics;
  // Where the group's worker runs, within EngineConfig::thread_cpus; empty: the plan's CPUs for
  // the group under EngineConfig::pinning (all thread_cpus when pinning is off).
  CpuSet cpus;
};

struct EngineConfig {
  // libfabric (EFA, software providers) or verbs (RC NICs); available_backends()
  // tells which this host can open.
  Backend backend = Backend::libfabric;
  // libfabric only: "shm", "tcp" (tcp;ofi_rxm), "sockets", "udp" (udp;ofi_rxd), "efa", any
  // other libfabric provider string, or "auto" (the first RDM provider that
  // offers what the engine needs).
  std::string provider = "shm";
  // Domains (NICs or provider instances) per group; all peers must agree.
  std::uint32_t domains_per_group = 1;
  // The engine's DomainGroups, at most NetAddr::kMaxGroups. Empty: one per
  // group of detect_topology()'s plan (one per GPU, GPU g's at g; one group on
  // a host without GPUs), each with the plan's NICs and CPUs, group 0 with
  // EngineConfig::nics. Given: exactly these (EngineConfig::nics must then be
  // empty). Host memory goes to host_group unless reg_mr names another.
  std::vector<GroupConfig> groups;
  // The group reg_mr() gives host memory (and a GPU no group serves) when the
  // call names none: a process whose host buffers sit on NUMA node n names the
  // group near n once here instead of at every registration. Must be one of
  // the engine's groups. SEND, receives, immediate-only writes and barriers
  // still run on group 0.
  std::uint32_t host_group = 0;
  // IP-based providers bind here and nowhere else (unless nics names NICs).
  std::string bind_address = "127.0.0.1";
  // The NIC of each Domain: Domain i opens nics[i]. Empty: IP providers bind
  // every Domain to bind_address; efa, the verbs backend (unless
  // VerbsConfig::device is set) and providers whose domains are named after
  // NICs open the NICs detect_topology() plans for the group, Domain i on
  // NIC i mod n (plan_group_nics, fabric/nic_plan.hpp); anything else opens
  // the provider's first device. Otherwise exactly domains_per_group
  // entries, which always win over the plan, each one of
  //  - an IP address or a network interface of this host: IP providers (tcp,
  //    sockets, udp) bind Domain i there (an interface: its first IPv4
  //    address), so K Domains can be K real interfaces;
  //  - a device name: libfabric's domain name for other providers (efa:
  //    "rdmap16s27-rdm", see fabric-info) or, on the verbs backend, the verbs
  //    device ("mlx5_0"), overriding VerbsConfig::device.
  // TransferEngine::domain_nics() and resolve_domain_nics() say what each got.
  std::vector<std::string> nics;
  // Largest SEND a peer may send us; advertised in our NetAddr.
  std::uint32_t max_message_size = 64 * 1024;
  // Submissions accepted but not yet completed, per engine, before submit_*
  // returns Errc::again.
  std::uint32_t max_outstanding_requests = 16384;
  // Receive buffers (each max_message_size bytes) of the one pool all channels share, posted
  // when the first channel opens (TransferEngine::channel).
  std::uint32_t channel_recv_buffers = 64;
  // Registered staging slots for outgoing SENDs (each max_message_size bytes).
  std::uint32_t send_slots = 64;
  // Worker idle policy: spin this long after the last activity, then yield,
  // then sleep up to idle_sleep between polls (a submission wakes it at once).
  // busy_poll keeps the worker spinning forever (lowest latency, one core).
  // idle_spin is 0 by default: a yield costs one syscall when the CPU has nothing else to
  // run, while a pure spin keeps the thread the worker just handed an immediate to (often on
  // the same CPU) off it for the whole spin (docs/benchmarks.md, "Immediate round trip"). Raise
  // it only where each worker has a core of its own.
  std::chrono::microseconds idle_spin{0};
  std::chrono::microseconds idle_yield{1000};
  std::chrono::microseconds idle_sleep{200};
  bool busy_poll = false;
  // The submitting thread posts a request's first WRITE (or its SEND) itself when the group's
  // worker is not in a pass of its loop, instead of handing the request over and waiting for
  // the worker to wake; the worker posts the rest. It cuts submit -> first post to the cost of
  // the post, and charges that one provider call (about 1 us on shm) to submit_*. Off, submit_*
  // only queues (docs/api.md, "Posting on the caller's thread").
  bool post_on_submit = false;
  // Bound on reg_mr/dereg_mr/submit_recvs waiting for the worker.
  std::chrono::milliseconds control_timeout{10000};
  // Bound on stop() waiting for posted work to drain before failing it.
  std::chrono::milliseconds drain_timeout{2000};
  // How much longer stop() waits for a worker thread stuck inside a provider call (a peer
  // holding a lock in our shm region, docs/reliability.md#shm-locks) before it leaves that
  // thread running, with its Domains and callback thread, and returns. Generous: a slow but
  // healthy shutdown (sanitizers, an overloaded host) must never be mistaken for a stuck one.
  std::chrono::milliseconds stuck_worker_grace{60000};
  // A request whose WRITEs/SENDs see no completion for this long, from a peer that completes
  // nothing else either, fails with Errc::timeout (a dead or unreachable peer). One whose peer
  // still completes other requests is slow and waits on, up to 6x this with none of its own
  // (then the provider is holding it: it fails). Its posted operations stay accounted until
  // the provider lets go of them.
  std::chrono::milliseconds request_timeout{5000};
  // A WRITE completes only once delivered into the target's memory, so that
  // target-side failures (a revoked key) reach the writer. Unset: on for
  // tcp;ofi_rxm, provider default elsewhere (docs/api.md, provider notes).
  std::optional<bool> delivery_complete;
  // Where the worker runs: unset picks default_pinning() (off below 4 usable
  // CPUs, numa otherwise); the CPUs come from detect_topology()'s group plan.
  std::optional<Pinning> pinning;
  // Where every thread that the engine and the workloads on it start may run: the workers, the
  // callback thread, the watcher, the KV ticker, MoE helpers (docs/concepts.md, "Threads and
  // CPUs"). Empty: FABRIC_CPUS when set, else every CPU of the process (its cgroup's cpuset).
  // Never the mask of the thread that calls create(): a host that pinned that thread to one
  // core would otherwise pin the engine there too. A worker under `pinning` runs on its plan's
  // CPUs within these. create() fails with invalid_argument when none of them is usable.
  CpuSet thread_cpus;
  // Verbs backend only.
  VerbsConfig verbs;
  // Stamp every request on its way to the NIC (take_post_timings). Costs a
  // few clock reads per request; for measurements, off by default. At most
  // max_post_timings records are kept until taken.
  bool record_post_timings = false;
  // Count requests, bytes, latencies and the queue for metrics() (docs/observability.md): three
  // clock reads and a few relaxed atomic adds per request. Off: metrics() reports no request
  // counts, latencies or queue depth.
  bool metrics = true;
  // Peers whose requests metrics() counts under their own `peer` (EngineMetrics::peers): the
  // first this many resolved; the rest count together as `other`. Bounded so that a process
  // whose peers restart for days does not grow its metrics without end; at most kMaxPeerLabels
  // (fabric/metrics.hpp), 0: no per-peer counts.
  std::uint32_t metrics_peer_labels = 16;
  std::uint32_t max_post_timings = 1u << 20;
};

// What create() would give each Domain under `config` (EngineConfig::nics
// resolved on this host), without opening anything; an error names the entry
// that names no interface, address or device here.
Result<std::vector<DomainNic>> resolve_domain_nics(const EngineConfig& config);

// What one group of a running engine got.
struct GroupInfo {
  int gpu = -1;                 // the CUDA device whose memory it registers; -1 none
  CpuSet cpus;                  // where its worker runs (pinning within thread_cpus)
  std::vector<DomainNic> nics;  // Domain i's NIC at [i]
};

// A received message; data points into an engine buffer that is re-posted
// when the callback returns.
using RecvCallback = std::function<void(std::span<const std::byte> data)>;
// Runs on the callback thread when an expected count is reached.
using ImmCallback = std::function<void(std::uint32_t imm, std::uint64_t count)>;

class TransferEngine {
 public:
  static Result<std::unique_ptr<TransferEngine>> create(const EngineConfig& config);
  ~TransferEngine();  // stop()s
  TransferEngine(const TransferEngine&) = delete;
  TransferEngine& operator=(const TransferEngine&) = delete;

  [[nodiscard]] const NetAddr& main_address() const noexcept;
  [[nodiscard]] const EngineConfig& config() const noexcept;
  // A snapshot of what this engine has done (fabric/metrics.hpp); any thread, takes no lock the
  // data path takes. Counts only grow; in_flight and the registration gauges go both ways.
  [[nodiscard]] EngineMetrics metrics() const;
  // Where this engine's threads run and why; workloads start theirs there too.
  [[nodiscard]] const ThreadCpus& thread_cpus() const noexcept;
  // Domains per group.
  [[nodiscard]] std::size_t num_domains() const noexcept;
  [[nodiscard]] std::size_t num_groups() const noexcept;
  // What each Domain of group 0 opened (EngineConfig::nics resolved), Domain i at [i].
  [[nodiscard]] const std::vector<DomainNic>& domain_nics() const noexcept;
  // Every group: its GPU, CPUs and NICs, group g at [g].
  [[nodiscard]] const std::vector<GroupInfo>& groups() const noexcept;

  // Registers [ptr, ptr+len) on every Domain of one group: `group` when given,
  // else the group of the device's GPU (GroupConfig::gpu; EngineConfig::
  // host_group for host memory and for a GPU no group names). Remote peers get only `access`;
  // writes from this memory leave through that group's NICs and writes into
  // it arrive through them (the MrDesc names the group).
  Result<Registered> reg_mr(void* ptr, std::size_t len, Device device = Device::host(),
                            Access access = Access::remote_write,
                            std::optional<std::uint32_t> group = std::nullopt);
  // Registers many regions (a model's layer tensors) in one pass of the worker thread: reg_mr
  // per region pays a round trip to the worker each, which dominates on a loaded host. The
  // result holds one Registered per range, in order. All or nothing: on an error no range stays
  // registered and the error names the range that failed.
  Result<std::vector<Registered>> reg_mrs(std::span<const MemoryRange> ranges,
                                          Access access = Access::remote_write);
  // Revokes the registration on every Domain; later writes to it fail on the
  // writer's side. Waits for local transfers still using it as a source.
  Status dereg_mr(const MrHandle& handle);

  // All submit_* calls return at once. A non-ok return means nothing was sent
  // and on_done will not be called; otherwise on_done is delivered exactly once.
  Status submit_send(const NetAddr& to, std::span<const std::byte> message, OnDone on_done);
  // Posts `count` buffers of `len` bytes (len >= config().max_message_size). Unaddressed: every
  // SEND to this engine may land in them, so an engine with channels open refuses them.
  Status submit_recvs(std::size_t len, std::uint32_t count, RecvCallback on_recv);
  // Opens the channel `name` (fabric/channel.hpp, docs/api.md "Channels"): its messages reach
  // on_message with the sender's address; other channels' messages never do. invalid_argument
  // naming the channel when it is open already, when options ask for more than the engine's
  // max_message_size leaves after the header, or when this engine has submit_recvs pools.
  Result<Channel> channel(std::string name, ChannelCallback on_message,
                          const ChannelOptions& options = {});
  // Watches whether `peer`'s engine still answers (fabric/peer_watch.hpp, docs/api.md "Peer
  // liveness"): one ping stream per peer for all its watchers on this engine; on_change runs on
  // the liveness thread at each change of state. invalid_argument for a peer of another
  // provider or this engine itself, a bad interval, or an engine with submit_recvs pools (pings
  // travel on channels); shutdown after stop().
  Result<PeerWatch> watch_peer(const NetAddr& peer, PeerStateCallback on_change,
                               const PeerWatchOptions& options = {});
  Status submit_single_write(const SingleWrite& request, OnDone on_done);
  Status submit_paged_writes(const PagedWrite& request, OnDone on_done);
  Status submit_imm(std::uint32_t imm, const MrDesc& dst, OnDone on_done);
  // RDMA READs from a peer's memory into ours (docs/api.md#reads): the peer must have
  // registered it with Access::remote_read (else invalid_argument here, or a provider error
  // where a descriptor claims more than its keys allow); Errc::unsupported where the provider
  // cannot READ. Completion as for writes; no immediates.
  Status submit_single_read(const SingleRead& request, OnDone on_done);
  Status submit_paged_reads(const PagedRead& request, OnDone on_done);

  // Resolves the peers once for scatters and barriers; lives until stop().
  Result<PeerGroupHandle> add_peer_group(const std::vector<NetAddr>& peers);
  // One slice per peer from one source registration.
  Status submit_scatter(const Scatter& request, OnDone on_done);
  // An immediate-only WRITE to every peer.
  Status submit_barrier(const Barrier& request, OnDone on_done);

  // Calls back once `count` WRITEs carrying `imm` have landed here, through
  // any group's NICs. Arrivals
  // before this call count; arrivals beyond `count` carry over to the next
  // expectation (or counter) of the same imm. Expectations of one imm are
  // served in the order they were made.
  Status expect_imm_count(std::uint32_t imm, std::uint64_t count, ImmCallback on_reached);
  // The same expectation, but reaching it stores `value` into a GPU word
  // (GpuFlag, through GDRCopy) for a kernel waiting on it; the store runs on
  // the callback thread. A failed store is logged.
  Status expect_imm_count(std::uint32_t imm, std::uint64_t count, std::shared_ptr<GpuFlag> flag,
                          std::uint64_t value);
  // A pollable counter for `imm`; all later arrivals (and the ones not yet
  // consumed by expectations) go to it. One counter per imm value. Refused
  // (invalid_argument) while an expectation of `imm` is pending, as
  // expect_imm_count is while `imm` has a counter: neither may take the
  // other's arrivals.
  Result<std::shared_ptr<ImmCounter>> imm_counter(std::uint32_t imm);
  // A block of `count` immediate values for `owner` (a workload's name, one block per name)
  // that no other reservation on this engine overlaps, at or above kFirstReservableImm
  // (docs/api.md, "Reserved immediates"). Workloads sharing the engine each count only their
  // own block's values, checked with ImmReservation::check. invalid_argument for count 0, an
  // empty or held name; out_of_range when no gap is large enough; shutdown after stop().
  Result<ImmReservation> reserve_imms(std::uint32_t count, std::string owner);
  // The lowest free block at or above `lowest` (first fit from there; reserve_imms is next fit):
  // how ranks that must use the same values on every engine (an MoE group's one-imm scatters)
  // agree on a block free on all.
  Result<ImmReservation> reserve_imms_from(std::uint32_t lowest, std::uint32_t count,
                                           std::string owner);
  // Detaches the counter of `imm`; later arrivals are counted internally again.
  Status release_imm_counter(std::uint32_t imm);

  // A 64-bit word that a GPU kernel (also inside a CUDA graph) or a host
  // thread writes; the engine's watcher thread calls back with (old, new) on
  // every observed change (docs/watcher.md). The watcher thread starts on the
  // first call. cuda_mapped memory needs a CUDA driver and device.
  Result<Watcher> alloc_uvm_watcher(WatchCallback callback,
                                    WatcherMemory memory = WatcherMemory::host);

  // Fences a peer: once it returns ok, no WRITE or SEND from `peer` lands here any more, not even
  // one it posted before, and our own operations to it fail. tcp, sockets and other connected
  // libfabric providers drop the connection and the address-vector entry (a later contact
  // reconnects, so revoke the keys it knows first; docs/kv.md#fence). verbs moves the RC queue
  // pairs with the peer to the error state and refuses its later handshakes: that peer instance
  // stays shut out until this engine stops (docs/verbs.md#failures). Errc::unsupported where
  // the provider cannot stop a peer's writes (shm writes by CMA from the peer's process).
  Status fence_peer(const NetAddr& peer);

  // Runs one pass of each group's worker loop on the calling thread: posts what was submitted,
  // polls the completion queues, counts arrived immediates (completion callbacks still run on
  // the callback thread). A group whose worker thread or another caller is in a pass is
  // skipped, and so, after one yield of the CPU, is one whose worker thread has tasks to run or
  // requests to check for expiry. False once stop() began; true when a pass found work. A
  // thread that waits for an immediate (a ping-pong) and calls this in its wait loop gets it
  // without a hand-off to and from a worker thread: where CPUs are shared, each hand-off is a
  // context switch, several per round trip (docs/benchmarks.md, "Immediate round trip"). Such a
  // loop keeps its CPU busy. Any thread, concurrently with submit_* and stop().
  bool progress();

  // Requests accepted and not yet reported to their callback (at most
  // max_outstanding_requests). A snapshot: other threads may change it at once.
  [[nodiscard]] std::uint32_t outstanding_requests() const noexcept;

  // The records of requests fully posted since the last call (empty unless
  // config().record_post_timings), oldest first.
  std::vector<PostTiming> take_post_timings();

  // Drains or fails all outstanding work, then joins every thread. Idempotent.
  void stop();

  struct Impl;

 private:
  explicit TransferEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fabric
