// reg_mr of GPU memory: without a driver it is a clean Errc::unsupported that
// leaves host registration working; with a GPU, tensors of one allocation
// share one provider registration, and ranges past their allocation are
// rejected. GPU cases skip with the reason where there is no GPU, or where
// the provider cannot register device memory (no FI_HMEM).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda/driver.hpp"
#include "fabric/fabric.hpp"
#ifdef FABRIC_HAVE_CUDA_KERNELS
#include "watcher_kernels.hpp"
#endif

namespace fabric {
namespace {

std::unique_ptr<TransferEngine> shm_engine() {
  EngineConfig config;
  config.provider = "shm";
  auto engine = TransferEngine::create(config);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

TEST(GpuRegistration, WithoutAGpuIsUnsupportedAndHostMemoryStillRegisters) {
  if (cuda::driver().ok()) GTEST_SKIP() << "a GPU is present: covered by the GPU cases";
  auto engine = shm_engine();
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> buf(1 << 16);
  auto gpu = engine->reg_mr(buf.data(), buf.size(), Device::cuda(0));
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), Errc::unsupported) << gpu.status().to_string();
  EXPECT_NE(gpu.status().message().find("cuda:0"), std::string::npos) << gpu.status().to_string();
  auto host = engine->reg_mr(buf.data(), buf.size());
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  EXPECT_TRUE(engine->dereg_mr(host->handle).ok());
  engine->stop();
}

#ifdef FABRIC_HAVE_CUDA_KERNELS

#define FABRIC_REQUIRE_GPU()                                               \
  do {                                                                     \
    auto gpu = cuda::driver();                                             \
    if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status().to_string(); \
  } while (0)

// A device allocation freed at scope end.
struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) : size(bytes) {
    error = kernels::device_alloc(bytes, &ptr);
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) (void)kernels::device_free(ptr);
  }
  std::byte* at(std::size_t offset) const { return static_cast<std::byte*>(ptr) + offset; }
  void* ptr = nullptr;
  std::size_t size = 0;
  int error = 0;
};

TEST(GpuRegistration, TensorsOfOneAllocationShareOneRegistrationAndReceiveWrites) {
  FABRIC_REQUIRE_GPU();
  constexpr std::size_t kAlloc = 8 << 20;
  constexpr std::size_t kTensor = 1 << 20;
  DeviceBuffer dev(kAlloc);
  ASSERT_EQ(dev.error, 0) << kernels::error_string(dev.error);
  auto engine = shm_engine();
  ASSERT_NE(engine, nullptr);

  auto first = engine->reg_mr(dev.at(4096), kTensor, Device::cuda(0));
  if (!first.ok() && first.status().code() == Errc::unsupported) {
    GTEST_SKIP() << "the provider cannot register GPU memory here: "
                 << first.status().to_string();
  }
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto second = engine->reg_mr(dev.at(2 << 20), kTensor, Device::cuda(0));
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  const RemoteKey a = first->desc.keys()[0];
  const RemoteKey b = second->desc.keys()[0];
  EXPECT_EQ(a.rkey, b.rkey) << "two registrations of one allocation";
  EXPECT_EQ(b.addr_base - a.addr_base, (2u << 20) - 4096u);

  // A host → GPU write through the engine, to itself.
  std::vector<std::byte> src(kTensor);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::byte(i * 7 + 3);
  auto src_reg = engine->reg_mr(src.data(), src.size());
  ASSERT_TRUE(src_reg.ok()) << src_reg.status().to_string();
  SingleWrite w;
  w.length = kTensor;
  w.src = {src_reg->handle, 0};
  w.dst = {second->desc, 0};
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(engine->submit_single_write(w, flag).ok());
  ASSERT_TRUE(flag->wait(std::chrono::seconds(20)).ok());
  std::vector<std::byte> back(kTensor);
  ASSERT_EQ(kernels::copy_to_host(back.data(), dev.at(2 << 20), kTensor), 0);
  EXPECT_EQ(std::memcmp(back.data(), src.data(), kTensor), 0);
  engine->stop();
}

TEST(GpuRegistration, RangePastItsAllocationIsRejected) {
  FABRIC_REQUIRE_GPU();
  DeviceBuffer dev(4 << 20);
  ASSERT_EQ(dev.error, 0) << kernels::error_string(dev.error);
  auto engine = shm_engine();
  ASSERT_NE(engine, nullptr);
  auto reg = engine->reg_mr(dev.at(3 << 20), 2 << 20, Device::cuda(0));
  ASSERT_FALSE(reg.ok());
  EXPECT_EQ(reg.status().code(), Errc::invalid_argument) << reg.status().to_string();
  engine->stop();
}

#endif  // FABRIC_HAVE_CUDA_KERNELS

}  // namespace
}  // namespace fabric
