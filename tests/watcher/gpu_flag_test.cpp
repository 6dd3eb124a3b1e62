// GpuFlag and expect_imm_count(…, GpuFlag, value): bad words are rejected,
// hosts without CUDA/GDRCopy get Errc::unsupported, and with a GPU a kernel
// waiting on the flag wakes once the expected immediates have arrived.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/gdr_types.hpp"
#include "fabric/fabric.hpp"
#ifdef FABRIC_HAVE_CUDA_KERNELS
#include "watcher_kernels.hpp"
#endif

namespace fabric {
namespace {

TEST(GpuFlag, HostOrMisalignedWordsAreRejected) {
  alignas(8) std::uint64_t word = 0;
  EXPECT_EQ(GpuFlag::map(&word, Device::host()).status().code(), Errc::invalid_argument);
  auto* misaligned = reinterpret_cast<std::byte*>(&word) + 1;
  EXPECT_EQ(GpuFlag::map(misaligned, Device::cuda(0)).status().code(), Errc::invalid_argument);
  EXPECT_EQ(GpuFlag::map(nullptr, Device::cuda(0)).status().code(), Errc::invalid_argument);
}

TEST(GpuFlag, WithoutADriverIsUnsupported) {
  if (cuda::driver().ok()) GTEST_SKIP() << "a GPU is present: covered by the GPU case";
  alignas(8) std::uint64_t word = 0;
  auto flag = GpuFlag::map(&word, Device::cuda(0));
  ASSERT_FALSE(flag.ok());
  EXPECT_EQ(flag.status().code(), Errc::unsupported) << flag.status().to_string();
}

TEST(GpuFlag, ExpectationWithoutAFlagIsRejected) {
  EngineConfig config;
  config.provider = "shm";
  auto engine = TransferEngine::create(config);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  EXPECT_EQ((*engine)->expect_imm_count(7, 1, std::shared_ptr<GpuFlag>{}, 1).code(),
            Errc::invalid_argument);
  (*engine)->stop();
}

#ifdef FABRIC_HAVE_CUDA_KERNELS
TEST(GpuFlag, KernelWakesWhenTheExpectedImmediatesArrive) {
  auto gpu = cuda::driver();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status().to_string();
  void* raw = nullptr;
  ASSERT_EQ(kernels::device_alloc(2 * cuda::kGpuPageSize, &raw), 0);
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const auto page = (base + cuda::kGpuPageSize - 1) & ~(cuda::kGpuPageSize - 1);
  auto* word = reinterpret_cast<std::uint64_t*>(page);
  auto* result = reinterpret_cast<std::uint32_t*>(word + 1);
  ASSERT_EQ(kernels::memset_device(word, 0, 2 * sizeof(std::uint64_t)), 0);
  ASSERT_EQ(kernels::synchronize(nullptr), 0);
  {
    auto flag = GpuFlag::map(word, Device::cuda(0));
    if (!flag.ok()) {
      (void)kernels::device_free(raw);
      GTEST_SKIP() << "no GDRCopy: " << flag.status().to_string();
    }
    EngineConfig config;
    config.provider = "shm";
    auto engine = TransferEngine::create(config);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    std::vector<std::byte> landing(4096);
    auto reg = (*engine)->reg_mr(landing.data(), landing.size());
    ASSERT_TRUE(reg.ok()) << reg.status().to_string();
    constexpr std::uint32_t kImm = 0x91a6;
    ASSERT_TRUE((*engine)->expect_imm_count(kImm, 3, *flag, 5).ok());
    // About 2 s of polling before the kernel gives up.
    ASSERT_EQ(kernels::launch_flag_wait(word, 5, 1ull << 24, result, nullptr), 0);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE((*engine)->submit_imm(kImm, reg->desc, OnDone{}).ok());
    }
    ASSERT_EQ(kernels::synchronize(nullptr), 0);
    std::uint32_t reached = 0;
    ASSERT_EQ(kernels::copy_to_host(&reached, result, sizeof reached), 0);
    EXPECT_EQ(reached, 1u) << "the kernel never saw the flag";
    (*engine)->stop();
  }
  ASSERT_EQ(kernels::device_free(raw), 0);
}
#endif

}  // namespace
}  // namespace fabric
