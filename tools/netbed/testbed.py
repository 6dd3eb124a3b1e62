"""An emulated cluster on one machine: hosts are network namespaces, NICs are
rate-limited veth pairs to a switch namespace (docs/netbed.md).

Layout of testbed NAME with H hosts of K NICs:
  NAME-sw          the switch: one bridge "railK" per NIC index
  NAME-hH          host H: lo, nic0..nic{K-1}; nicK is 198.18.K.(H+1)/24
  /run/netbed/NAME.json   written last by `up`: the testbed is complete

NIC k of every host sits on rail k (its own bridge and /24), as in a
rail-optimised cluster, so the kernel routes Domain k's traffic out of nic k.
198.18.0.0/15 is reserved for benchmarking (RFC 2544) and exists only inside
these namespaces; nothing is created in, or routed through, the root
namespace: every veth pair is born inside the testbed's namespaces.

Python 3 stdlib only. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence

STATE_DIR = "/run/netbed"
SUBNET_BASE = (198, 18)  # 198.18.0.0/15: RFC 2544 benchmarking range
MAX_HOSTS = 250
MAX_NICS = 16
COUNTER_NAMES = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_dropped", "tx_dropped")

# No '-': NAME-sw / NAME-hN must never match another testbed's names.
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")
_RATE_RE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit)$")
_DELAY_RE = re.compile(r"^\d+(\.\d+)?(us|ms|s)$")
_LOSS_RE = re.compile(r"^(\d+(\.\d+)?)%?$")

RATE_FACTORS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


class NetbedError(RuntimeError):
    pass


def rate_bits_per_second(rate: str) -> float:
    m = _RATE_RE.match(rate)
    if not m:
        raise NetbedError(f"rate {rate!r}: expected a number and bit/kbit/mbit/gbit, e.g. 200mbit")
    unit = m.group(2)
    return float(rate[: -len(unit)]) * RATE_FACTORS[unit]


def loss_percent(loss: str) -> float:
    m = _LOSS_RE.match(loss)
    if not m or not 0.0 <= float(m.group(1)) <= 100.0:
        raise NetbedError(f"loss {loss!r}: expected a percentage in 0..100, e.g. 1%")
    return float(m.group(1))


def unavailable_reason() -> Optional[str]:
    """Why a testbed cannot be built here, or None when it can."""
    if os.geteuid() != 0:
        return "netbed needs root (network namespaces, veth, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"netbed needs `{tool}` (Debian package iproute2)"
    if not os.path.isdir("/proc/self/ns") or not os.path.exists("/proc/self/ns/net"):
        return "this kernel has no network namespaces"
    return None


@dataclass
class Config:
    hosts: int = 2
    nics: int = 1
    rate: str = "200mbit"
    delay: Optional[str] = None
    loss: Optional[str] = None
    mtu: int = 9000

    def validate(self) -> None:
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise NetbedError(f"--hosts {self.hosts}: must be in 1..{MAX_HOSTS}")
        if not 1 <= self.nics <= MAX_NICS:
            raise NetbedError(f"--nics {self.nics}: must be in 1..{MAX_NICS}")
        if not 576 <= self.mtu <= 65000:
            raise NetbedError(f"--mtu {self.mtu}: must be in 576..65000")
        rate_bits_per_second(self.rate)
        if self.delay is not None and not _DELAY_RE.match(self.delay):
            raise NetbedError(f"delay {self.delay!r}: expected e.g. 200us or 1ms")
        if self.loss is not None:
            loss_percent(self.loss)


def _run(argv: Sequence[str], *, check: bool = True, input: Optional[str] = None) -> str:
    proc = subprocess.run(list(argv), input=input, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetbedError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def list_namespaces() -> List[str]:
    out = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(ns: str) -> List[int]:
    out = _run(["ip", "netns", "pids", ns], check=False)
    return [int(tok) for tok in out.split() if tok.isdigit()]


def _tbf(rate: str, mtu: int) -> List[str]:
    bits = rate_bits_per_second(rate)
    # Burst: 1 ms at the rate but at least a few frames (tbf must hold one
    # whole packet); queue: 20 ms at the rate, enough for TCP to keep it busy.
    burst = max(int(bits / 8 / 1000), 4 * mtu, 32 * 1024)
    limit = max(int(bits / 8 * 0.020), 4 * burst)
    return ["tbf", "rate", rate, "burst", str(burst), "limit", str(limit)]


class Testbed:
    """One testbed instance. `up()` is idempotent; `down()` removes every
    object the instance (or a killed run of it) created."""

    def __init__(self, name: str = "netbed", config: Optional[Config] = None, **kwargs):
        if not _NAME_RE.match(name):
            raise NetbedError(f"name {name!r}: letters, digits and '_' only, at most 32, "
                              "starting with a letter")
        self.name = name
        self.config = config if config is not None else Config(**kwargs)
        self._pause_after = int(os.environ.get("NETBED_PAUSE_AFTER_STEP", "0") or 0)
        self._steps = 0

    # ---- names and addresses -------------------------------------------------
    @property
    def switch_ns(self) -> str:
        return f"{self.name}-sw"

    def host_ns(self, host: int) -> str:
        return f"{self.name}-h{host}"

    @staticmethod
    def interface(nic: int) -> str:
        return f"nic{nic}"

    @staticmethod
    def address(host: int, nic: int) -> str:
        return f"{SUBNET_BASE[0]}.{SUBNET_BASE[1] + nic // 256}.{nic % 256}.{host + 1}"

    def host_index(self, host) -> int:
        """Accepts 3, "3" or "h3"."""
        text = str(host)
        if text.startswith("h"):
            text = text[1:]
        if not text.isdigit() or int(text) >= self.config.hosts:
            raise NetbedError(f"host {host!r}: testbed {self.name} has hosts h0..h{self.config.hosts - 1}")
        return int(text)

    @property
    def state_path(self) -> str:
        return os.path.join(STATE_DIR, f"{self.name}.json")

    def own_namespaces(self) -> List[str]:
        pattern = re.compile(rf"^{re.escape(self.name)}-(sw|h\d+)$")
        return [ns for ns in list_namespaces() if pattern.match(ns)]

    # ---- lifecycle -----------------------------------------------------------
    def recorded_config(self) -> Optional[Config]:
        try:
            with open(self.state_path) as f:
                return Config(**json.load(f)["config"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def is_up(self) -> bool:
        cfg = self.recorded_config()
        if cfg is None:
            return False
        wanted = {self.switch_ns} | {self.host_ns(h) for h in range(cfg.hosts)}
        return wanted <= set(self.own_namespaces())

    @classmethod
    def attach(cls, name: str) -> "Testbed":
        """The testbed NAME as its last complete `up` recorded it."""
        bed = cls(name)
        cfg = bed.recorded_config()
        if cfg is None:
            raise NetbedError(f"testbed {name} is not up (no {bed.state_path})")
        bed.config = cfg
        return bed

    def up(self) -> bool:
        """Builds the testbed; False when an identical one was already up."""
        reason = unavailable_reason()
        if reason:
            raise NetbedError(reason)
        self.config.validate()
        if self.is_up() and self.recorded_config() == self.config:
            return False
        # Leftovers of a killed run, or a testbed of another shape: start clean.
        self.down()
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        os.makedirs(STATE_DIR, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"name": self.name, "config": asdict(self.config)}, f)
        os.replace(tmp, self.state_path)  # the commit point: complete from here on
        return True

    def down(self) -> List[str]:
        """Ends what runs inside, deletes every namespace of this testbed
        (their veths and bridges go with them) and the state file."""
        removed = []
        if os.path.exists(self.state_path):
            os.unlink(self.state_path)
        for ns in self.own_namespaces():
            self._kill_inside(ns)
            _run(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
        tmp = self.state_path + ".tmp"
        if os.path.exists(tmp):
            os.unlink(tmp)
        return removed

    def kill_host(self, host) -> None:
        """A host dies mid-run: its cables are cut first (so no FIN/RST
        leaves it), then what runs inside is killed and its namespace deleted."""
        ns = self.host_ns(self.host_index(host))
        for k in range(self.config.nics):
            _run(["ip", "-n", ns, "link", "del", self.interface(k)], check=False)
        self._kill_inside(ns)
        _run(["ip", "netns", "del", ns], check=False)

    @staticmethod
    def _kill_inside(ns: str) -> None:
        for pid in namespace_pids(ns):
            if pid == os.getpid():
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # ---- building ------------------------------------------------------------
    def _step(self, argv: Sequence[str], input: Optional[str] = None) -> None:
        _run(argv, input=input)
        self._steps += 1
        if self._pause_after and self._steps == self._pause_after:
            # Test hook: lets a test kill `up` at a known point, without sleeps.
            print(f"netbed: paused after step {self._steps}", flush=True)
            while True:
                signal.pause()

    def _ns_sysctl(self, ns: str, key: str, value: str) -> None:
        path = "/proc/sys/" + key.replace(".", "/")
        self._step(["ip", "netns", "exec", ns, "sh", "-c", f"echo {value} > {path}"])

    def _build(self) -> None:
        cfg = self.config
        sw = self.switch_ns
        self._step(["ip", "netns", "add", sw])
        self._step(["ip", "-n", sw, "link", "set", "lo", "up"])
        self._ns_sysctl(sw, "net.ipv6.conf.all.disable_ipv6", "1")
        self._ns_sysctl(sw, "net.ipv6.conf.default.disable_ipv6", "1")
        for k in range(cfg.nics):
            self._step(["ip", "-n", sw, "link", "add", "name", f"rail{k}", "type", "bridge"])
            self._step(["ip", "-n", sw, "link", "set", f"rail{k}", "up"])
        for h in range(cfg.hosts):
            ns = self.host_ns(h)
            self._step(["ip", "netns", "add", ns])
            self._step(["ip", "-n", ns, "link", "set", "lo", "up"])
            # No IPv6 chatter (ND, MLD) in the byte counters tests read; each
            # address answered only on its own NIC (no ARP flux across rails).
            self._ns_sysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1")
            self._ns_sysctl(ns, "net.ipv6.conf.default.disable_ipv6", "1")
            self._ns_sysctl(ns, "net.ipv4.conf.all.arp_ignore", "1")
            self._ns_sysctl(ns, "net.ipv4.conf.all.arp_announce", "2")
            for k in range(cfg.nics):
                self._add_nic(h, k)
        if cfg.loss is not None and loss_percent(cfg.loss) > 0:
            self._add_loss(loss_percent(cfg.loss))

    def _add_nic(self, h: int, k: int) -> None:
        cfg = self.config
        ns, sw = self.host_ns(h), self.switch_ns
        nic, port = self.interface(k), f"h{h}n{k}"
        mtu = str(cfg.mtu)
        # Born inside the host namespace, its peer inside the switch: no veth
        # ever exists in the root namespace.
        self._step(["ip", "-n", ns, "link", "add", "name", nic, "mtu", mtu, "type", "veth",
                    "peer", "name", port, "mtu", mtu, "netns", sw])
        self._step(["ip", "-n", sw, "link", "set", port, "master", f"rail{k}"])
        self._step(["ip", "-n", sw, "link", "set", port, "up"])
        self._step(["ip", "-n", ns, "addr", "add", f"{self.address(h, k)}/24", "dev", nic])
        if cfg.loss is not None and loss_percent(cfg.loss) > 0:
            # One frame per skb, so a drop loses one MTU, as on a wire.
            self._step(["ip", "-n", ns, "link", "set", "dev", nic, "gso_max_segs", "1"])
        self._step(["ip", "-n", ns, "link", "set", nic, "up"])
        # Both directions run at the rate: host -> switch on nic, switch -> host on port.
        tbf = _tbf(cfg.rate, cfg.mtu)
        if cfg.delay:
            try:
                self._step(["tc", "-n", ns, "qdisc", "add", "dev", nic, "root", "handle", "1:",
                            "netem", "delay", cfg.delay])
            except NetbedError as e:
                raise NetbedError(f"--delay needs the netem qdisc (CONFIG_NET_SCH_NETEM), "
                                  f"which this kernel lacks: {e}") from None
            self._step(["tc", "-n", ns, "qdisc", "add", "dev", nic, "parent", "1:", "handle",
                        "10:", *tbf])
        else:
            self._step(["tc", "-n", ns, "qdisc", "add", "dev", nic, "root", "handle", "1:", *tbf])
        self._step(["tc", "-n", sw, "qdisc", "add", "dev", port, "root", "handle", "1:", *tbf])

    def _add_loss(self, percent: float) -> None:
        if shutil.which("nft") is None:
            raise NetbedError("--loss needs `nft` (Debian package nftables)")
        per_million = int(round(percent * 10000))
        # In the switch: every frame crossing a rail, either way, is dropped
        # with this probability (tc's netem is not in every kernel; nftables is).
        ruleset = (
            "table bridge netbed {\n"
            "  chain forward {\n"
            "    type filter hook forward priority 0; policy accept;\n"
            f"    numgen random mod 1000000 < {per_million} counter drop\n"
            "  }\n"
            "}\n")
        self._step(["ip", "netns", "exec", self.switch_ns, "nft", "-f", "-"], input=ruleset)

    # ---- using it ------------------------------------------------------------
    def exec_argv(self, host, argv: Sequence[str]) -> List[str]:
        return ["ip", "netns", "exec", self.host_ns(self.host_index(host)), *argv]

    def popen(self, host, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.exec_argv(host, argv), **kwargs)

    def run(self, host, argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.exec_argv(host, argv), **kwargs)

    def counters(self, host) -> Dict[str, Dict[str, int]]:
        """The NICs' own counters, read from /sys/class/net inside the host."""
        script = ("for d in /sys/class/net/nic*; do n=${d##*/}; printf '%s' \"$n\"; "
                  f"for c in {' '.join(COUNTER_NAMES)}; do "
                  "printf ' %s' $(cat $d/statistics/$c); done; echo; done")
        out = _run(self.exec_argv(host, ["sh", "-c", script]))
        result = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == len(COUNTER_NAMES) + 1 and parts[0].startswith("nic"):
                result[parts[0]] = dict(zip(COUNTER_NAMES, map(int, parts[1:])))
        return result

    def dropped_by_loss(self) -> int:
        """Frames the switch's loss rule has dropped so far."""
        out = _run(["ip", "netns", "exec", self.switch_ns, "nft", "list", "table", "bridge",
                    "netbed"], check=False)
        m = re.search(r"counter packets (\d+)", out)
        return int(m.group(1)) if m else 0

    def describe(self) -> dict:
        hosts = []
        present = set(self.own_namespaces())
        for h in range(self.config.hosts):
            ns = self.host_ns(h)
            entry = {"host": f"h{h}", "namespace": ns, "present": ns in present, "nics": []}
            counters = self.counters(h) if ns in present else {}
            for k in range(self.config.nics):
                nic = self.interface(k)
                entry["nics"].append({"interface": nic, "address": self.address(h, k),
                                      "counters": counters.get(nic)})
            hosts.append(entry)
        return {"name": self.name, "up": self.is_up(), "config": asdict(self.config),
                "switch": self.switch_ns, "hosts": hosts}

    def __enter__(self) -> "Testbed":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()


def known_testbeds() -> List[str]:
    """Names with a state file or with namespaces left by a killed run."""
    names = set()
    if os.path.isdir(STATE_DIR):
        names |= {f[:-5] for f in os.listdir(STATE_DIR) if f.endswith(".json")}
    for ns in list_namespaces():
        m = re.match(r"^([A-Za-z][A-Za-z0-9_]*)-(sw|h\d+)$", ns)
        if m:
            names.add(m.group(1))
    return sorted(names)
