// With a GPU: a kernel (plain and inside a CUDA graph) writes a device-mapped
// watcher word and the host callback sees the final value; a kernel waits on
// a GDRCopy-mapped flag the host sets. Without one, every test skips and says why.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/driver.hpp"
#include "cuda/gdr_mapping.hpp"
#include "watch_record.hpp"
#include "watcher/watcher_thread.hpp"
#ifdef FABRIC_HAVE_CUDA_KERNELS
#include "watcher_kernels.hpp"
#endif

namespace fabric::watcher {
namespace {

using testing::WatchRecord;

#define FABRIC_REQUIRE_GPU()                                                  \
  do {                                                                        \
    auto gpu = cuda::driver();                                                \
    if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status().to_string();    \
    if (!kHaveKernels) GTEST_SKIP() << "built without CUDA kernels (no nvcc)"; \
  } while (0)

#ifdef FABRIC_HAVE_CUDA_KERNELS
constexpr bool kHaveKernels = true;
#define FABRIC_CUDA_OK(expr)                                              \
  do {                                                                    \
    const int fabric_err = (expr);                                        \
    ASSERT_EQ(fabric_err, 0) << #expr << ": " << kernels::error_string(fabric_err); \
  } while (0)
#else
constexpr bool kHaveKernels = false;
#endif

TEST(GpuWatcher, KernelWritesReachTheHostCallback) {
  FABRIC_REQUIRE_GPU();
#ifdef FABRIC_HAVE_CUDA_KERNELS
  constexpr std::uint64_t kCount = 100'000;
  WatcherThread thread;
  WatchRecord record;
  auto w = thread.alloc(record.callback(), WatcherMemory::cuda_mapped);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_NE(w->device_word(), nullptr);
  FABRIC_CUDA_OK(kernels::launch_watcher_bump(w->device_word(), 1, kCount, nullptr));
  FABRIC_CUDA_OK(kernels::synchronize(nullptr));
  ASSERT_TRUE(record.wait_for_value(kCount)) << "stuck at " << record.last.load();
  EXPECT_EQ(record.chain_errors.load(), 0u);
  EXPECT_EQ(record.order_errors.load(), 0u);
  RecordProperty("callbacks", std::to_string(record.calls.load()));
#endif
}

TEST(GpuWatcher, GraphReplaysReachTheHostCallback) {
  FABRIC_REQUIRE_GPU();
#ifdef FABRIC_HAVE_CUDA_KERNELS
  constexpr int kReplays = 50;
  constexpr std::uint64_t kDelta = 3;
  WatcherThread thread;
  WatchRecord record;
  auto w = thread.alloc(record.callback(), WatcherMemory::cuda_mapped);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  FABRIC_CUDA_OK(kernels::run_watcher_add_graph(w->device_word(), kDelta, kReplays));
  ASSERT_TRUE(record.wait_for_value(kDelta * kReplays)) << "stuck at " << record.last.load();
  EXPECT_EQ(record.chain_errors.load(), 0u);
  EXPECT_EQ(record.order_errors.load(), 0u);
#endif
}

TEST(GpuWatcher, KernelWaitsForAGdrMappedFlag) {
  FABRIC_REQUIRE_GPU();
#ifdef FABRIC_HAVE_CUDA_KERNELS
  auto session = cuda::GdrSession::open();
  if (!session.ok()) GTEST_SKIP() << "no GDRCopy: " << session.status().to_string();
  // A whole GPU page for the flag, so pinning covers nothing else.
  void* raw = nullptr;
  FABRIC_CUDA_OK(kernels::device_alloc(2 * cuda::kGpuPageSize, &raw));
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const auto page = (base + cuda::kGpuPageSize - 1) & ~(cuda::kGpuPageSize - 1);
  auto* flag = reinterpret_cast<std::uint64_t*>(page);
  auto* result = flag + 1;
  FABRIC_CUDA_OK(kernels::memset_device(flag, 0, 2 * sizeof(std::uint64_t)));
  // The memset may still be queued; it must not land after the host's write.
  FABRIC_CUDA_OK(kernels::synchronize(nullptr));
  {
    auto mapping = cuda::GdrMapping::map(*session, page, sizeof(std::uint64_t));
    ASSERT_TRUE(mapping.ok()) << mapping.status().to_string();
    // About 2 s of polling before the kernel gives up.
    FABRIC_CUDA_OK(kernels::launch_flag_wait(flag, 7, 1ull << 24,
                                             reinterpret_cast<std::uint32_t*>(result), nullptr));
    const std::uint64_t seven = 7;
    ASSERT_TRUE(mapping->copy_to(0, &seven, sizeof seven).ok());
    FABRIC_CUDA_OK(kernels::synchronize(nullptr));
    std::uint32_t reached = 0;
    FABRIC_CUDA_OK(kernels::copy_to_host(&reached, result, sizeof reached));
    EXPECT_EQ(reached, 1u);
  }
  FABRIC_CUDA_OK(kernels::device_free(raw));
#endif
}

}  // namespace
}  // namespace fabric::watcher
