#include "topology/discover.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>

#include "topology/pci_ids.hpp"

namespace fabric::topo {

namespace {

CpuSet to_cpuset(hwloc_const_bitmap_t bitmap) {
  CpuSet out;
  if (bitmap == nullptr) return out;
  for (int cpu = hwloc_bitmap_first(bitmap); cpu >= 0; cpu = hwloc_bitmap_next(bitmap, cpu)) {
    out.cpus.push_back(cpu);
  }
  return out;
}

// Identities are the objects' addresses: unique and non-null within one topology.
std::uint64_t identity(hwloc_obj_t obj) { return reinterpret_cast<std::uintptr_t>(obj); }

std::string busid(const hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", a.domain, a.bus, a.dev, a.func);
}

std::string info(hwloc_obj_t obj, const char* name) {
  const char* value = hwloc_obj_get_info_by_name(obj, name);
  return value != nullptr ? value : "";
}

int package_of(hwloc_topology_t topology, hwloc_obj_t obj) {
  if (obj->type == HWLOC_OBJ_PACKAGE) return static_cast<int>(obj->os_index);
  if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_PACKAGE, obj)) {
    return static_cast<int>(pkg->os_index);
  }
  // I/O attached above the packages (one-socket boxes often look like that).
  if (hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PACKAGE) == 1) {
    return static_cast<int>(hwloc_get_obj_by_type(topology, HWLOC_OBJ_PACKAGE, 0)->os_index);
  }
  return -1;
}

DeviceSite site_of(hwloc_topology_t topology, hwloc_obj_t obj) {
  DeviceSite site;
  std::vector<std::uint64_t> upward;
  for (hwloc_obj_t p = obj->parent; p != nullptr && hwloc_obj_type_is_io(p->type); p = p->parent) {
    if (p->type != HWLOC_OBJ_BRIDGE) continue;
    if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      site.locality.host_bridge = identity(p);
    } else {
      upward.push_back(identity(p));
    }
  }
  site.locality.bridges.assign(upward.rbegin(), upward.rend());
  if (hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topology, obj)) {
    // An anchor spanning several nodes (or a package with sub-NUMA clustering)
    // leaves the node unknown; its CPUs still say where the device is.
    if (anchor->nodeset != nullptr && hwloc_bitmap_weight(anchor->nodeset) == 1) {
      site.locality.numa = hwloc_bitmap_first(anchor->nodeset);
    }
    site.locality.package = package_of(topology, anchor);
    site.local_cpus = to_cpuset(anchor->cpuset);
  }
  return site;
}

// I/O children only: OS devices hang there, never in the normal children.
template <typename Fn>
void for_each_osdev_child(hwloc_obj_t obj, Fn&& fn) {
  for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) {
    if (c->type == HWLOC_OBJ_OS_DEVICE) fn(c);
  }
}

bool is_gpu_osdev(hwloc_obj_t osdev) {
  const auto type = osdev->attr->osdev.type;
  return (type == HWLOC_OBJ_OSDEV_GPU || type == HWLOC_OBJ_OSDEV_COPROC) && osdev->name &&
         is_gpu_osdev_name(osdev->name);
}

template <typename Info>
struct Found {
  Info info;
  DeviceSite site;
};

void fill_pci(hwloc_obj_t pci, std::string& bus, std::uint16_t& vendor, std::uint16_t& device,
              std::string& model) {
  bus = busid(pci);
  vendor = pci->attr->pcidev.vendor_id;
  device = pci->attr->pcidev.device_id;
  model = info(pci, "PCIDevice");
}

std::vector<Found<GpuInfo>> find_gpus(hwloc_topology_t topology) {
  std::vector<Found<GpuInfo>> found;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topology, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topology, pci)) {
    bool named_gpu = false;
    std::vector<std::string> names;
    for_each_osdev_child(pci, [&](hwloc_obj_t c) {
      const auto type = c->attr->osdev.type;
      if ((type == HWLOC_OBJ_OSDEV_GPU || type == HWLOC_OBJ_OSDEV_COPROC) && c->name) {
        names.emplace_back(c->name);
        named_gpu = named_gpu || is_gpu_osdev(c);
      }
    });
    if (!named_gpu && !is_gpu_pci(pci->attr->pcidev.vendor_id, pci->attr->pcidev.class_id)) {
      continue;
    }
    decltype(found)::value_type f;
    fill_pci(pci, f.info.pci_busid, f.info.vendor_id, f.info.device_id, f.info.model);
    f.info.os_devices = std::move(names);
    f.site = site_of(topology, pci);
    found.push_back(std::move(f));
  }
  // A CUDA device hwloc could not tie to a PCI function (no PCI discovery).
  for (hwloc_obj_t os = hwloc_get_next_osdev(topology, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(topology, os)) {
    const bool under_pci = os->parent && os->parent->type == HWLOC_OBJ_PCI_DEVICE;
    if (under_pci || !is_gpu_osdev(os) || std::string_view(os->name).starts_with("nvml")) continue;
    decltype(found)::value_type f;
    f.info.os_devices = {os->name};
    f.site = site_of(topology, os);
    found.push_back(std::move(f));
  }
  return found;
}

std::string netdev_of(hwloc_obj_t pci) {
  std::string name;
  for_each_osdev_child(pci, [&](hwloc_obj_t c) {
    if (name.empty() && c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && c->name) name = c->name;
  });
  return name;
}

std::vector<Found<NicInfo>> find_nics(hwloc_topology_t topology) {
  std::vector<Found<NicInfo>> found;
  std::set<hwloc_obj_t> covered;
  for (hwloc_obj_t os = hwloc_get_next_osdev(topology, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(topology, os)) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || os->name == nullptr) continue;
    decltype(found)::value_type f;
    f.info.name = os->name;
    hwloc_obj_t pci = os->parent && os->parent->type == HWLOC_OBJ_PCI_DEVICE ? os->parent : nullptr;
    if (pci != nullptr) {
      fill_pci(pci, f.info.pci_busid, f.info.vendor_id, f.info.device_id, f.info.model);
      f.info.netdev = netdev_of(pci);
      covered.insert(pci);
    }
    f.info.kind = nic_kind(f.info.vendor_id, f.info.name);
    f.site = site_of(topology, os);
    found.push_back(std::move(f));
  }
  // RDMA-capable functions whose driver exposes no verbs device (yet).
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topology, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topology, pci)) {
    const auto& a = pci->attr->pcidev;
    auto kind = rdma_pci_kind(a.vendor_id, a.device_id, a.class_id);
    if (!kind || covered.contains(pci)) continue;
    decltype(found)::value_type f;
    fill_pci(pci, f.info.pci_busid, f.info.vendor_id, f.info.device_id, f.info.model);
    f.info.name = "pci:" + f.info.pci_busid;
    f.info.kind = *kind;
    f.info.netdev = netdev_of(pci);
    f.site = site_of(topology, pci);
    found.push_back(std::move(f));
  }
  return found;
}

// PCI bus order; devices without a bus address last, by name.
template <typename Info, typename Key>
void sort_found(std::vector<Found<Info>>& found, Key key) {
  std::stable_sort(found.begin(), found.end(),
                   [&](const Found<Info>& a, const Found<Info>& b) { return key(a) < key(b); });
}

std::vector<NumaInfo> find_numa(hwloc_topology_t topology) {
  std::vector<NumaInfo> nodes;
  const int ncores = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE);
  const hwloc_obj_type_t core_type = ncores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node)) {
    NumaInfo info;
    info.os_index = static_cast<int>(node->os_index);
    info.package = node->parent ? package_of(topology, node->parent) : -1;
    info.cpus = to_cpuset(node->cpuset);
    info.memory_bytes = node->attr->numanode.local_memory;
    for (hwloc_obj_t core = hwloc_get_next_obj_by_type(topology, core_type, nullptr);
         core != nullptr; core = hwloc_get_next_obj_by_type(topology, core_type, core)) {
      if (core->cpuset && node->cpuset && !hwloc_bitmap_iszero(core->cpuset) &&
          hwloc_bitmap_isincluded(core->cpuset, node->cpuset)) {
        info.cores.push_back(to_cpuset(core->cpuset));
      }
    }
    nodes.push_back(std::move(info));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaInfo& a, const NumaInfo& b) { return a.os_index < b.os_index; });
  return nodes;
}

}  // namespace

Discovery discover(hwloc_topology_t topology) {
  Discovery d;
  auto gpus = find_gpus(topology);
  sort_found(gpus, [](const auto& f) {
    return std::make_tuple(f.info.pci_busid.empty(), f.info.pci_busid, f.info.os_devices);
  });
  for (auto& f : gpus) {
    f.info.index = static_cast<int>(d.gpus.size());
    f.info.numa = f.site.locality.numa;
    f.info.package = f.site.locality.package;
    d.gpus.push_back(std::move(f.info));
    d.gpu_sites.push_back(std::move(f.site));
  }
  auto nics = find_nics(topology);
  sort_found(nics, [](const auto& f) {
    return std::make_tuple(f.info.pci_busid.empty(), f.info.pci_busid, f.info.name);
  });
  for (auto& f : nics) {
    f.info.index = static_cast<int>(d.nics.size());
    f.info.numa = f.site.locality.numa;
    f.info.package = f.site.locality.package;
    d.nics.push_back(std::move(f.info));
    d.nic_sites.push_back(std::move(f.site));
  }
  d.numa = find_numa(topology);
  d.cpus = to_cpuset(hwloc_get_root_obj(topology)->cpuset);
  const int ncores = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE);
  d.cores = static_cast<std::size_t>(ncores > 0 ? ncores : static_cast<int>(d.cpus.size()));
  return d;
}

}  // namespace fabric::topo
