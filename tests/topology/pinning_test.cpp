#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "fabric/topology.hpp"

namespace fabric {
namespace {

// The kernel's view of the calling thread, independent of the code under test.
std::vector<int> kernel_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

TEST(Pinning, PinsTheCallingThreadToCoreZero) {
  if (!CpuSet::from(kernel_affinity()).contains(0)) GTEST_SKIP() << "CPU 0 is not ours to use";
  // In a thread of its own, so the test process keeps its mask.
  std::thread([] {
    const Status s = pin_current_thread(CpuSet{{0}});
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(kernel_affinity(), std::vector<int>{0});
    auto seen = current_thread_affinity();
    ASSERT_TRUE(seen.ok()) << seen.status().to_string();
    EXPECT_EQ(*seen, CpuSet{{0}});
    EXPECT_EQ(sched_getcpu(), 0);
  }).join();
}

TEST(Pinning, PinsToASetAndBack) {
  const std::vector<int> original = kernel_affinity();
  std::thread([&] {
    ASSERT_TRUE(pin_current_thread(CpuSet{{original.back()}}).ok());
    EXPECT_EQ(kernel_affinity(), std::vector<int>{original.back()});
    ASSERT_TRUE(pin_current_thread(CpuSet{original}).ok());
    EXPECT_EQ(kernel_affinity(), original);
  }).join();
}

TEST(Pinning, RejectsEmptyAndUnusableSets) {
  std::thread([] {
    const std::vector<int> before = kernel_affinity();
    EXPECT_EQ(pin_current_thread(CpuSet{}).code(), Errc::invalid_argument);
    const Status far = pin_current_thread(CpuSet{{60000}});  // no such CPU here
    EXPECT_EQ(far.code(), Errc::invalid_argument) << far.to_string();
    EXPECT_NE(far.message().find("60000"), std::string::npos);
    EXPECT_EQ(pin_current_thread(CpuSet{{1 << 20}}).code(), Errc::invalid_argument);
    EXPECT_EQ(kernel_affinity(), before) << "a failed pin must leave the mask alone";
  }).join();
}

TEST(Pinning, DefaultIsOffBelowFourCpusElseNuma) {
  EXPECT_EQ(default_pinning(1), Pinning::off);
  EXPECT_EQ(default_pinning(2), Pinning::off);
  EXPECT_EQ(default_pinning(3), Pinning::off);
  EXPECT_EQ(default_pinning(4), Pinning::numa);
  EXPECT_EQ(default_pinning(192), Pinning::numa);
  EXPECT_EQ(default_pinning(), default_pinning(kernel_affinity().size()));
}

TEST(Pinning, ParsesAndPrintsItsNames) {
  for (Pinning p : {Pinning::off, Pinning::numa, Pinning::core}) {
    auto parsed = parse_pinning(to_string(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(parse_pinning("socket").status().code(), Errc::invalid_argument);
}

TEST(Pinning, WorkerCpusFollowThePolicy) {
  GroupPlan group;
  group.cpus = CpuSet::from({0, 1, 2, 3});
  group.core = CpuSet{{3}};
  EXPECT_TRUE(worker_cpus(group, Pinning::off).empty());
  EXPECT_EQ(worker_cpus(group, Pinning::numa), group.cpus);
  EXPECT_EQ(worker_cpus(group, Pinning::core), group.core);
  group.core = {};
  EXPECT_EQ(worker_cpus(group, Pinning::core), group.cpus);
}

}  // namespace
}  // namespace fabric
