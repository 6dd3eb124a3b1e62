// detect_topology on the synthetic machines of data/ (see gen_fixtures.py).
// "Same switch" is checked against hwloc itself: the deepest common ancestor
// of a GPU and its NIC must be a PCI bridge that holds no other GPU.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "fabric/topology.hpp"
#include "topology/hwloc_topology.hpp"

namespace fabric {
namespace {

// Appended, as tests/support/src/netbed.cpp says why.
std::string fixture(const char* name) {
  return std::string(FABRIC_TOPOLOGY_DATA).append("/").append(name);
}

Topology load(const char* name, int max_nics = 4) {
  TopologyOptions options;
  options.xml_path = fixture(name);
  options.max_nics_per_gpu = max_nics;
  auto topology = detect_topology(options);
  EXPECT_TRUE(topology.ok()) << topology.status().to_string();
  return topology.ok() ? std::move(topology).value() : Topology{};
}

hwloc_obj_t pci_by_busid(hwloc_topology_t topology, const std::string& busid) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  EXPECT_EQ(std::sscanf(busid.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &func), 4) << busid;
  return hwloc_get_pcidev_by_busid(topology, domain, bus, dev, func);
}

// GPUs below `bridge`. (hwloc_obj_is_in_subtree compares cpusets, which I/O
// objects lack, so walk the parents.)
int gpus_below(hwloc_topology_t topology, hwloc_obj_t bridge, const Topology& found) {
  int n = 0;
  for (const auto& gpu : found.gpus) {
    for (hwloc_obj_t p = pci_by_busid(topology, gpu.pci_busid); p != nullptr; p = p->parent) {
      if (p == bridge) ++n;
    }
  }
  return n;
}

void expect_own_switch(const char* name, const Topology& found) {
  auto hw = topo::HwlocTopology::load_xml_file(fixture(name));
  ASSERT_TRUE(hw.ok()) << hw.status().to_string();
  for (const auto& group : found.groups) {
    const auto& gpu = found.gpus.at(group.gpu);
    hwloc_obj_t gpu_obj = pci_by_busid(hw->get(), gpu.pci_busid);
    ASSERT_NE(gpu_obj, nullptr);
    for (const auto& a : group.nics) {
      const auto& nic = found.nics.at(a.nic);
      hwloc_obj_t nic_obj = pci_by_busid(hw->get(), nic.pci_busid);
      ASSERT_NE(nic_obj, nullptr);
      hwloc_obj_t common = hwloc_get_common_ancestor_obj(hw->get(), gpu_obj, nic_obj);
      ASSERT_EQ(common->type, HWLOC_OBJ_BRIDGE) << gpu.pci_busid << " / " << nic.name;
      EXPECT_EQ(common->attr->bridge.upstream_type, HWLOC_OBJ_BRIDGE_PCI)
          << nic.name << " only shares a host bridge with GPU " << gpu.index;
      EXPECT_EQ(gpus_below(hw->get(), common, found), 1)
          << nic.name << " is not in GPU " << gpu.index << "'s own switch";
      EXPECT_EQ(a.affinity, Affinity::pcie_switch);
      EXPECT_EQ(nic.numa, gpu.numa);
    }
  }
}

std::set<int> all_assigned(const Topology& t) {
  std::set<int> nics;
  for (const auto& g : t.groups) {
    for (const auto& a : g.nics)
      EXPECT_TRUE(nics.insert(a.nic).second) << "NIC " << a.nic << " shared";
  }
  return nics;
}

TEST(P5Fixture, FindsEightH100sAndThirtyTwoEfasAndNoDecoys) {
  const Topology t = load("p5_48xlarge.xml");
  ASSERT_EQ(t.gpus.size(), 8u);   // the four NVSwitches are not GPUs
  ASSERT_EQ(t.nics.size(), 32u);  // the ENA interface is not an RDMA NIC
  for (const auto& gpu : t.gpus) {
    EXPECT_EQ(gpu.vendor_id, 0x10de);
    EXPECT_EQ(gpu.device_id, 0x2330);
    EXPECT_EQ(gpu.model, "GH100 [H100 SXM5 80GB]");
    EXPECT_EQ(gpu.numa, gpu.index / 4);
    EXPECT_EQ(gpu.package, gpu.index / 4);
  }
  EXPECT_EQ(t.gpus[0].os_devices, (std::vector<std::string>{"cuda0", "nvml0"}));
  EXPECT_EQ(t.gpus[7].os_devices, (std::vector<std::string>{"cuda7", "nvml7"}));
  for (const auto& nic : t.nics) {
    EXPECT_EQ(nic.kind, NicKind::efa);
    EXPECT_TRUE(nic.name.starts_with("rdmap")) << nic.name;
  }
  ASSERT_EQ(t.numa.size(), 2u);
  EXPECT_EQ(t.numa[1].cpus.to_string(), "48-95,144-191");
  EXPECT_EQ(t.numa[1].cores.size(), 48u);
  EXPECT_EQ(t.numa[1].cores[0].to_string(), "48,144");
  EXPECT_EQ(t.numa[0].memory_bytes, 1024ull << 30);
  EXPECT_EQ(t.cpus.size(), 192u);
  EXPECT_EQ(t.cores, 96u);
}

TEST(P5Fixture, EachGpuGetsItsFourEfasUnderItsOwnSwitch) {
  const Topology t = load("p5_48xlarge.xml");
  ASSERT_EQ(t.groups.size(), 8u);
  for (std::size_t g = 0; g < t.groups.size(); ++g) {
    EXPECT_EQ(t.groups[g].gpu, static_cast<int>(g));
    EXPECT_EQ(t.groups[g].nics.size(), 4u);
  }
  EXPECT_EQ(all_assigned(t).size(), 32u);
  expect_own_switch("p5_48xlarge.xml", t);
}

TEST(P5Fixture, SocketOneGpusGetSocketOneCpus) {
  const Topology t = load("p5_48xlarge.xml");
  const CpuSet socket1 = *CpuSet::parse("48-95,144-191");
  for (const auto& group : t.groups) {
    const auto& gpu = t.gpus.at(group.gpu);
    EXPECT_EQ(group.numa, gpu.numa);
    if (gpu.package == 1) {
      EXPECT_EQ(group.cpus, socket1) << "GPU " << gpu.index;
    } else {
      EXPECT_EQ(group.cpus.to_string(), "0-47,96-143");
    }
    ASSERT_FALSE(group.core.empty());
    for (int cpu : group.core.cpus) EXPECT_TRUE(group.cpus.contains(cpu));
  }
  // Four groups per node, four different cores.
  std::set<std::string> cores;
  for (const auto& g : t.groups) cores.insert(g.core.to_string());
  EXPECT_EQ(cores.size(), 8u);
  EXPECT_EQ(t.groups[4].core.to_string(), "95,191");
}

TEST(P5Fixture, TwoNicsPerGpuWhenCapped) {
  const Topology t = load("p5_48xlarge.xml", 2);
  ASSERT_EQ(t.groups.size(), 8u);
  for (const auto& g : t.groups) EXPECT_EQ(g.nics.size(), 2u);
  EXPECT_EQ(all_assigned(t).size(), 16u);
  expect_own_switch("p5_48xlarge.xml", t);
}

TEST(Cx7Fixture, OneConnectX7PerGpuTheOneInItsLeafSwitch) {
  const Topology t = load("h100_cx7.xml");
  ASSERT_EQ(t.gpus.size(), 8u);
  ASSERT_EQ(t.nics.size(), 10u);  // eight compute ports, two storage ports
  ASSERT_EQ(t.groups.size(), 8u);
  for (const auto& g : t.groups) {
    ASSERT_EQ(g.nics.size(), 1u);
    // The generator numbers each GPU's partner NIC like the GPU.
    EXPECT_EQ(t.nics.at(g.nics[0].nic).name, "mlx5_" + std::to_string(g.gpu));
    EXPECT_EQ(t.nics.at(g.nics[0].nic).kind, NicKind::connectx);
  }
  all_assigned(t);
  expect_own_switch("h100_cx7.xml", t);
  EXPECT_EQ(t.nics.at(0).netdev.substr(0, 3), "ibp");
}

TEST(Cx7Fixture, SocketOneCpus) {
  const Topology t = load("h100_cx7.xml");
  for (const auto& g : t.groups) {
    EXPECT_EQ(g.cpus.to_string(),
              t.gpus.at(g.gpu).package == 1 ? "56-111,168-223" : "0-55,112-167");
  }
}

TEST(SmallVmFixture, NoGpuNoNicOneHostGroup) {
  const Topology t = load("small_vm.xml");
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_TRUE(t.nics.empty());  // virtio eth0 is not an RDMA NIC
  ASSERT_EQ(t.groups.size(), 1u);
  EXPECT_EQ(t.groups[0].gpu, -1);
  EXPECT_TRUE(t.groups[0].nics.empty());
  EXPECT_EQ(t.groups[0].numa, 0);
  EXPECT_EQ(t.groups[0].cpus.to_string(), "0-1");
  EXPECT_EQ(t.groups[0].core.to_string(), "1");
  EXPECT_EQ(t.cores, 2u);
}

Status load_status(const std::string& path, int max_nics = 4) {
  TopologyOptions options;
  options.xml_path = path;
  options.max_nics_per_gpu = max_nics;
  return detect_topology(options).status();
}

TEST(BadInput, TruncatedXmlIsAMalformedErrorNamingTheFile) {
  const Status s = load_status(fixture("malformed.xml"));
  EXPECT_EQ(s.code(), Errc::malformed) << s.to_string();
  EXPECT_NE(s.message().find("malformed.xml"), std::string::npos) << s.message();
}

TEST(BadInput, MissingFileIsNotFound) {
  const Status s = load_status(fixture("no-such-machine.xml"));
  EXPECT_EQ(s.code(), Errc::not_found) << s.to_string();
  EXPECT_NE(s.message().find("no-such-machine.xml"), std::string::npos);
}

TEST(BadInput, EmptyAndForeignXmlAreMalformed) {
  const std::string dir = ::testing::TempDir();
  const std::pair<const char*, const char*> cases[] = {
      {"empty.xml", ""},
      {"html.xml", "<html><body>not a topology</body></html>\n"},
      {"binary.xml", "\x01\x02\x03\xff garbage"},
      {"no-objects.xml", "<?xml version=\"1.0\"?>\n<topology version=\"2.0\"></topology>\n"},
  };
  for (const auto& [name, text] : cases) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    const Status s = load_status(path);
    EXPECT_EQ(s.code(), Errc::malformed) << name << ": " << s.to_string();
    std::remove(path.c_str());
  }
}

TEST(BadInput, MaxNicsOutsideOneToFourIsRejected) {
  for (int bad : {0, 5, -1}) {
    const Status s = load_status(fixture("p5_48xlarge.xml"), bad);
    EXPECT_EQ(s.code(), Errc::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace fabric
