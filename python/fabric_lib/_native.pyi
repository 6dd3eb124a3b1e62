"""Native binding of fabric-lib's TransferEngine; import fabric_lib instead."""

# Docstrings here repeat the binding's; python/tests/test_stubs.py checks that they match and
# that this file and the module name the same things.

from typing import Any, Callable, Generator, Iterable, Sequence, Union

from typing_extensions import Buffer, Self

__version__: str
MAX_WRITE_BYTES: int

_Indices = Union[Sequence[int], Buffer]

class FabricError(Exception):
    """Base of every fabric_lib error. `errc` names the engine's error code; str() is its message."""

    errc: str | None

class InvalidArgumentError(FabricError, ValueError):
    """The request can never succeed as written."""

class OutOfRangeError(FabricError, ValueError):
    """An offset, length or page index lies outside a registration."""

class MalformedError(FabricError, ValueError):
    """A wire-format decode failed; the message names the field."""

class AgainError(FabricError):
    """Back-pressure: nothing was submitted, retry later."""

class FabricTimeoutError(FabricError, TimeoutError):
    """A bounded wait ran out, or a request saw no completion within request_timeout_ms."""

class ProviderError(FabricError):
    """The fabric provider reported an error (dead peer, revoked key, transport error)."""

class UnsupportedError(FabricError):
    """The provider or build lacks a needed capability."""

class NotFoundError(FabricError, LookupError):
    """Unknown handle, peer group, counter, provider or device."""

class ShutdownError(FabricError):
    """The engine is stopping or stopped."""

class CancelledError(FabricError):
    """Outstanding work abandoned by stop()."""

class NetAddr:
    """An engine's address (Engine.main_address). Exchange it out of band as bytes(addr) or str(addr); pickles too."""

    @staticmethod
    def from_bytes(data: Buffer) -> NetAddr:
        """Decodes bytes(addr). Raises MalformedError on truncated, oversized or inconsistent input."""

    @staticmethod
    def parse(text: str) -> NetAddr:
        """Parses str(addr) ("fna3:" + hex). Raises MalformedError."""

    def __bytes__(self) -> bytes: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __getstate__(self) -> bytes: ...
    def __setstate__(self, state: bytes) -> None: ...
    def describe(self) -> str:
        """Provider, instance and per-Domain addresses, for logs."""

    @property
    def backend(self) -> str:
        """ "libfabric" or "verbs"."""

    @property
    def provider(self) -> str:
        """The fabric provider's name."""

    @property
    def instance_id(self) -> int:
        """Random per engine: a restarted peer has a new one."""

    @property
    def max_message_size(self) -> int:
        """Largest message this engine receives (Engine.send checks it)."""

    @property
    def num_domains(self) -> int:
        """Domains (NICs) per group; peers must agree."""

    @property
    def num_groups(self) -> int:
        """DomainGroups of the engine (one per GPU it serves)."""

class MrDesc:
    """The remote side of a registration: where peers may write. Exchange it out of band as bytes(desc) or str(desc); pickles too."""

    @staticmethod
    def from_bytes(data: Buffer) -> MrDesc:
        """Decodes bytes(desc). Raises MalformedError on truncated, oversized or inconsistent input."""

    @staticmethod
    def parse(text: str) -> MrDesc:
        """Parses str(desc) ("fmd3:" + hex). Raises MalformedError."""

    def __bytes__(self) -> bytes: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __getstate__(self) -> bytes: ...
    def __setstate__(self, state: bytes) -> None: ...
    def describe(self) -> str:
        """Size, base and owner, for logs."""

    @property
    def base(self) -> int:
        """The owner's virtual address of the region."""

    @property
    def size(self) -> int:
        """The region's length in bytes."""

    @property
    def group(self) -> int:
        """The owner's DomainGroup that registered it; writes land through its NICs."""

    @property
    def owner(self) -> NetAddr:
        """The NetAddr of the registering engine."""

    @property
    def keys(self) -> list[tuple[int, int]]:
        """One (addr_base, rkey) per Domain of the owner."""

class ScatterSlice:
    """One peer's part of a scatter: src[src_offset:src_offset+length] -> dst[dst_offset:dst_offset+length]."""

    def __init__(
        self, dst: MrDesc, length: int, src_offset: int = 0, dst_offset: int = 0
    ) -> None: ...
    @property
    def dst(self) -> MrDesc:
        """The peer's MrDesc."""

    @property
    def length(self) -> int:
        """Bytes to write."""

    @property
    def src_offset(self) -> int:
        """Offset in the source registration."""

    @property
    def dst_offset(self) -> int:
        """Offset in the destination."""

class PeerGroup:
    """Peers resolved once by Engine.add_peer_group; valid until stop()."""

    @property
    def id(self) -> int:
        """The engine's id for the group."""

    @property
    def size(self) -> int:
        """Number of peers."""

    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class MrHandle:
    """The local side of a registration: the source of transfers. Keeps the registered object alive."""

    @property
    def valid(self) -> bool:
        """False after dereg_mr() or stop()."""

    @property
    def ptr(self) -> int:
        """The registered address."""

    @property
    def size(self) -> int:
        """The registered length."""

    @property
    def device(self) -> str:
        """ "cpu" or "cuda:N"."""

    @property
    def obj(self) -> Any:
        """The registered object: the buffer or tensor, or reg_mr's owner for a raw pointer."""

class Transfer:
    """One submitted request. Completion is reported exactly once; done() polls it and wait() blocks for it."""

    def done(self) -> bool:
        """True once the request has completed, successfully or not. Never blocks."""

    def wait(self, timeout: float | None = None) -> None:
        """Blocks until the request completes, with the GIL released; Ctrl-C interrupts it. Raises the request's FabricError if it failed, or FabricTimeoutError if `timeout` seconds pass first (the request is then still outstanding). With a callback, returns after the callback has returned."""

    def exception(self, timeout: float | None = None) -> FabricError | None:
        """Waits like wait(), then returns the request's error as an exception instance, or None if it succeeded."""

    def __await__(self) -> Generator[Any, None, None]:
        """Awaits the request on the running asyncio loop, with no thread per request: resolves once it completes, raising its FabricError if it failed. A transfer is awaited on one loop; wait() still works beside it."""

class AsyncBridge:
    """Completions of awaited transfers into one asyncio event loop: an eventfd the loop watches and the tokens it then takes. Used by Transfer.__await__ (fabric_lib._aio); not needed directly."""

    def __init__(self) -> None: ...
    @property
    def fd(self) -> int:
        """The eventfd to watch with loop.add_reader."""

    def watch(self, transfer: Transfer) -> int:
        """A token under which the transfer is reported once done (at once if it is); 0 if the transfer is already watched."""

    def take(self) -> list[int]:
        """Tokens of transfers completed since the last call."""

class ImmReservation:
    """A block of immediate values [first, first + count) that no other reservation on the engine overlaps (Engine.reserve_imms). Released by release(), on leaving a with block, or when collected."""

    @property
    def first(self) -> int:
        """The block's first value."""

    @property
    def count(self) -> int:
        """How many values it holds; 0 once released."""

    @property
    def owner(self) -> str:
        """Who reserved it."""

    def __contains__(self, imm: int) -> bool: ...
    def at(self, i: int) -> int:
        """The block's i-th value; OutOfRangeError past count."""

    def check(self, imm: int) -> None:
        """Raises InvalidArgumentError, naming the owner and the block, for a value outside it."""

    def release(self) -> None:
        """Gives the block back now; idempotent."""

    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> bool: ...

class Channel:
    """A named channel on an engine (Engine.channel): messages sent on it reach only the channel of the same name on the peer. Closed by close(), on leaving a with block, or when collected."""

    @property
    def name(self) -> str: ...
    @property
    def id(self) -> int:
        """The id on the wire: FNV-1a (64-bit) of the name."""

    @property
    def max_message_size(self) -> int:
        """Largest payload send() takes."""

    @property
    def is_open(self) -> bool: ...
    def send(self, to: NetAddr, data: Buffer, *, callback: _DoneCallback | None = None) -> Transfer:
        """Copies data (bytes-like) and sends it to the channel of this name on `to`; InvalidArgumentError naming the channel when it exceeds max_message_size or the channel is closed."""

    def close(self) -> None:
        """Closes the channel: its callback is not called again and its name is free; idempotent."""

    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> bool: ...

class PeerWatch:
    """The engine's liveness of one peer (Engine.watch_peer). Closed by close(), on leaving a with block, or when collected."""

    @property
    def state(self) -> str:
        """ "alive" or "silent", as this watch last judged it."""

    @property
    def last_heard(self) -> float:
        """When the engine last heard from the peer (or the watch began), on time.monotonic()'s clock (CLOCK_MONOTONIC, as the engine's steady clock)."""

    @property
    def silent_after(self) -> float:
        """Seconds of silence after which this watch calls the peer silent."""

    @property
    def is_open(self) -> bool: ...
    def close(self) -> None:
        """Stops this watch: its callback is not called again; idempotent."""

    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> bool: ...

class ImmCounter:
    """Pollable count of WRITE-with-immediate arrivals of one imm value (Engine.imm_counter)."""

    @property
    def imm(self) -> int:
        """The immediate value it counts."""

    @property
    def value(self) -> int:
        """Arrivals not yet consumed."""

    def try_consume(self, n: int = 1) -> bool:
        """Takes n arrivals if at least n are there; returns whether it did."""

    def wait(self, n: int, timeout: float | None = None) -> None:
        """Blocks until value >= n, without consuming, with the GIL released; Ctrl-C interrupts it. Raises FabricTimeoutError if `timeout` seconds pass first."""

    def wait_and_consume(self, n: int, timeout: float | None = None) -> None:
        """Blocks until n arrivals can be taken, then takes them, atomically with respect to other consumers. Raises FabricTimeoutError if `timeout` seconds pass first."""

_DoneCallback = Callable[[FabricError | None], object]

class Watcher:
    """A watched 64-bit word (Engine.alloc_uvm_watcher). A GPU kernel or a host thread writes it; the engine's watcher thread calls back on each observed change. Releases itself when garbage-collected."""

    @property
    def word(self) -> int:
        """Host address of the word (0 once the handle is empty)."""

    @property
    def device_word(self) -> int | None:
        """The address a kernel writes, for "cuda_mapped" memory; else None."""

    @property
    def active(self) -> bool:
        """False once released or once the callback returned False."""

    def store(self, value: int) -> None:
        """Writes the word from the host: one aligned 64-bit store with release ordering."""

    def load(self) -> int:
        """Reads the word (what writers last stored)."""

    def release(self) -> None:
        """Stops watching. After it returns no callback of this watcher starts or still runs (unless called from that callback). Idempotent."""

    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> bool: ...

class Engine:
    """A TransferEngine: one per process. Use it as a context manager, or call stop(), so its threads end before the interpreter does."""

    def __init__(
        self,
        provider: str = "shm",
        domains_per_group: int = 1,
        *,
        bind_address: str = "127.0.0.1",
        max_message_size: int = 65536,
        max_outstanding_requests: int = 16384,
        send_slots: int = 64,
        request_timeout_ms: int = 5000,
        control_timeout_ms: int = 10000,
        drain_timeout_ms: int = 2000,
        busy_poll: bool = False,
        delivery_complete: bool | None = None,
        idle_spin_us: int = 0,
        idle_yield_us: int = 1000,
        idle_sleep_us: int = 200,
        backend: str = "libfabric",
        verbs_device: str = "",
        groups: int | None = None,
        host_group: int = 0,
        post_on_submit: bool = False,
        thread_cpus: str = "",
        record_post_timings: bool = False,
        metrics_peer_labels: int = 16,
    ) -> None:
        """Opens the provider's Domains and starts the worker and callback threads. provider: "shm", "tcp", "sockets", "udp", "efa", "auto" or any libfabric provider string. backend: "libfabric" or "verbs" (RC NICs; verbs_device picks one, empty: every active port). thread_cpus (cpulist, "2-3"): where every thread of the engine runs; empty: FABRIC_CPUS, else the process's CPUs, never the creating thread's mask. record_post_timings: stamp each request on its way to the NIC (take_post_timings()). metrics_peer_labels: peers counted under a peer label of their own in metrics(), the first resolved; the rest count as 'other' (0..1024). Raises NotFoundError or UnsupportedError if the provider cannot be used."""

    @property
    def main_address(self) -> NetAddr:
        """This engine's NetAddr; hand it to peers out of band."""

    @property
    def num_domains(self) -> int:
        """Domains (NICs) per group."""

    @property
    def num_groups(self) -> int:
        """DomainGroups: one per GPU of the topology plan unless groups= was given."""

    @property
    def max_message_size(self) -> int:
        """Largest message send() may carry and submit_recvs() buffers must hold."""

    @property
    def stopped(self) -> bool:
        """True after stop()."""

    @property
    def outstanding_requests(self) -> int:
        """Requests submitted and not yet completed (a snapshot). Raises ShutdownError after stop()."""

    @property
    def thread_cpus(self) -> str:
        """The CPUs (cpulist) every thread of this engine runs on. Raises ShutdownError after stop()."""

    @property
    def groups(self) -> list[dict[str, Any]]:
        """Every DomainGroup as a dict: gpu (its CUDA device, -1 none), cpus (where its worker runs) and nics (each Domain's NIC, in order)."""

    @property
    def domain_nics(self) -> list[str]:
        """What each Domain of group 0 opened, Domain i at [i]."""

    def reg_mrs(
        self, objs: Sequence[Any], *, remote_read: bool = False, group: int | None = None
    ) -> list[tuple[MrHandle, MrDesc]]:
        """Registers many objects (as reg_mr's obj) in one pass of the worker and returns a list of (MrHandle, MrDesc), in order. All or nothing: on an error none stays registered and the error names the object that failed."""

    def reserve_imms(self, count: int, owner: str) -> ImmReservation:
        """Reserves a block of `count` immediate values for `owner` (one block per owner name), at or above 2**20; the values below stay free for programs that pick their own. Workloads sharing the engine count only their own block's values."""

    def channel(
        self,
        name: str,
        callback: Callable[[memoryview, NetAddr], object],
        *,
        max_message_size: int = 0,
    ) -> Channel:
        """Opens the channel `name`: callback(message: memoryview, sender: NetAddr) runs on the callback thread for each message sent to it (the memoryview is valid only during the call); channel.send(sender, ...) answers. max_message_size 0: the most the engine's max_message_size leaves after the channel header. InvalidArgumentError naming the channel when it is open already."""

    def watch_peer(
        self,
        peer: NetAddr,
        callback: Callable[[NetAddr, str], object] | None = None,
        *,
        interval: float = 1.0,
        silent_after: float = 0.0,
    ) -> PeerWatch:
        """Watches whether `peer`'s engine still answers: the engine pings it every `interval` seconds (one stream per peer for all its watchers) and callback(peer: NetAddr, state: str) runs on the liveness thread when it turns "silent" (nothing heard for silent_after seconds; 0: 2 intervals + request_timeout) or "alive" again. InvalidArgumentError for this engine itself or an engine on submit_recvs pools."""

    def metrics(self) -> dict[str, Any]:
        """A snapshot of what the engine has done, as a dict: requests (per kind: ok, failed, bytes_ok), peers (a list of the same per labelled peer, 'peer' its instance id in hex or 'other'; scatters and barriers not included), latency (buckets as (upper bound in s, cumulative count), count, sum_seconds; submit to completion), post_latency (the same, submit to last operation posted), in_flight, queue_depth, held_after_report, peers_known, peers_lost, registrations, registered_bytes, imms_received, messages_received, messages_unrouted, peers_fenced. fabric_lib.metrics exports it to Prometheus."""

    def fence_peer(self, peer: NetAddr) -> None:
        """Once it returns, no WRITE or SEND from `peer` lands here any more, not even one it posted before, and operations to it fail (docs/api.md, "Fencing a peer"). UnsupportedError where the provider cannot stop a peer's writes (shm)."""

    def progress(self) -> bool:
        """Runs one pass of each group's worker loop on this thread (post, poll, count immediates), skipping a group whose worker is in a pass; False once stop() began."""

    def take_post_timings(self) -> list[dict[str, Any]]:
        """The posting-path stamps recorded since the last call (record_post_timings=True), as dicts: kind, posts, called, enqueued, picked_up, first_post, last_post (steady-clock ns)."""

    @property
    def callback_errors(self) -> int:
        """How many callbacks raised (each was logged to the "fabric_lib" logger)."""

    def reg_mr(
        self,
        obj: Any,
        length: int | None = None,
        device: str | int | Any | None = None,
        *,
        owner: Any = None,
        remote_read: bool = False,
        group: int | None = None,
    ) -> tuple[MrHandle, MrDesc]:
        """Registers memory on every Domain of one group (group=, else the device's GPU's group, else the engine's host_group) and returns (MrHandle, MrDesc). obj is a writable C-contiguous buffer (numpy array, bytearray, ...), a contiguous torch tensor, or an int address with length and device ("cpu", "cuda:N"). The engine keeps obj (and owner) alive until dereg_mr() or stop(). Peers may only write unless remote_read."""

    def dereg_mr(self, handle: MrHandle) -> None:
        """Revokes a registration on every Domain once local transfers from it have finished; later remote writes to it fail on the writer's side."""

    def send(self, to: NetAddr, data: Buffer, *, callback: _DoneCallback | None = None) -> Transfer:
        """Copies data (bytes-like) and SENDs it to `to`. At most both engines' max_message_size bytes."""

    def submit_recvs(
        self, length: int, count: int, callback: Callable[[memoryview], object]
    ) -> None:
        """Posts `count` receive buffers of `length` bytes (>= max_message_size). callback(message: memoryview) runs on the callback thread for every message; the memoryview is read-only and valid only during the call, so copy what you keep."""

    def single_write(
        self,
        src: MrHandle,
        dst: MrDesc,
        length: int,
        *,
        src_offset: int = 0,
        dst_offset: int = 0,
        imm: int | None = None,
        num_shards: int = 0,
        domain: int | None = None,
        callback: _DoneCallback | None = None,
    ) -> Transfer:
        """WRITEs src[src_offset:+length] to dst[dst_offset:+length], with an optional 32-bit imm. num_shards (0: one per Domain) shards it; domain pins it to one Domain."""

    def paged_writes(
        self,
        src: MrHandle,
        dst: MrDesc,
        page_length: int,
        src_indices: _Indices,
        dst_indices: _Indices,
        *,
        src_stride: int | None = None,
        dst_stride: int | None = None,
        src_offset: int = 0,
        dst_offset: int = 0,
        imm: int | None = None,
        callback: _DoneCallback | None = None,
    ) -> Transfer:
        """For each i, WRITEs page_length bytes from src_offset + src_indices[i] * src_stride to dst_offset + dst_indices[i] * dst_stride. Strides default to page_length; indices are int sequences or uint32 arrays of equal length. P pages carry P immediates."""

    def single_read(
        self,
        src: MrDesc,
        dst: MrHandle,
        length: int,
        *,
        src_offset: int = 0,
        dst_offset: int = 0,
        num_shards: int = 0,
        domain: int | None = None,
        callback: _DoneCallback | None = None,
    ) -> Transfer:
        """READs src[src_offset:+length] (a peer's MrDesc, registered there with remote_read=True) into dst[dst_offset:+length] (a local MrHandle). No immediate: the Transfer is the only completion, and the bytes are in dst once it is done. num_shards (0: one per Domain) shards it; domain pins it to one Domain. Raises InvalidArgumentError if src was registered without remote_read."""

    def paged_reads(
        self,
        src: MrDesc,
        dst: MrHandle,
        page_length: int,
        src_indices: _Indices,
        dst_indices: _Indices,
        *,
        src_stride: int | None = None,
        dst_stride: int | None = None,
        src_offset: int = 0,
        dst_offset: int = 0,
        callback: _DoneCallback | None = None,
    ) -> Transfer:
        """For each i, READs page_length bytes from src_offset + src_indices[i] * src_stride of the peer's src (MrDesc, remote_read=True) into dst_offset + dst_indices[i] * dst_stride of the local dst (MrHandle). Strides default to page_length; no immediates."""

    def imm(self, imm: int, dst: MrDesc, *, callback: _DoneCallback | None = None) -> Transfer:
        """An immediate-only (zero-length) WRITE against dst: one immediate at the receiver."""

    def add_peer_group(self, peers: Sequence[NetAddr]) -> PeerGroup:
        """Resolves a list of NetAddrs once for scatter() and barrier(); valid until stop()."""

    def scatter(
        self,
        src: MrHandle,
        slices: Iterable[
            ScatterSlice
            | tuple[MrDesc, int]
            | tuple[MrDesc, int, int]
            | tuple[MrDesc, int, int, int]
        ],
        *,
        group: PeerGroup | None = None,
        imm: int | None = None,
        routing: str | int = "peers",
        callback: _DoneCallback | None = None,
    ) -> Transfer:
        """WRITEs one slice of src per peer. slices: ScatterSlice objects or (dst, length[, src_offset[, dst_offset]]) tuples, in group order when group is given. routing: "peers" (slice i on Domain i mod K), "bytes" (each slice over all Domains) or a Domain index."""

    def barrier(
        self,
        imm: int,
        dsts: Sequence[MrDesc],
        *,
        group: PeerGroup | None = None,
        callback: _DoneCallback | None = None,
    ) -> Transfer:
        """An immediate-only WRITE to each peer's MrDesc in dsts (one immediate per peer)."""

    def expect_imm_count(
        self, imm: int, count: int, callback: Callable[[int, int], object]
    ) -> None:
        """callback(imm, count) runs on the callback thread once `count` WRITEs carrying imm have landed. Arrivals before this call count; surplus ones carry over."""

    def imm_counter(self, imm: int) -> ImmCounter:
        """A pollable ImmCounter for imm; it takes every arrival not yet consumed. One per imm value."""

    def release_imm_counter(self, imm: int) -> None:
        """Detaches imm's counter; later arrivals are counted internally again. NotFoundError if there is none."""

    def alloc_uvm_watcher(
        self, callback: Callable[[int, int], bool | None], memory: str = "host"
    ) -> Watcher:
        """A watched 64-bit word starting at 0. callback(old, new) runs on the engine's watcher thread for each observed change (values in between may be skipped); returning False stops watching. memory: "host" or "cuda_mapped" (needs CUDA)."""

    def stop(self) -> None:
        """Stops accepting work, drains or fails what is outstanding (every Transfer completes), and joins the engine's threads. Idempotent."""

    def __enter__(self) -> Self: ...
    def __exit__(self, *args: object) -> bool: ...

def _fabric_info(args: list[str]) -> tuple[int, str, str]:
    """Runs fabric-info with these command-line arguments (args[0] the program's name): (exit status, report, errors). Sets FI_TCP_IFACE and FI_SOCKETS_IFACE to lo for the process, so call it from a process of its own (python -m fabric_lib.info)."""

def library_threads() -> list[tuple[str, int, str]]:
    """Every running thread that fabric-lib started, as (name, tid, cpulist) tuples: where each placed itself (docs/concepts.md, "Threads and CPUs")."""

def single_write_imm_count(
    length: int, num_domains: int, *, num_shards: int = 0, domain: int | None = None
) -> int:
    """Immediates one Engine.single_write with an imm delivers, routed as given."""

def paged_writes_imm_count(num_pages: int) -> int:
    """Immediates one Engine.paged_writes with an imm delivers: one per page."""

def scatter_imm_count(length: int, num_domains: int, routing: str | int = "peers") -> int:
    """Immediates each receiving peer sees for its slice of `length` bytes of a scatter."""
