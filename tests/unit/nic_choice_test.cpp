// EngineConfig::nics: each entry resolved to the interface, address or device
// its Domain opens, and bad entries refused with a message naming them.
// Loopback only; the multi-NIC behaviour is tests/netbed.

#include <gtest/gtest.h>

#include <algorithm>

#include "backends/nic_choice.hpp"
#include "fabric/backends.hpp"
#include "fabric/engine.hpp"

namespace fabric {
namespace {

EngineConfig config_for(std::string provider, std::vector<std::string> nics) {
  EngineConfig c;
  c.provider = std::move(provider);
  c.domains_per_group = static_cast<std::uint32_t>(nics.size());
  c.nics = std::move(nics);
  return c;
}

TEST(NicChoice, AnInterfaceResolvesToItsIpv4AddressAndAnAddressToItsInterface) {
  auto nics = resolve_domain_nics(config_for("tcp", {"lo", "127.0.0.1"}));
  ASSERT_TRUE(nics) << nics.status().to_string();
  ASSERT_EQ(nics->size(), 2u);
  EXPECT_EQ((*nics)[0].interface, "lo");
  EXPECT_EQ((*nics)[0].address, "127.0.0.1");
  EXPECT_EQ((*nics)[0].requested, "lo");
  EXPECT_EQ((*nics)[1].interface, "lo");
  EXPECT_EQ((*nics)[1].address, "127.0.0.1");
}

TEST(NicChoice, WithoutNicsEveryDomainGetsTheBindAddress) {
  EngineConfig c;
  c.provider = "sockets";
  c.domains_per_group = 3;
  auto nics = resolve_domain_nics(c);
  ASSERT_TRUE(nics) << nics.status().to_string();
  ASSERT_EQ(nics->size(), 3u);
  for (const auto& n : *nics) {
    EXPECT_EQ(n.address, "127.0.0.1");
    EXPECT_EQ(n.interface, "lo");
    EXPECT_TRUE(n.requested.empty());
  }
}

TEST(NicChoice, AnUnknownInterfaceIsRefusedByName) {
  auto nics = resolve_domain_nics(config_for("tcp", {"lo", "nic9"}));
  ASSERT_FALSE(nics);
  EXPECT_EQ(nics.status().code(), Errc::invalid_argument);
  EXPECT_NE(nics.status().message().find("nics[1] = \"nic9\""), std::string::npos)
      << nics.status().message();
  EXPECT_NE(nics.status().message().find("lo"), std::string::npos) << "lists what there is";
}

TEST(NicChoice, AnAddressOfNoInterfaceHereIsRefusedByName) {
  auto nics = resolve_domain_nics(config_for("sockets", {"198.18.200.1"}));
  ASSERT_FALSE(nics);
  EXPECT_EQ(nics.status().code(), Errc::invalid_argument);
  EXPECT_NE(nics.status().message().find("\"198.18.200.1\" is not an address of this host"),
            std::string::npos)
      << nics.status().message();
}

TEST(NicChoice, OneEntryPerDomainOrNone) {
  EngineConfig c = config_for("tcp", {"lo"});
  c.domains_per_group = 2;
  auto nics = resolve_domain_nics(c);
  ASSERT_FALSE(nics);
  EXPECT_NE(nics.status().message().find("names 1 NICs but domains_per_group is 2"),
            std::string::npos)
      << nics.status().message();
  EXPECT_FALSE(resolve_domain_nics(config_for("tcp", {""})));
}

TEST(NicChoice, NonIpProvidersAndVerbsTakeEntriesAsDeviceNames) {
  auto efa = resolve_domain_nics(config_for("efa", {"rdmap16s27-rdm", "rdmap32s27-rdm"}));
  ASSERT_TRUE(efa) << efa.status().to_string();
  EXPECT_EQ((*efa)[1].device, "rdmap32s27-rdm");
  EXPECT_TRUE((*efa)[1].address.empty());
  EngineConfig v = config_for("verbs", {"mlx5_0", "mlx5_1"});
  v.backend = Backend::verbs;
  auto verbs = resolve_domain_nics(v);
  ASSERT_TRUE(verbs) << verbs.status().to_string();
  EXPECT_EQ((*verbs)[0].device, "mlx5_0");
  EXPECT_EQ((*verbs)[1].device, "mlx5_1");
}

// With nics empty, a device comes from this host's topology plan and only if
// the provider lists it; elsewhere (no RDMA NIC, as on CI) the default stays.
TEST(NicChoice, WithoutNicsNamedDeviceProvidersGetOnlyDevicesTheyOffer) {
  EngineConfig v;
  v.backend = Backend::verbs;
  v.domains_per_group = 2;
  auto verbs = resolve_domain_nics(v);
  ASSERT_TRUE(verbs) << verbs.status().to_string();
  const auto offered = domain::provider_devices(v);
  ASSERT_TRUE(offered);
  for (const auto& n : *verbs) {
    if (n.device.empty()) continue;  // the backend's own "device i mod count"
    EXPECT_NE(std::find(offered->names.begin(), offered->names.end(), n.device),
              offered->names.end())
        << n.device;
    EXPECT_GE(n.topology_nic, 0);
  }
  EngineConfig e;
  e.provider = "efa";
  auto efa = resolve_domain_nics(e);
  ASSERT_TRUE(efa) << efa.status().to_string();
  const auto domains = domain::provider_devices(e);
  ASSERT_TRUE(domains);
  if (!efa->front().device.empty()) {
    EXPECT_NE(std::find(domains->names.begin(), domains->names.end(), efa->front().device),
              domains->names.end());
  }
  EngineConfig shm;
  shm.domains_per_group = 2;
  auto s = resolve_domain_nics(shm);
  ASSERT_TRUE(s) << s.status().to_string();
  for (const auto& n : *s) EXPECT_TRUE(n.device.empty() && n.topology_nic < 0);
}

TEST(NicChoice, ADomainNameTheProviderLacksFailsCreateWithTheNamesItHas) {
  auto engine = TransferEngine::create(config_for("shm", {"no-such-domain"}));
  ASSERT_FALSE(engine);
  EXPECT_NE(engine.status().message().find("no domain named \"no-such-domain\""),
            std::string::npos)
      << engine.status().message();
}

TEST(NicChoice, TheEngineReportsTheNicEachDomainGot) {
  auto engine = TransferEngine::create(config_for("tcp", {"lo", "127.0.0.1"}));
  ASSERT_TRUE(engine) << engine.status().to_string();
  const auto& nics = engine.value()->domain_nics();
  ASSERT_EQ(nics.size(), 2u);
  for (const auto& n : nics) {
    EXPECT_EQ(n.interface, "lo");
    EXPECT_EQ(n.address, "127.0.0.1");
    EXPECT_FALSE(n.device.empty()) << "the provider's domain name";
  }
  EXPECT_NE(nics[0].to_string().find("lo 127.0.0.1"), std::string::npos) << nics[0].to_string();
}

}  // namespace
}  // namespace fabric
