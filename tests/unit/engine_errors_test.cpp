// What TransferEngine::create says when it cannot start: the message must
// tell a user what to do next, not only that something failed.

#include <gtest/gtest.h>

#include <string>

#include "fabric/engine.hpp"

namespace fabric {
namespace {

std::string create_error(const EngineConfig& config) {
  auto engine = TransferEngine::create(config);
  return engine ? std::string() : engine.status().to_string();
}

TEST(EngineErrors, UnknownProviderListsTheUsableOnesAndPointsToFabricInfo) {
  EngineConfig config;
  config.provider = "no-such-provider";
  const std::string error = create_error(config);
  EXPECT_NE(error.find("not_found: no usable libfabric provider 'no-such-provider'"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("usable providers here: "), std::string::npos) << error;
  EXPECT_NE(error.find("shm"), std::string::npos) << error;  // always built into Debian's libfabric
  EXPECT_NE(error.find("fabric-info"), std::string::npos) << error;
}

TEST(EngineErrors, EfaWithoutTheDeviceSaysSo) {
  EngineConfig config;
  config.provider = "efa";
  const std::string error = create_error(config);
  if (error.empty()) GTEST_SKIP() << "this host has an EFA device";
  EXPECT_NE(error.find("no EFA device on this host"), std::string::npos) << error;
}

TEST(EngineErrors, AnUnassignableBindAddressIsNamed) {
  EngineConfig config;
  config.provider = "tcp";
  config.bind_address = "192.0.2.1";  // TEST-NET-1: never a local address
  const std::string error = create_error(config);
  ASSERT_FALSE(error.empty()) << "bound to 192.0.2.1";
  EXPECT_NE(error.find("cannot bind to '192.0.2.1'"), std::string::npos) << error;
}

}  // namespace
}  // namespace fabric
