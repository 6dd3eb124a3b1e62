#include <gtest/gtest.h>

#include <string>

#include "fabric/topology.hpp"

namespace fabric {
namespace {

TEST(CpuSet, FromSortsAndDropsDuplicatesAndNegatives) {
  EXPECT_EQ(CpuSet::from({5, 1, 3, 1, -2}).cpus, (std::vector<int>{1, 3, 5}));
}

TEST(CpuSet, PrintsRangesLikeLinuxCpulists) {
  EXPECT_EQ(CpuSet::from({0, 1, 2, 3, 8, 10, 11}).to_string(), "0-3,8,10-11");
  EXPECT_EQ(CpuSet{}.to_string(), "");
  EXPECT_EQ(CpuSet::from({7}).to_string(), "7");
}

TEST(CpuSet, ParsesWhatItPrints) {
  for (const char* text : {"0-3,8,10-11", "0", "48-95,144-191"}) {
    auto parsed = CpuSet::parse(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(parsed->to_string(), text);
  }
  EXPECT_TRUE(CpuSet::parse("").ok());
  EXPECT_TRUE(CpuSet::parse("")->empty());
}

TEST(CpuSet, RejectsGarbageWithTheOffendingItem) {
  for (const char* text : {"a", "1,,2", "3-1", "1-", "-1", "2x", "99999999"}) {
    auto parsed = CpuSet::parse(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), Errc::invalid_argument) << text;
  }
  EXPECT_NE(CpuSet::parse("3-1").status().message().find("backwards"), std::string::npos);
}

// A fuzzer finding: each item used to be expanded on its own, so repeating
// the widest range made a 4 KiB list allocate gigabytes.
TEST(CpuSet, RepeatedAndOverlappingRangesCostNoMoreThanTheirUnion) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "0-1048576,";
  text += "5,3-9,1048576";
  auto parsed = CpuSet::parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->size(), 1048577u);
  EXPECT_EQ(parsed->to_string(), "0-1048576");
  EXPECT_EQ(CpuSet::parse("8-10,0-2,1-3,9")->to_string(), "0-3,8-10");
}

TEST(CpuSet, Contains) {
  const CpuSet set = CpuSet::from({2, 4, 6});
  EXPECT_TRUE(set.contains(4));
  EXPECT_FALSE(set.contains(5));
  EXPECT_EQ(set.size(), 3u);
}

}  // namespace
}  // namespace fabric
