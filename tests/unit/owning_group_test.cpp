// Which group reg_mr registers on (engine::owning_group, docs/api.md "Which group owns
// memory"): the rule behind routing a GPU's memory to its own group's NICs, checked without a
// GPU. The groups are shaped like an engine's: one per GPU (a p5: 8), or GPUs in another order.

#include <gtest/gtest.h>

#include <vector>

#include "engine/group_plan.hpp"

namespace fabric::engine {
namespace {

std::vector<GroupInfo> groups_of_gpus(std::vector<int> gpus) {
  std::vector<GroupInfo> groups;
  for (int gpu : gpus) groups.push_back(GroupInfo{gpu, {}, {}});
  return groups;
}

TEST(OwningGroup, EachGpusMemoryGoesToTheGroupOfThatGpu) {
  const auto groups = groups_of_gpus({0, 1, 2, 3, 4, 5, 6, 7});
  for (int gpu = 0; gpu < 8; ++gpu) {
    auto g = owning_group(groups, 0, Device::cuda(gpu), std::nullopt);
    ASSERT_TRUE(g) << g.status().to_string();
    EXPECT_EQ(g.value(), static_cast<std::uint32_t>(gpu));
  }
}

TEST(OwningGroup, TheGroupIsFoundByItsGpuNotByItsPosition) {
  const auto groups = groups_of_gpus({3, 1, -1});
  EXPECT_EQ(owning_group(groups, 2, Device::cuda(1), std::nullopt).value(), 1u);
  EXPECT_EQ(owning_group(groups, 2, Device::cuda(3), std::nullopt).value(), 0u);
}

TEST(OwningGroup, HostMemoryAndGpusNoGroupServesGoToTheHostGroup) {
  const auto groups = groups_of_gpus({0, 1, -1});
  EXPECT_EQ(owning_group(groups, 2, Device::host(), std::nullopt).value(), 2u);
  EXPECT_EQ(owning_group(groups, 2, Device::cuda(5), std::nullopt).value(), 2u);
  // Host memory is not GPU 0's, though Device::host() has index 0.
  EXPECT_EQ(owning_group(groups_of_gpus({0, -1}), 1, Device::host(), std::nullopt).value(), 1u);
}

TEST(OwningGroup, ANamedGroupWinsOverTheDevice) {
  const auto groups = groups_of_gpus({0, 1, 2, 3});
  EXPECT_EQ(owning_group(groups, 0, Device::cuda(3), 1u).value(), 1u);
  EXPECT_EQ(owning_group(groups, 0, Device::host(), 2u).value(), 2u);
}

TEST(OwningGroup, ANamedGroupTheEngineLacksIsRejectedAndSaysHowManyThereAre) {
  const auto groups = groups_of_gpus({0, 1, 2, 3});
  auto g = owning_group(groups, 0, Device::cuda(0), 4u);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.status().code(), Errc::invalid_argument);
  EXPECT_NE(g.status().message().find("group 4 does not exist (the engine has 4 groups)"),
            std::string::npos)
      << g.status().message();
}

}  // namespace
}  // namespace fabric::engine
