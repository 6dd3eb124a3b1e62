// Group planning on hand-made localities: the rules one at a time.

#include "topology/placement.hpp"

#include <gtest/gtest.h>

#include <set>

namespace fabric::topo {
namespace {

DeviceSite site(std::uint64_t host_bridge, std::vector<std::uint64_t> bridges, int numa,
                int package) {
  return DeviceSite{Locality{host_bridge, std::move(bridges), numa, package}, {}};
}

NumaInfo node(int os_index, int package, std::vector<int> cpus) {
  NumaInfo n;
  n.os_index = os_index;
  n.package = package;
  n.cpus = CpuSet::from(cpus);
  for (int cpu : n.cpus.cpus) n.cores.push_back(CpuSet{{cpu}});
  return n;
}

PlacementInput two_nodes() {
  PlacementInput in;
  in.numa = {node(0, 0, {0, 1, 2, 3}), node(1, 1, {4, 5, 6, 7})};
  in.all_cpus = CpuSet::from({0, 1, 2, 3, 4, 5, 6, 7});
  return in;
}

std::vector<int> nic_ids(const GroupPlan& g) {
  std::vector<int> ids;
  for (const auto& a : g.nics) ids.push_back(a.nic);
  return ids;
}

TEST(Proximity, OrdersSwitchDepthThenRootNumaSocketSystem) {
  const Locality gpu{1, {10, 11, 20}, 0, 0};
  EXPECT_EQ(proximity(gpu, {1, {10, 11, 21}, 0, 0}), (Proximity{Affinity::pcie_switch, 2}));
  EXPECT_EQ(proximity(gpu, {1, {12}, 0, 0}).level, Affinity::pcie_root);
  EXPECT_EQ(proximity(gpu, {2, {30}, 0, 0}).level, Affinity::numa);
  EXPECT_EQ(proximity(gpu, {2, {30}, 1, 0}).level, Affinity::socket);
  EXPECT_EQ(proximity(gpu, {2, {30}, 1, 1}).level, Affinity::system);
  EXPECT_EQ(proximity(gpu, {0, {}, -1, -1}).level, Affinity::system);
  EXPECT_LT(proximity(gpu, {1, {10, 11, 21}, 0, 0}), proximity(gpu, {1, {10, 12}, 0, 0}));
}

TEST(Placement, DeepestSharedSwitchWinsOverAnEarlierNicOfTheSameTree) {
  // One top switch (10,11) feeding two leaf switches; the NIC listed first
  // sits next to the *second* GPU.
  auto in = two_nodes();
  in.max_nics_per_gpu = 1;
  in.gpus = {site(1, {10, 11, 20, 21}, 0, 0), site(1, {10, 11, 30, 31}, 0, 0)};
  in.nics = {site(1, {10, 11, 30, 32}, 0, 0), site(1, {10, 11, 20, 22}, 0, 0)};
  auto groups = plan_groups(in);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(nic_ids(groups[0]), std::vector<int>{1});
  EXPECT_EQ(nic_ids(groups[1]), std::vector<int>{0});
  EXPECT_EQ(groups[0].nics[0].affinity, Affinity::pcie_switch);
}

TEST(Placement, FallsBackFromSwitchToRootToNumaToSocket) {
  auto in = two_nodes();
  in.max_nics_per_gpu = 4;
  in.gpus = {site(1, {10, 11}, 0, 0)};
  in.nics = {site(3, {40}, 1, 1),       // system
             site(2, {30}, 1, 0),       // same socket, other node
             site(2, {31}, 0, 0),       // same node
             site(1, {12}, 0, 0),       // same root complex
             site(1, {10, 11}, 0, 0)};  // same switch
  auto groups = plan_groups(in);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(nic_ids(groups[0]), (std::vector<int>{4, 3, 2, 1}));
  std::vector<Affinity> levels;
  for (const auto& a : groups[0].nics) levels.push_back(a.affinity);
  EXPECT_EQ(levels, (std::vector<Affinity>{Affinity::pcie_switch, Affinity::pcie_root,
                                           Affinity::numa, Affinity::socket}));
}

TEST(Placement, EveryGroupGetsTheSameNumberOfDistinctNics) {
  auto in = two_nodes();
  in.max_nics_per_gpu = 4;
  in.gpus = {site(1, {1}, 0, 0), site(2, {2}, 0, 0), site(3, {3}, 1, 1)};
  for (int i = 0; i < 7; ++i) in.nics.push_back(site(9, {9}, i % 2, i % 2));
  auto groups = plan_groups(in);
  std::set<int> used;
  for (const auto& g : groups) {
    EXPECT_EQ(g.nics.size(), 2u);  // floor(7 / 3)
    for (int id : nic_ids(g)) EXPECT_TRUE(used.insert(id).second) << "NIC " << id << " shared";
  }
}

TEST(Placement, NoNicServesTwoGpusWhenEnoughNicsExist) {
  // All four NICs are under GPU 0's switch; GPU 1 still gets two of them
  // rather than GPU 0 taking all and GPU 1 sharing.
  auto in = two_nodes();
  in.max_nics_per_gpu = 2;
  in.gpus = {site(1, {10}, 0, 0), site(2, {20}, 0, 0)};
  for (int i = 0; i < 4; ++i) in.nics.push_back(site(1, {10}, 0, 0));
  auto groups = plan_groups(in);
  std::set<int> used;
  for (const auto& g : groups) {
    ASSERT_EQ(g.nics.size(), 2u);
    for (int id : nic_ids(g)) EXPECT_TRUE(used.insert(id).second);
  }
  for (const auto& a : groups[0].nics) EXPECT_EQ(a.affinity, Affinity::pcie_switch);
}

TEST(Placement, FewerNicsThanGpusShareEvenlyAndNearest) {
  auto in = two_nodes();
  in.gpus = {site(1, {10}, 0, 0), site(1, {11}, 0, 0), site(2, {20}, 1, 1), site(2, {21}, 1, 1)};
  in.nics = {site(1, {10}, 0, 0), site(2, {21}, 1, 1)};
  auto groups = plan_groups(in);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(nic_ids(groups[0]), std::vector<int>{0});
  EXPECT_EQ(nic_ids(groups[1]), std::vector<int>{0});  // same root complex
  EXPECT_EQ(nic_ids(groups[2]), std::vector<int>{1});
  EXPECT_EQ(nic_ids(groups[3]), std::vector<int>{1});
  EXPECT_EQ(groups[1].nics[0].affinity, Affinity::pcie_root);
}

TEST(Placement, GroupsWithoutNicsWhenThereAreNone) {
  auto in = two_nodes();
  in.gpus = {site(1, {10}, 0, 0), site(2, {20}, 1, 1)};
  auto groups = plan_groups(in);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups[0].nics.empty());
  EXPECT_EQ(groups[1].cpus, CpuSet::from({4, 5, 6, 7}));
}

TEST(Placement, HostGroupTakesTheNicsOfTheFirstNode) {
  auto in = two_nodes();
  in.max_nics_per_gpu = 2;
  in.nics = {site(2, {20}, 1, 1), site(1, {10}, 0, 0), site(1, {11}, 0, 0), site(1, {12}, 0, 0)};
  auto groups = plan_groups(in);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].gpu, -1);
  EXPECT_EQ(groups[0].numa, 0);
  EXPECT_EQ(groups[0].cpus, CpuSet::from({0, 1, 2, 3}));
  EXPECT_EQ(nic_ids(groups[0]), (std::vector<int>{1, 2}));
  EXPECT_EQ(groups[0].nics[0].affinity, Affinity::numa);
}

TEST(Placement, HostGroupTakesAnyNicWhenTheFirstNodeHasNone) {
  auto in = two_nodes();
  in.nics = {site(2, {20}, 1, 1), site(2, {21}, 1, 1)};
  auto groups = plan_groups(in);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(nic_ids(groups[0]), (std::vector<int>{0, 1}));
}

TEST(Placement, EachGroupGetsItsOwnCoreFromTheTopOfItsNode) {
  auto in = two_nodes();
  in.gpus = {site(1, {1}, 0, 0), site(1, {2}, 0, 0), site(2, {3}, 1, 1)};
  auto groups = plan_groups(in);
  EXPECT_EQ(groups[0].core, CpuSet{{3}});
  EXPECT_EQ(groups[1].core, CpuSet{{2}});
  EXPECT_EQ(groups[2].core, CpuSet{{7}});
  for (const auto& g : groups) EXPECT_TRUE(g.cpus.contains(g.core.cpus.front()));
}

TEST(Placement, CoresWrapAroundWhenANodeRunsOut) {
  PlacementInput in;
  in.numa = {node(0, 0, {0, 1})};
  in.all_cpus = CpuSet::from({0, 1});
  for (int i = 0; i < 3; ++i) in.gpus.push_back(site(1, {1}, 0, 0));
  auto groups = plan_groups(in);
  EXPECT_EQ(groups[0].core, CpuSet{{1}});
  EXPECT_EQ(groups[1].core, CpuSet{{0}});
  EXPECT_EQ(groups[2].core, CpuSet{{1}});
}

TEST(Placement, UnknownNodeFallsBackToTheDevicesLocalCpus) {
  auto in = two_nodes();
  DeviceSite gpu = site(1, {1}, -1, -1);
  gpu.local_cpus = CpuSet::from({2, 3, 4, 5});
  in.gpus = {gpu, site(2, {2}, -1, -1)};
  auto groups = plan_groups(in);
  EXPECT_EQ(groups[0].cpus, CpuSet::from({2, 3, 4, 5}));
  EXPECT_EQ(groups[1].cpus, in.all_cpus);
  EXPECT_EQ(groups[0].core, CpuSet{{5}});
  EXPECT_EQ(groups[1].core, CpuSet{{6}});  // same unknown node: the next core down
}

}  // namespace
}  // namespace fabric::topo
