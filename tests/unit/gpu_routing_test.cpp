// Which GPU each default group serves (engine::visible_groups, docs/topology.md "Which GPU a
// group serves"): the plan's GPUs (hwloc, PCI order) matched to this process's CUDA ordinals by
// PCI bus id, so any CUDA_VISIBLE_DEVICES order or subset routes a GPU's memory to its own NICs.
// On a p5.48xlarge fixture, without a GPU.

#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "engine/group_plan.hpp"
#include "fabric/topology.hpp"

namespace fabric::engine {
namespace {

Topology p5() {
  TopologyOptions options;
  // Appended, not operator+: GCC 12 warns falsely on that with precompiled headers.
  std::string path = FABRIC_TOPOLOGY_DATA;
  path.append("/p5_48xlarge.xml");
  options.xml_path = path;
  auto t = detect_topology(options);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t).value() : Topology{};
}

// What CUDA reports under CUDA_VISIBLE_DEVICES=<plan_gpus>: ordinal i is plan GPU plan_gpus[i],
// its bus id spelled as the driver spells it (upper case, 8-digit domain on some versions).
std::vector<std::string> visible(const Topology& t, std::vector<int> plan_gpus, bool wide = false) {
  std::vector<std::string> out;
  for (int g : plan_gpus) {
    std::string id = t.gpus.at(g).pci_busid;
    for (char& c : id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (wide) id.insert(0, "0000");
    out.push_back(id);
  }
  return out;
}

// The group serving CUDA ordinal `ordinal`, and the plan GPU that group's NICs sit next to.
int plan_gpu_of_ordinal(const Topology& t, const std::vector<VisibleGroup>& groups, int ordinal) {
  for (const VisibleGroup& g : groups) {
    if (g.cuda_ordinal == ordinal) return t.groups.at(g.plan_index).gpu;
  }
  return -2;
}

TEST(GpuRouting, AllVisibleInPciOrderIsThePlan) {
  const Topology t = p5();
  ASSERT_EQ(t.gpus.size(), 8u);
  const auto groups = visible_groups(t, visible(t, {0, 1, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(groups.size(), 8u);
  for (int o = 0; o < 8; ++o) EXPECT_EQ(plan_gpu_of_ordinal(t, groups, o), o);
}

TEST(GpuRouting, ReorderedVisibleDevicesRouteEachOrdinalToItsOwnGpusNics) {
  const Topology t = p5();
  // CUDA_VISIBLE_DEVICES=3,1: device 0 is physical GPU 3, not GPU 0.
  const auto groups = visible_groups(t, visible(t, {3, 1}));
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(plan_gpu_of_ordinal(t, groups, 0), 3);
  EXPECT_EQ(plan_gpu_of_ordinal(t, groups, 1), 1);
  // Groups keep plan order; only their ordinals follow CUDA's.
  EXPECT_LT(groups[0].plan_index, groups[1].plan_index);
}

TEST(GpuRouting, OneVisibleGpuGetsOneGroupOnItsNics) {
  const Topology t = p5();
  const auto groups = visible_groups(t, visible(t, {6}, /*wide=*/true));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].cuda_ordinal, 0);
  EXPECT_EQ(t.groups.at(groups[0].plan_index).gpu, 6);
}

TEST(GpuRouting, FullyReversedOrderOfAllEight) {
  const Topology t = p5();
  const auto groups = visible_groups(t, visible(t, {7, 6, 5, 4, 3, 2, 1, 0}));
  ASSERT_EQ(groups.size(), 8u);
  for (int o = 0; o < 8; ++o) EXPECT_EQ(plan_gpu_of_ordinal(t, groups, o), 7 - o);
}

TEST(GpuRouting, NoDriverOrNoMatchFallsBackToPciOrder) {
  const Topology t = p5();
  for (const auto& v : {std::optional<std::vector<std::string>>{},
                        std::optional<std::vector<std::string>>{{"0000:ff:1f.7"}}}) {
    const auto groups = visible_groups(t, v);
    ASSERT_EQ(groups.size(), 8u);
    for (std::size_t g = 0; g < 8; ++g) {
      EXPECT_EQ(groups[g].plan_index, g);
      EXPECT_EQ(groups[g].cuda_ordinal, t.groups[g].gpu);
    }
  }
}

TEST(CanonicalBusid, OneSpellingPerDevice) {
  EXPECT_EQ(canonical_busid("0000:53:00.0"), "0000:53:00.0");
  EXPECT_EQ(canonical_busid("00000000:53:00.0"), "0000:53:00.0");
  EXPECT_EQ(canonical_busid("0000:A5:1F.3"), "0000:a5:1f.3");
  EXPECT_EQ(canonical_busid("53:00.0"), "0000:53:00.0");
  for (const char* bad : {"", "53", "0000:53:00", "0000:5g:00.0", "0000:53:20.0", "0000:53:00.8",
                          "0000:153:00.0", "x:53:00.0"}) {
    EXPECT_EQ(canonical_busid(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace fabric::engine
