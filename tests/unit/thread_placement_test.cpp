// The thread placement policy (fabric/threads.hpp): which cgroup files name the process's CPUs,
// how the answer is chosen, and what a placed thread does to itself.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <ostream>
#include <string>
#include <thread>

#include "fabric/threads.hpp"
#include "threads/process_cpus.hpp"

namespace fabric {

// Failures print the cpulist, not the vector's bytes.
void PrintTo(const CpuSet& set, std::ostream* os) { *os << '"' << set.to_string() << '"'; }

namespace {

using threads::choose_process_cpus;
using threads::cpuset_files;

CpuSet cpus(const char* list) { return CpuSet::parse(list).value(); }

TEST(CpusetFiles, UnifiedHierarchyWalksFromTheProcessCgroupUpToTheRoot) {
  const auto files = cpuset_files("0::/system.slice/app.service\n", "/cg");
  const std::vector<std::string> want = {"/cg/system.slice/app.service/cpuset.cpus.effective",
                                         "/cg/system.slice/cpuset.cpus.effective",
                                         "/cg/cpuset.cpus.effective"};
  EXPECT_EQ(files, want);
}

TEST(CpusetFiles, V1CpusetControllerComesBeforeTheUnifiedTree) {
  const auto files = cpuset_files("9:name=systemd:/\n3:cpuset,cpu:/docker/abc\n0::/\n", "/cg");
  const std::vector<std::string> want = {"/cg/cpuset/docker/abc/cpuset.effective_cpus",
                                         "/cg/cpuset/docker/cpuset.effective_cpus",
                                         "/cg/cpuset/cpuset.effective_cpus",
                                         "/cg/cpuset.cpus.effective"};
  EXPECT_EQ(files, want);
}

TEST(CpusetFiles, LinesOfOtherControllersAndGarbageNameNoFile) {
  EXPECT_TRUE(cpuset_files("4:memory:/x\n2:cpuacct:/\nnot a line\n::\n1:cpusetx:/y\n").empty());
}

TEST(ChooseProcessCpus, CgroupWithinTheOnlineCpus) {
  EXPECT_EQ(choose_process_cpus(cpus("0-7"), cpus("0-3"), cpus("2")), cpus("0-3"));
}

TEST(ChooseProcessCpus, TheAffinityAtLoadWhereNoCgroupSaysAnything) {
  EXPECT_EQ(choose_process_cpus(std::nullopt, cpus("0-3"), cpus("1-2")), cpus("1-2"));
  // A cgroup that shares no CPU with the online ones is as good as none.
  EXPECT_EQ(choose_process_cpus(cpus("8-9"), cpus("0-3"), cpus("1")), cpus("1"));
}

TEST(ChooseProcessCpus, NotTheCallersMaskWhenTheCgroupIsWider) {
  // The case that matters: a host pinned the loading thread to CPU 0 of a 2-CPU cgroup.
  EXPECT_EQ(choose_process_cpus(cpus("0-1"), std::nullopt, cpus("0")), cpus("0-1"));
}

TEST(ProcessCpus, IsNotNarrowedByTheCallingThreadsPin) {
  auto all = process_cpus();
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  if (all->size() < 2) GTEST_SKIP() << "needs 2 CPUs, this process has " << all->size();
  Result<CpuSet> seen = Status(Errc::not_found, "not run");
  std::thread pinned([&] {
    ASSERT_TRUE(pin_current_thread(CpuSet{{all->cpus.front()}}).ok());
    seen = process_cpus();
  });
  pinned.join();
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(*seen, *all);
}

class EngineThreadCpus : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kCpusEnv); }
};

TEST_F(EngineThreadCpus, ConfiguredThenFabricCpusThenTheProcess) {
  const CpuSet all = process_cpus().value();
  const CpuSet first{{all.cpus.front()}};
  unsetenv(kCpusEnv);
  EXPECT_EQ(engine_thread_cpus().value().cpus, all);
  EXPECT_EQ(engine_thread_cpus().value().source, "process");
  ASSERT_EQ(setenv(kCpusEnv, first.to_string().c_str(), 1), 0);
  EXPECT_EQ(engine_thread_cpus().value().cpus, first);
  EXPECT_EQ(engine_thread_cpus().value().source, "FABRIC_CPUS");
  EXPECT_EQ(engine_thread_cpus(all).value().source, "EngineConfig::thread_cpus");
}

TEST_F(EngineThreadCpus, KeepsOnlyTheCpusTheProcessMayUse) {
  const CpuSet all = process_cpus().value();
  CpuSet wider = all;
  wider.cpus.push_back(all.cpus.back() + 100);
  EXPECT_EQ(engine_thread_cpus(wider).value().cpus, all);
}

TEST_F(EngineThreadCpus, MalformedOrForeignCpusAreInvalidArguments) {
  ASSERT_EQ(setenv(kCpusEnv, "two", 1), 0);
  auto bad = engine_thread_cpus();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::invalid_argument);
  EXPECT_NE(bad.status().message().find("FABRIC_CPUS=\"two\""), std::string::npos);
  unsetenv(kCpusEnv);
  auto foreign = engine_thread_cpus(CpuSet{{60000}});
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), Errc::invalid_argument);
}

std::string proc_comm(pid_t tid) {
  std::string comm;
  std::ifstream("/proc/self/task/" + std::to_string(tid) + "/comm") >> comm;
  return comm;
}

TEST(PlacedThread, NamesAndPlacesItselfAndIsListedWhileItLives) {
  const CpuSet all = process_cpus().value();
  const CpuSet last{{all.cpus.back()}};
  ThreadPlacement inside;
  std::string comm;
  std::thread t([&] {
    const PlacedThread placed("fabric-test-name-too-long", last);
    const auto listed = library_threads();
    auto it = std::find_if(listed.begin(), listed.end(),
                           [](const ThreadPlacement& p) { return p.name == "fabric-test-nam"; });
    if (it != listed.end()) {
      inside = *it;
      comm = proc_comm(it->tid);
    }
  });
  t.join();
  EXPECT_EQ(inside.name, "fabric-test-nam");  // the kernel keeps 15 characters
  EXPECT_EQ(comm, "fabric-test-nam");
  EXPECT_EQ(inside.cpus, last);
  const auto after = library_threads();
  EXPECT_TRUE(std::none_of(after.begin(), after.end(),
                           [&](const ThreadPlacement& p) { return p.tid == inside.tid; }));
}

TEST(PlacedThread, AnEmptySetKeepsTheInheritedMask) {
  CpuSet mine;
  CpuSet before;
  std::thread t([&] {
    before = current_thread_affinity().value();
    const PlacedThread placed("fabric-test", CpuSet{});
    mine = placed.cpus();
  });
  t.join();
  EXPECT_EQ(mine, before);
}

}  // namespace
}  // namespace fabric
