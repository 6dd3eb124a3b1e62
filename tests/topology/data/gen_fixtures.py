#!/usr/bin/env python3
"""Writes the synthetic hwloc 2.x XML topologies used by fabric_topology_tests.

The machines are described from public facts (instance specifications, PCI IDs),
not copied from any lstopo dump. Run it from anywhere; it rewrites the .xml files
next to itself:

    python3 tests/topology/data/gen_fixtures.py

and check each result with `hwloc-ls --input FILE`. Both the generator and its
output are committed so that the tests need no Python.

Fixtures:
  p5_48xlarge.xml  AWS p5.48xlarge-like: 2 sockets (one NUMA node each), 8 x H100,
                   32 x EFA (8 x 4 per GPU, 100 Gb/s each = 3200 Gb/s). Each GPU
                   sits behind its own PCIe switch with its four EFA interfaces
                   and one NVMe drive; four switches per socket. The ENA primary
                   interface (Amazon, not EFA) and the four NVSwitches (NVIDIA,
                   not GPUs) are decoys that must not be taken for NICs or GPUs.
  h100_cx7.xml     8 x H100 + 8 x ConnectX-7 (one per GPU), two sockets. Each
                   socket has two root complexes; each carries a two-level switch
                   tree whose top switch feeds two leaf switches, and each leaf
                   switch holds one GPU and one ConnectX-7. So a GPU shares the
                   top switch with two NICs but a leaf switch with only one: the
                   "deepest common switch" rule must pick the leaf one. Two extra
                   ConnectX-7 storage ports hang off a socket-0 root port.
  small_vm.xml     A 2-core, 1-NUMA-node virtual machine like the CI box: virtio
                   devices only, no GPU, no RDMA NIC (eth0 is not one).
  malformed.xml    The p5 file cut off mid-element: loading it must fail cleanly.
"""

from __future__ import annotations

import os
from xml.sax.saxutils import quoteattr

HERE = os.path.dirname(os.path.abspath(__file__))

# PCI class codes (base class << 8 | subclass).
CLASS_HOST_BRIDGE = 0x0600
CLASS_PCI_BRIDGE = 0x0604
CLASS_VGA = 0x0300
CLASS_3D = 0x0302
CLASS_ETHERNET = 0x0200
CLASS_INFINIBAND = 0x0207
CLASS_NVME = 0x0108
CLASS_BRIDGE_OTHER = 0x0680
CLASS_OTHER = 0xFFFF

# hwloc 2.x hwloc_obj_osdev_type_e values.
OSDEV_BLOCK, OSDEV_GPU, OSDEV_NETWORK, OSDEV_OPENFABRICS, OSDEV_DMA, OSDEV_COPROC = range(6)

VENDOR_NVIDIA = 0x10DE
VENDOR_AMAZON = 0x1D0F
VENDOR_MELLANOX = 0x15B3
VENDOR_VIRTIO = 0x1AF4
VENDOR_AMD = 0x1022
VENDOR_INTEL = 0x8086
VENDOR_BROADCOM_PLX = 0x1000

DEV_H100_SXM5 = 0x2330
DEV_NVSWITCH = 0x22A3
DEV_EFA = 0xEFA1
DEV_ENA = 0xEC20
DEV_AMAZON_NVME = 0xCD01
DEV_CONNECTX7 = 0x1021
DEV_PEX_SWITCH = 0xC030


def bitmap(bits) -> str:
    """hwloc's bitmap text: 32-bit hex words, most significant first."""
    mask = 0
    for b in bits:
        mask |= 1 << b
    words = []
    while True:
        words.append(mask & 0xFFFFFFFF)
        mask >>= 32
        if mask == 0:
            break
    return ",".join(f"0x{w:08x}" for w in reversed(words))


class Obj:
    def __init__(self, type_, attrs=None, infos=None, children=None):
        self.type = type_
        self.attrs = dict(attrs or {})
        self.infos = list(infos or [])
        self.children = list(children or [])


# ---- CPU side -------------------------------------------------------------

def cpu_attrs(pus, nodes):
    return {
        "cpuset": bitmap(pus),
        "complete_cpuset": bitmap(pus),
        "nodeset": bitmap(nodes),
        "complete_nodeset": bitmap(nodes),
    }


def package(index, cores, numa_index, memory_bytes, cpu_infos, io):
    """cores: list of (core_id, [pu os indexes])."""
    pus = [pu for _, core_pus in cores for pu in core_pus]
    numa = Obj("NUMANode", {"os_index": numa_index, **cpu_attrs(pus, [numa_index]),
                            "local_memory": memory_bytes})
    core_objs = [
        Obj("Core", {"os_index": cid, **cpu_attrs(core_pus, [numa_index])},
            children=[Obj("PU", {"os_index": pu, **cpu_attrs([pu], [numa_index])})
                      for pu in core_pus])
        for cid, core_pus in cores
    ]
    return Obj("Package", {"os_index": index, **cpu_attrs(pus, [numa_index])},
               infos=cpu_infos, children=[numa, *core_objs, *io])


def machine(packages, infos):
    pus, nodes = [], []
    for p in packages:
        for c in p.children:
            if c.type == "NUMANode":
                nodes.append(c.attrs["os_index"])
            if c.type == "Core":
                pus.extend(pu.attrs["os_index"] for pu in c.children)
    attrs = {"os_index": 0, **cpu_attrs(pus, nodes)}
    attrs["allowed_cpuset"] = attrs["cpuset"]
    attrs["allowed_nodeset"] = attrs["nodeset"]
    # Machine attributes in hwloc's own order: cpusets, then allowed sets.
    ordered = {k: attrs[k] for k in ("os_index", "cpuset", "complete_cpuset", "allowed_cpuset",
                                     "nodeset", "complete_nodeset", "allowed_nodeset")}
    return Obj("Machine", ordered, infos=infos, children=packages)


# ---- PCI side -------------------------------------------------------------
# Bus numbers are assigned afterwards by number_buses(), like firmware enumeration.

def osdev(name, kind, subtype=None, infos=None):
    attrs = {"name": name}
    if subtype:
        attrs["subtype"] = subtype
    attrs["osdev_type"] = kind
    return Obj("OSDev", attrs, infos=infos)


def pcidev(cls, vendor, device, osdevs=(), names=None, link_gbps=32.0):
    o = Obj("PCIDev", {"_class": cls, "_vendor": vendor, "_device": device,
                       "_link": link_gbps}, children=list(osdevs))
    if names:
        o.infos = [("PCIVendor", names[0]), ("PCIDevice", names[1])]
    return o


def pci_bridge(children, vendor=VENDOR_BROADCOM_PLX, device=DEV_PEX_SWITCH, link_gbps=32.0):
    return Obj("Bridge", {"_class": CLASS_PCI_BRIDGE, "_vendor": vendor, "_device": device,
                          "_link": link_gbps, "_kind": "pci"}, children=children)


def switch(endpoints, vendor=VENDOR_BROADCOM_PLX):
    """A PCIe switch: upstream port, then one downstream port per endpoint."""
    return pci_bridge([pci_bridge([e], vendor=vendor) for e in endpoints], vendor=vendor)


def root_port(child, vendor):
    return pci_bridge([child], vendor=vendor, device=0x1483 if vendor == VENDOR_AMD else 0x352A)


def host_bridge(children):
    return Obj("Bridge", {"_kind": "host"}, children=children)


class BusCounter:
    def __init__(self, start):
        self.next = start

    def take(self):
        bus = self.next
        self.next += 1
        return bus


def number_buses(host, counter, depth=0):
    """Fills busids, bridge bus ranges and depths below one host bridge."""
    bus = counter.take()
    host.attrs["_secondary"] = bus
    host.attrs["_depth"] = depth
    for slot, child in enumerate(host.children):
        if child.type in ("Bridge", "PCIDev"):
            child.attrs["_busid"] = (bus, slot)
            if child.type == "Bridge":
                number_buses(child, counter, depth + 1)
    host.attrs["_subordinate"] = counter.next - 1


def pci_type(o):
    a = o.attrs
    # class [vendor:device] [subvendor:subdevice] revision
    return f"{a['_class']:04x} [{a['_vendor']:04x}:{a['_device']:04x}] " \
           f"[{a['_vendor']:04x}:{a['_device']:04x}] 01"


def finalize_pci(o):
    """Turns the private _attrs into hwloc's XML attributes, recursively."""
    a = o.attrs
    if o.type in ("Bridge", "PCIDev"):
        out = {}
        if o.type == "Bridge":
            out["bridge_type"] = "0-1" if a["_kind"] == "host" else "1-1"
            out["depth"] = a["_depth"]
            out["bridge_pci"] = f"0000:[{a['_secondary']:02x}-{a['_subordinate']:02x}]"
        if "_busid" in a:
            bus, slot = a["_busid"]
            out["pci_busid"] = f"0000:{bus:02x}:{slot:02x}.0"
            out["pci_type"] = pci_type(o)
            out["pci_link_speed"] = f"{a['_link']:.6f}"
        o.attrs = out
        if "pci_busid" in out:
            # Linux names devices after their slot (predictable names): fill them in now.
            for c in o.children:
                if c.type == "OSDev":
                    c.attrs["name"] = c.attrs["name"].format(bus=bus, slot=slot)
    for c in o.children:
        finalize_pci(c)


# ---- XML writer -----------------------------------------------------------

class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0

    def emit(self, o, indent):
        self.gp += 1
        pad = "  " * indent
        attrs = {"type": o.type, **o.attrs, "gp_index": self.gp}
        text = " ".join(f"{k}={quoteattr(str(v))}" for k, v in attrs.items())
        if not o.infos and not o.children:
            self.lines.append(f"{pad}<object {text}/>")
            return
        self.lines.append(f"{pad}<object {text}>")
        for name, value in o.infos:
            self.lines.append(f"{pad}  <info name={quoteattr(name)} value={quoteattr(value)}/>")
        for c in o.children:
            self.emit(c, indent + 1)
        self.lines.append(f"{pad}</object>")

    def document(self, root):
        self.lines = ['<?xml version="1.0" encoding="UTF-8"?>',
                      '<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                      '<topology version="2.0">']
        self.emit(root, 1)
        self.lines.append("</topology>")
        return "\n".join(self.lines) + "\n"


def build(root_packages, machine_infos, first_bus=0x00):
    counter = BusCounter(first_bus)
    for p in root_packages:
        for c in p.children:
            if c.type == "Bridge":
                number_buses(c, counter)
                # Leave gaps between root complexes, as firmware does.
                counter.next = (counter.next + 0x0F) & ~0x0F
    m = machine(root_packages, machine_infos)
    finalize_pci(m)
    return Writer().document(m)


def machine_infos(name):
    return [("Backend", "Synthetic-fabric-lib"), ("OSName", "Linux"),
            ("Architecture", "x86_64"), ("HostName", name),
            ("hwlocVersion", "2.9.0"), ("ProcessName", "gen_fixtures.py")]


GiB = 1 << 30

H100_NAMES = ("NVIDIA Corporation", "GH100 [H100 SXM5 80GB]")
EFA_NAMES = ("Amazon.com, Inc.", "Elastic Fabric Adapter (EFA)")
CX7_NAMES = ("Mellanox Technologies", "MT2910 Family [ConnectX-7]")


# ---- p5.48xlarge-like -----------------------------------------------------

def p5():
    cores_per_socket, smt_offset = 48, 96  # 2 x AMD EPYC 7R13, 192 vCPUs
    packages = []
    gpu = 0
    for socket in range(2):
        cores = [(c, [socket * cores_per_socket + c, smt_offset + socket * cores_per_socket + c])
                 for c in range(cores_per_socket)]
        io = []
        for _ in range(4):  # four PCIe switches per socket, one GPU each
            endpoints = [pcidev(CLASS_3D, VENDOR_NVIDIA, DEV_H100_SXM5, names=H100_NAMES,
                                osdevs=[osdev(f"cuda{gpu}", OSDEV_COPROC, "CUDA"),
                                        osdev(f"nvml{gpu}", OSDEV_GPU, "NVML")])]
            for _ in range(4):
                endpoints.append(pcidev(CLASS_ETHERNET, VENDOR_AMAZON, DEV_EFA, names=EFA_NAMES,
                                        osdevs=[osdev("rdmap{bus}s{slot}", OSDEV_OPENFABRICS)]))
            endpoints.append(pcidev(CLASS_NVME, VENDOR_AMAZON, DEV_AMAZON_NVME,
                                    osdevs=[osdev(f"nvme{gpu}n1", OSDEV_BLOCK)]))
            io.append(host_bridge([root_port(switch(endpoints), VENDOR_AMD)]))
            gpu += 1
        if socket == 0:
            # Primary ENA interface and the HGX board's NVSwitches: decoys.
            io.append(host_bridge([
                root_port(pcidev(CLASS_ETHERNET, VENDOR_AMAZON, DEV_ENA,
                                 names=("Amazon.com, Inc.", "Elastic Network Adapter (ENA)"),
                                 osdevs=[osdev("ens32", OSDEV_NETWORK)]), VENDOR_AMD),
                root_port(switch([pcidev(CLASS_BRIDGE_OTHER, VENDOR_NVIDIA, DEV_NVSWITCH)
                                  for _ in range(4)]), VENDOR_AMD),
            ]))
        packages.append(package(socket, cores, socket, 1024 * GiB,
                                [("CPUVendor", "AuthenticAMD"),
                                 ("CPUModel", "AMD EPYC 7R13 Processor")], io))
    return build(packages, machine_infos("p5-48xlarge-like"))


# ---- 8 x H100 + 8 x ConnectX-7 ------------------------------------------------

def h100_cx7():
    cores_per_socket, smt_offset = 56, 112  # 2 x Xeon Platinum 8480C, 224 threads
    packages = []
    gpu = 0
    nic = 0
    for socket in range(2):
        cores = [(c, [socket * cores_per_socket + c, smt_offset + socket * cores_per_socket + c])
                 for c in range(cores_per_socket)]
        io = []
        for _ in range(2):  # two root complexes per socket with a two-level switch tree
            leaves = []
            for _ in range(2):
                leaves.append(switch([
                    pcidev(CLASS_3D, VENDOR_NVIDIA, DEV_H100_SXM5, names=H100_NAMES),
                    pcidev(CLASS_INFINIBAND, VENDOR_MELLANOX, DEV_CONNECTX7, names=CX7_NAMES,
                           osdevs=[osdev(f"mlx5_{nic}", OSDEV_OPENFABRICS),
                                   osdev("ibp{bus}s{slot}", OSDEV_NETWORK)]),
                ]))
                gpu += 1
                nic += 1
            io.append(host_bridge([root_port(switch(leaves), VENDOR_INTEL)]))
        packages.append(package(socket, cores, socket, 1024 * GiB,
                                [("CPUVendor", "GenuineIntel"),
                                 ("CPUModel", "Intel(R) Xeon(R) Platinum 8480C")], io))
    # Storage / in-band ConnectX-7 ports on socket 0, right under a root port.
    storage = [pcidev(CLASS_ETHERNET, VENDOR_MELLANOX, DEV_CONNECTX7, names=CX7_NAMES,
                      osdevs=[osdev(f"mlx5_{nic + i}", OSDEV_OPENFABRICS),
                              osdev("enp{bus}s{slot}np0", OSDEV_NETWORK)]) for i in range(2)]
    packages[0].children.append(host_bridge([root_port(s, VENDOR_INTEL) for s in storage]))
    return build(packages, machine_infos("h100-cx7-like"))


# ---- this CI machine --------------------------------------------------------

def small_vm():
    cores = [(0, [0]), (1, [1])]
    io = [host_bridge([
        pcidev(CLASS_HOST_BRIDGE, VENDOR_INTEL, 0x0D57, link_gbps=0.0),
        pcidev(CLASS_OTHER, VENDOR_VIRTIO, 0x1045, link_gbps=0.0),
        pcidev(0x0180, VENDOR_VIRTIO, 0x1042, link_gbps=0.0, osdevs=[osdev("vda", OSDEV_BLOCK)]),
        pcidev(CLASS_ETHERNET, VENDOR_VIRTIO, 0x1041, link_gbps=0.0,
               osdevs=[osdev("eth0", OSDEV_NETWORK)]),
    ])]
    pkg = package(0, cores, 0, 8 * GiB, [("CPUVendor", "GenuineIntel"),
                                         ("CPUModel", "Intel(R) Xeon(R) Processor")], io)
    return build([pkg], machine_infos("small-vm"))


def main():
    outputs = {
        "p5_48xlarge.xml": p5(),
        "h100_cx7.xml": h100_cx7(),
        "small_vm.xml": small_vm(),
    }
    p5_text = outputs["p5_48xlarge.xml"]
    cut = p5_text.index("<object type=\"PCIDev\"")
    outputs["malformed.xml"] = p5_text[:cut + 40] + "\n"
    for name, text in outputs.items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {name} ({len(text)} bytes)")


if __name__ == "__main__":
    main()
