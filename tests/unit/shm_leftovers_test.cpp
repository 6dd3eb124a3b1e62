// Leftover shm region files (libfabric/shm_leftovers.hpp): the sweep removes the regions of
// engines whose process is gone and nobody holds, and nothing else; a held region is held.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "libfabric/shm_leftovers.hpp"

namespace fabric::ofi {
namespace {

namespace fs = std::filesystem;

// A pid that surely belonged to a process a moment ago and belongs to none now.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

class ShmLeftovers : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fabric-shm-sweep-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string make(const std::string& name, std::size_t bytes = 4096) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << std::string(bytes, 'x');
    return path;
  }

  std::string dir_;
};

TEST_F(ShmLeftovers, RemovesOnlyRegionsOfGoneProcessesThatNobodyHolds) {
  const std::string dead = std::to_string(dead_pid());
  const std::string mine = std::to_string(::getpid());
  const auto gone = make("fl-" + dead + "-0123456789abcdef:0:0", 8192);
  const auto held = make("fl-" + dead + "-fedcba9876543210:0:0");
  const auto alive = make("fl-" + mine + "-00000000deadbeef:0:0");
  const auto foreign = make("fi_shm_other_region");
  const auto no_pid = make("fl-x-00:0:0");
  // The held one as a live engine in another pid namespace would hold it.
  const int lock_fd = ::open(held.c_str(), O_RDONLY);
  ASSERT_GE(lock_fd, 0);
  ASSERT_EQ(::flock(lock_fd, LOCK_SH), 0);

  const SweepResult r = sweep_dead_regions(dir_);
  ::close(lock_fd);
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(r.bytes, 8192u);
  EXPECT_FALSE(fs::exists(gone));
  for (const auto& kept : {held, alive, foreign, no_pid}) EXPECT_TRUE(fs::exists(kept)) << kept;
}

TEST_F(ShmLeftovers, AHeldRegionIsLockedAgainstTheSweepUntilItsFdCloses) {
  const std::string dead = std::to_string(dead_pid());
  const std::string name = "fl-" + dead + "-0123456789abcdef:0:0";
  make(name);
  const std::string address = "fi_shm://" + name;
  auto hold = hold_own_region(std::as_bytes(std::span(address.data(), address.size() + 1)), dir_);
  ASSERT_TRUE(hold.ok()) << hold.status().to_string();
  EXPECT_EQ(sweep_dead_regions(dir_).removed, 0u);
  hold->reset();
  EXPECT_EQ(sweep_dead_regions(dir_).removed, 1u);
}

TEST_F(ShmLeftovers, HoldingANameThatIsNotOursOrNotThereIsNotFound) {
  const std::string other = "fi_shm://someone-else:0:0";
  auto a = hold_own_region(std::as_bytes(std::span(other.data(), other.size())), dir_);
  EXPECT_EQ(a.status().code(), Errc::not_found);
  const std::string missing = "fi_shm://fl-1-00:0:0";
  auto b = hold_own_region(std::as_bytes(std::span(missing.data(), missing.size())), dir_);
  EXPECT_EQ(b.status().code(), Errc::not_found);
  const std::string escape = "fi_shm://fl-1-../../etc/passwd";
  auto c = hold_own_region(std::as_bytes(std::span(escape.data(), escape.size())), dir_);
  EXPECT_EQ(c.status().code(), Errc::not_found);
}

// The files in /dev/shm named after `pid`'s engines.
std::vector<std::string> regions_of(pid_t pid) {
  std::vector<std::string> out;
  const std::string prefix = "fl-" + std::to_string(pid) + "-";
  for (const auto& e : fs::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().string());
  }
  return out;
}

// Runs the engine child program (shm_engine_child.cpp) with its stdout on a pipe; `stay`: it waits
// to be killed after its engine is up.
struct EngineChild {
  pid_t pid = -1;
  int out = -1;
};

EngineChild start_engine_child(bool stay) {
  int p[2];
  if (::pipe(p) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], STDOUT_FILENO);
    ::close(p[0]);
    ::close(p[1]);
    const char* program = FABRIC_SHM_ENGINE_CHILD;
    ::execl(program, program, stay ? "stay" : "exit", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(p[1]);
  return {pid, p[0]};
}

// The child's one-byte answer within 60 s; '?' if none came (it is then killed).
char answer_of(const EngineChild& c) {
  pollfd pfd{c.out, POLLIN, 0};
  char byte = '?';
  if (::poll(&pfd, 1, 60000) != 1 || ::read(c.out, &byte, 1) != 1) {
    ::kill(c.pid, SIGKILL);
    byte = '?';
  }
  ::close(c.out);
  return byte;
}

TEST(ShmLeftoversOfAKilledEngine, TheNextEngineToStartRemovesThem) {
  const EngineChild victim = start_engine_child(/*stay=*/true);
  ASSERT_GT(victim.pid, 0);
  ASSERT_EQ(answer_of(victim), 'y');
  const auto left = regions_of(victim.pid);
  ASSERT_FALSE(left.empty()) << "the engine made no region file under /dev/shm";
  ASSERT_EQ(::kill(victim.pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(victim.pid, &status, 0), victim.pid);
  for (const auto& f : left) EXPECT_TRUE(fs::exists(f)) << f << " vanished before any sweep";

  // Another process's first shm engine sweeps; its own region it keeps until it stops.
  const EngineChild next = start_engine_child(/*stay=*/false);
  ASSERT_GT(next.pid, 0);
  EXPECT_EQ(answer_of(next), 'y');
  ASSERT_EQ(::waitpid(next.pid, &status, 0), next.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (const auto& f : left) EXPECT_FALSE(fs::exists(f)) << f << " was left behind";
  EXPECT_TRUE(regions_of(next.pid).empty()) << "a stopped engine removes its own region";
}

}  // namespace
}  // namespace fabric::ofi
