#include "libfabric/shm_liveness.hpp"
#include "shm_region_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <thread>

namespace fabric::ofi {
namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
  // With the terminating NUL, as shm's fi_getname hands it out.
  return {reinterpret_cast<const std::byte*>(s.c_str()), s.size() + 1};
}

// A region file as shm makes one, named like the engine's endpoints.
using RegionFile = test::RegionFile;

TEST(ShmPeerLiveness, ReadsThePidOfTheEnginesNamesOnly) {
  EXPECT_EQ(ShmPeerLiveness::pid_of("fl-1234-00ff:0:0"), 1234);
  EXPECT_EQ(ShmPeerLiveness::pid_of("fl--00ff"), 0);
  EXPECT_EQ(ShmPeerLiveness::pid_of("fl-12x-00ff"), 0);
  EXPECT_EQ(ShmPeerLiveness::pid_of("fl-0-00ff"), 0);
  EXPECT_EQ(ShmPeerLiveness::pid_of("other-1234-00ff"), 0);
  EXPECT_EQ(ShmPeerLiveness::watch(bytes_of("fi_shm://someone-else:0:0")), nullptr);
}

TEST(ShmPeerLiveness, AClosedEndpointIsGoneThoughItsProcessRuns) {
  RegionFile region(::getpid(), "livenesstest");
  auto watch = ShmPeerLiveness::watch(bytes_of(region.address()));
  ASSERT_NE(watch, nullptr);
  EXPECT_TRUE(watch->check().ok()) << watch->check().to_string();
  ASSERT_EQ(::unlink(region.path().c_str()), 0);
  std::this_thread::sleep_for(ShmPeerLiveness::kRecheck);  // past the last look
  const Status st = watch->check();
  EXPECT_EQ(st.code(), Errc::provider) << st.to_string();
  EXPECT_NE(st.message().find("closed"), std::string::npos) << st.to_string();
}

TEST(ShmPeerLiveness, AnExitedProcessIsGoneThoughItsRegionFileStays) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[1]);
    char c = 0;
    // Exits once the parent closes its end (or dies): bounded by the parent.
    (void)!::read(ready[0], &c, 1);
    ::_exit(0);
  }
  ::close(ready[0]);
  RegionFile region(child, "livenesstest");  // as after a SIGKILL: the file outlives the process
  auto watch = ShmPeerLiveness::watch(bytes_of(region.address()));
  ASSERT_NE(watch, nullptr);
  EXPECT_TRUE(watch->check().ok()) << watch->check().to_string();
  ::close(ready[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::this_thread::sleep_for(ShmPeerLiveness::kRecheck);  // past the last look
  const Status st = watch->check();
  EXPECT_EQ(st.code(), Errc::provider) << st.to_string();
  EXPECT_NE(st.message().find("exited"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace fabric::ofi
