// detect_topology on the machine running the tests: whatever it has, the plan
// must be consistent. (This CI box has no GPU and no RDMA NIC: one host group.)

#include <gtest/gtest.h>

#include <filesystem>

#include "fabric/topology.hpp"
#include "topology/hwloc_topology.hpp"

namespace fabric {
namespace {

TEST(ThisMachine, DetectsAConsistentPlan) {
  auto found = detect_topology();
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  const Topology& t = *found;
  EXPECT_EQ(t.source, "this machine");
  ASSERT_FALSE(t.cpus.empty());
  EXPECT_GE(t.cores, 1u);
  ASSERT_FALSE(t.numa.empty());
  ASSERT_EQ(t.groups.size(), t.gpus.empty() ? 1u : t.gpus.size());
  const std::size_t nics = t.groups.front().nics.size();
  EXPECT_LE(nics, 4u);
  EXPECT_EQ(nics == 0, t.nics.empty());
  for (std::size_t g = 0; g < t.groups.size(); ++g) {
    const GroupPlan& group = t.groups[g];
    EXPECT_EQ(group.gpu, t.gpus.empty() ? -1 : static_cast<int>(g));
    EXPECT_EQ(group.nics.size(), nics) << "peers rely on equal Domain counts";
    ASSERT_FALSE(group.cpus.empty());
    for (int cpu : group.cpus.cpus) EXPECT_TRUE(t.cpus.contains(cpu)) << cpu;
    ASSERT_FALSE(group.core.empty());
    for (const auto& a : group.nics) EXPECT_LT(a.nic, static_cast<int>(t.nics.size()));
  }
  for (std::size_t i = 0; i < t.gpus.size(); ++i) EXPECT_EQ(t.gpus[i].index, static_cast<int>(i));
  for (std::size_t i = 0; i < t.nics.size(); ++i) EXPECT_EQ(t.nics[i].index, static_cast<int>(i));
}

TEST(ThisMachine, CapOfOneNicStillPlans) {
  TopologyOptions options;
  options.max_nics_per_gpu = 1;
  auto found = detect_topology(options);
  ASSERT_TRUE(found.ok()) << found.status().to_string();
  for (const auto& g : found->groups) EXPECT_LE(g.nics.size(), 1u);
}

// The libpciaccess plugin is skipped on purpose; hwloc's sysfs reader must
// still deliver the PCI tree, bridges included, or no GPU or NIC is ever found.
TEST(ThisMachine, PciTreeIsSeenWithoutThePciaccessPlugin) {
  std::error_code ec;
  const std::filesystem::path sys("/sys/bus/pci/devices");
  if (!std::filesystem::exists(sys, ec) || std::filesystem::is_empty(sys, ec)) {
    GTEST_SKIP() << "no PCI devices in sysfs here";
  }
  auto topology = topo::HwlocTopology::load_system();
  ASSERT_TRUE(topology.ok()) << topology.status().to_string();
  EXPECT_NE(hwloc_get_next_pcidev(topology->get(), nullptr), nullptr);
  EXPECT_NE(hwloc_get_next_bridge(topology->get(), nullptr), nullptr);
}

}  // namespace
}  // namespace fabric
