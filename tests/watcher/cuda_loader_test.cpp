// The run-time CUDA and GDRCopy loaders: absent libraries are a clean
// Errc::unsupported, and (with the toolkit's stub driver) every entry point
// we use is resolvable.
#include <gtest/gtest.h>

#include <filesystem>

#include "cuda/device_range.hpp"
#include "cuda/dl_library.hpp"
#include "cuda/driver.hpp"
#include "cuda/gdr.hpp"
#include "cuda/gdr_mapping.hpp"
#include "cuda/pinned_host.hpp"

namespace fabric::cuda {
namespace {

TEST(DlLibrary, MissingLibraryIsUnsupported) {
  auto lib = DlLibrary::open("libfabric-test-no-such-library.so.1");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), Errc::unsupported);
  EXPECT_NE(lib.status().message().find("libfabric-test-no-such-library.so.1 not found: "),
            std::string::npos)
      << lib.status().message();
}

TEST(DlLibrary, ResolvesAndMoves) {
  auto lib = DlLibrary::open("libc.so.6");
  ASSERT_TRUE(lib.ok()) << lib.status().to_string();
  DlLibrary a = std::move(lib).value();
  EXPECT_NE(a.symbol("getpid"), nullptr);
  EXPECT_EQ(a.symbol("fabric_no_such_symbol"), nullptr);
  DlLibrary b = std::move(a);
  EXPECT_FALSE(a.loaded());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.symbol("getpid"), nullptr);
  EXPECT_NE(b.symbol("getpid"), nullptr);
}

TEST(CudaDriver, MissingDriverIsUnsupported) {
  auto d = Driver::load("libcuda-fabric-test-missing.so.1");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Errc::unsupported);
  EXPECT_NE(d.status().message().find("not found"), std::string::npos);
}

TEST(CudaDriver, ProcessDriverIsReadyOrCleanlyUnsupported) {
  auto d = driver();
  if (d.ok()) {
    std::cout << "[          ] CUDA driver loaded and a device is present\n";
    return;
  }
  EXPECT_EQ(d.status().code(), Errc::unsupported) << d.status().to_string();
  EXPECT_FALSE(d.status().message().empty());
  std::cout << "[          ] " << d.status().to_string() << "\n";
  // The kept outcome is reported again, not retried.
  auto again = driver();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(), d.status().message());
}

TEST(CudaDriver, StubDriverResolvesEveryEntryPoint) {
#ifndef FABRIC_CUDA_STUB_PATH
  GTEST_SKIP() << "no CUDA toolkit stub libcuda.so was found at configure time";
#else
  if (!std::filesystem::exists(FABRIC_CUDA_STUB_PATH)) {
    GTEST_SKIP() << FABRIC_CUDA_STUB_PATH << " is gone";
  }
  auto d = Driver::load(FABRIC_CUDA_STUB_PATH);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  const DriverApi& api = (*d)->api();
  EXPECT_NE(api.cuMemGetHandleForAddressRange, nullptr);
  // The stub refuses to initialise, and says so through cuGetErrorString.
  const Status init = (*d)->init();
  ASSERT_FALSE(init.ok());
  EXPECT_EQ(init.code(), Errc::unsupported);
  std::cout << "[          ] stub driver: " << init.to_string() << "\n";
  EXPECT_FALSE(address_range(**d, 0x1000).ok());
#endif
}

TEST(CudaPinnedHost, WithoutCudaIsUnsupported) {
  auto mem = PinnedHostMemory::allocate(4096);
  if (driver().ok()) {
    ASSERT_TRUE(mem.ok()) << mem.status().to_string();
    EXPECT_NE(mem->host(), nullptr);
    EXPECT_NE(mem->device(), 0u);
    PinnedHostMemory moved = std::move(mem).value();
    EXPECT_EQ(moved.size(), 4096u);
    return;
  }
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.status().code(), Errc::unsupported);
}

TEST(Gdr, MissingLibraryIsUnsupported) {
  auto g = GdrLibrary::load("libgdrapi-fabric-test-missing.so");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Errc::unsupported);
}

TEST(Gdr, ProcessLibraryIsReadyOrCleanlyUnsupported) {
  auto g = gdr_library();
  auto session = GdrSession::open();
  if (!g.ok()) {
    EXPECT_EQ(g.status().code(), Errc::unsupported);
    std::cout << "[          ] " << g.status().to_string() << "\n";
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.status().code(), Errc::unsupported);
    return;
  }
  if (!session.ok()) {
    EXPECT_EQ(session.status().code(), Errc::unsupported);
  }
}

TEST(Gdr, EmptyMappingIsInert) {
  GdrMapping m;
  EXPECT_EQ(m.host(), nullptr);
  const std::uint64_t v = 1;
  EXPECT_EQ(m.copy_to(0, &v, sizeof v).code(), Errc::invalid_argument);
  GdrMapping moved = std::move(m);
  EXPECT_EQ(moved.size(), 0u);
}

}  // namespace
}  // namespace fabric::cuda
