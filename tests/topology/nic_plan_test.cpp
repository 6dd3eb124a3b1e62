// plan_group_nics on the synthetic machines of data/: the device each Domain
// of a group opens when EngineConfig::nics is empty, with no provider present.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "fabric/nic_plan.hpp"

namespace fabric {
namespace {

Topology load(const char* name, int max_nics = 4) {
  TopologyOptions options;
  options.xml_path = std::string(FABRIC_TOPOLOGY_DATA) + "/" + name;
  options.max_nics_per_gpu = max_nics;
  auto topology = detect_topology(options);
  EXPECT_TRUE(topology.ok()) << topology.status().to_string();
  return topology.ok() ? std::move(topology).value() : Topology{};
}

EngineConfig efa(std::uint32_t domains) {
  EngineConfig c;
  c.provider = "efa";
  c.domains_per_group = domains;
  return c;
}

EngineConfig verbs(std::uint32_t domains) {
  EngineConfig c;
  c.backend = Backend::verbs;
  c.domains_per_group = domains;
  return c;
}

GroupNics plan(const Topology& t, std::size_t group, const EngineConfig& config,
               const std::optional<ProviderDevices>& offered = std::nullopt) {
  auto choice = plan_group_nics(t, t.groups.at(group), config, offered);
  EXPECT_TRUE(choice.ok()) << choice.status().to_string();
  return choice.ok() ? std::move(choice).value() : GroupNics{};
}

std::vector<std::string> devices(const GroupNics& g) {
  std::vector<std::string> out;
  for (const auto& d : g.domains) out.push_back(d.device);
  return out;
}

TEST(NicPlan, P5Gpu0GetsTheFourEfasOfItsOwnSwitch) {
  const Topology t = load("p5_48xlarge.xml");
  ASSERT_EQ(t.groups.size(), 8u);
  const GroupNics g = plan(t, 0, efa(4));
  EXPECT_EQ(g.source, NicSource::plan);
  EXPECT_EQ(g.gpu, 0);
  EXPECT_EQ(g.numa, 0);
  EXPECT_EQ(g.cpus.to_string(), "0-47,96-143");
  // GPU 0 is 0000:03:00.0; its PCIe switch holds the EFAs on buses 04-07.
  EXPECT_EQ(devices(g), (std::vector<std::string>{"rdmap4s0-rdm", "rdmap5s0-rdm", "rdmap6s0-rdm",
                                                  "rdmap7s0-rdm"}));
  for (const auto& d : g.domains) {
    ASSERT_GE(d.topology_nic, 0);
    EXPECT_EQ(t.nics.at(d.topology_nic).name + "-rdm", d.device);
    EXPECT_EQ(t.nics.at(d.topology_nic).numa, 0);
  }
  EXPECT_TRUE(g.note.empty()) << g.note;
}

TEST(NicPlan, P5EveryGroupGetsFourDistinctEfasAndNoneIsShared) {
  const Topology t = load("p5_48xlarge.xml");
  std::set<std::string> all;
  for (std::size_t i = 0; i < t.groups.size(); ++i) {
    const GroupNics g = plan(t, i, efa(4));
    EXPECT_EQ(g.gpu, static_cast<int>(i));
    const auto names = devices(g);
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), 4u) << "group " << i;
    all.insert(names.begin(), names.end());
  }
  EXPECT_EQ(all.size(), 32u);
  const GroupNics g4 = plan(t, 4, efa(4));
  EXPECT_EQ(g4.numa, 1);
  EXPECT_EQ(g4.cpus.to_string(), "48-95,144-191");
  EXPECT_EQ(g4.domains.front().device, "rdmap84s0-rdm");
}

TEST(NicPlan, Cx7OneMlx5DevicePerGpuOnTheVerbsBackend) {
  const Topology t = load("h100_cx7.xml");
  ASSERT_EQ(t.groups.size(), 8u);
  for (std::size_t i = 0; i < t.groups.size(); ++i) {
    const GroupNics g = plan(t, i, verbs(1));
    EXPECT_EQ(g.source, NicSource::plan);
    EXPECT_EQ(devices(g), std::vector<std::string>{"mlx5_" + std::to_string(i)});
    EXPECT_EQ(g.numa, i < 4 ? 0 : 1);
  }
}

TEST(NicPlan, ExplicitNicsWinOverThePlan) {
  const Topology t = load("p5_48xlarge.xml");
  EngineConfig c = efa(2);
  c.nics = {"rdmap135s0-rdm", "rdmap134s0-rdm"};
  const GroupNics g = plan(t, 0, c);
  EXPECT_EQ(g.source, NicSource::configured);
  EXPECT_EQ(devices(g), c.nics);
  EXPECT_EQ(g.domains[0].requested, "rdmap135s0-rdm");
  EXPECT_EQ(g.domains[0].topology_nic, -1);

  EngineConfig v = verbs(2);
  v.verbs.device = "mlx5_9";
  const GroupNics cx = plan(load("h100_cx7.xml"), 0, v);
  EXPECT_EQ(cx.source, NicSource::configured);
  EXPECT_EQ(devices(cx), (std::vector<std::string>{"mlx5_9", "mlx5_9"}));
}

TEST(NicPlan, FewerNicsThanDomainsAreSharedRoundRobinAndSaidSo) {
  const Topology cx7 = load("h100_cx7.xml");
  const GroupNics g = plan(cx7, 3, verbs(3));
  EXPECT_EQ(g.source, NicSource::plan);
  EXPECT_EQ(devices(g), (std::vector<std::string>{"mlx5_3", "mlx5_3", "mlx5_3"}));
  EXPECT_NE(g.note.find("3 Domains on 1 NIC"), std::string::npos) << g.note;
  EXPECT_NE(g.note.find("shared"), std::string::npos) << g.note;

  const Topology p5 = load("p5_48xlarge.xml", /*max_nics=*/2);
  const GroupNics two = plan(p5, 0, efa(4));
  EXPECT_EQ(devices(two), (std::vector<std::string>{"rdmap4s0-rdm", "rdmap5s0-rdm",
                                                    "rdmap4s0-rdm", "rdmap5s0-rdm"}));
}

TEST(NicPlan, FewerDomainsThanNicsTakeTheNearestFirstAndSaySoToo) {
  const GroupNics g = plan(load("p5_48xlarge.xml"), 0, efa(1));
  EXPECT_EQ(devices(g), std::vector<std::string>{"rdmap4s0-rdm"});
  EXPECT_NE(g.note.find("first 1 of the 4 NICs"), std::string::npos) << g.note;
}

TEST(NicPlan, IpProvidersAndShmKeepTheirDefault) {
  const Topology t = load("p5_48xlarge.xml");
  EngineConfig tcp;
  tcp.provider = "tcp";
  tcp.domains_per_group = 2;
  tcp.bind_address = "198.18.0.1";
  const GroupNics g = plan(t, 0, tcp);
  EXPECT_EQ(g.source, NicSource::provider_default);
  for (const auto& d : g.domains) {
    EXPECT_EQ(d.address, "198.18.0.1");
    EXPECT_TRUE(d.device.empty());
  }
  EngineConfig shm;
  const GroupNics s = plan(t, 0, shm);
  EXPECT_EQ(s.source, NicSource::provider_default);
  EXPECT_TRUE(s.domains.at(0).device.empty());
  EXPECT_TRUE(s.domains.at(0).address.empty());
}

TEST(NicPlan, OnlyDevicesTheProviderOffersAreChosen) {
  const Topology t = load("p5_48xlarge.xml");
  const ProviderDevices offered{"efa", {"rdmap5s0-rdm", "rdmap7s0-rdm", "rdmap20s0-rdm"}};
  const GroupNics g = plan(t, 0, efa(2), offered);
  EXPECT_EQ(devices(g), (std::vector<std::string>{"rdmap5s0-rdm", "rdmap7s0-rdm"}));

  const GroupNics none = plan(t, 0, efa(2), ProviderDevices{"efa", {"rdmap20s0-rdm"}});
  EXPECT_EQ(none.source, NicSource::provider_default);
  EXPECT_TRUE(none.domains.at(0).device.empty());
  EXPECT_NE(none.note.find("rdmap4s0"), std::string::npos) << none.note;
  EXPECT_NE(none.note.find("it offers: rdmap20s0-rdm"), std::string::npos) << none.note;
}

TEST(NicPlan, AnyProviderWhoseDomainsAreNamedAfterThePlanNicsGetsThem) {
  const Topology t = load("h100_cx7.xml");
  EngineConfig c;
  c.provider = "psm3";
  const GroupNics g =
      plan(t, 2, c, ProviderDevices{"psm3", {"mlx5_0-x", "mlx5_2-x", "mlx5_3-x"}});
  EXPECT_EQ(g.source, NicSource::plan);
  EXPECT_EQ(devices(g), std::vector<std::string>{"mlx5_2-x"});
  // Without the provider's list its naming is unknown: default, and the note says why.
  const GroupNics unknown = plan(t, 2, c);
  EXPECT_EQ(unknown.source, NicSource::provider_default);
  EXPECT_FALSE(unknown.note.empty());
}

TEST(NicPlan, AHostWithoutNicsKeepsTheProviderDefault) {
  const Topology vm = load("small_vm.xml");
  ASSERT_EQ(vm.groups.size(), 1u);
  const GroupNics g = plan(vm, 0, efa(2));
  EXPECT_EQ(g.source, NicSource::provider_default);
  EXPECT_EQ(g.gpu, -1);
  EXPECT_NE(g.note.find("no NIC for this group"), std::string::npos) << g.note;
}

TEST(NicPlan, BadCountsAreInvalidArgument) {
  const Topology t = load("p5_48xlarge.xml");
  EXPECT_EQ(plan_group_nics(t, t.groups[0], efa(0)).status().code(), Errc::invalid_argument);
  EXPECT_EQ(plan_group_nics(t, t.groups[0], efa(5)).status().code(), Errc::invalid_argument);
  EngineConfig c = efa(2);
  c.nics = {"rdmap4s0-rdm"};
  auto wrong = plan_group_nics(t, t.groups[0], c);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("names 1 NICs but domains_per_group is 2"),
            std::string::npos);
}

TEST(NicPlan, EfaNamesForNicsWithoutADriverFollowThePciNamingRule) {
  NicInfo nic;
  nic.kind = NicKind::efa;
  nic.name = "pci:0000:4f:00.0";
  nic.pci_busid = "0000:4f:00.0";
  EXPECT_EQ(provider_device_name(nic, Backend::libfabric, "efa"), "rdmap79s0-rdm");
  nic.name = nic.pci_busid = "0001:10:1b.2";
  nic.name = "pci:" + nic.name;
  EXPECT_EQ(provider_device_name(nic, Backend::libfabric, "efa"), "rdmaP1p16s27f2-rdm");
  EXPECT_EQ(provider_device_name(nic, Backend::verbs, "verbs"), "") << "mlx5 numbers are not derivable";
  nic.name = "rdmap16s27";
  EXPECT_EQ(provider_device_name(nic, Backend::libfabric, "efa"), "rdmap16s27-rdm");
  EXPECT_EQ(provider_device_name(nic, Backend::libfabric, "tcp"), "");
  EXPECT_EQ(provider_device_name(nic, Backend::libfabric, "shm"), "");
  nic.kind = NicKind::connectx;
  nic.name = "mlx5_0";
  EXPECT_EQ(provider_device_name(nic, Backend::libfabric, "efa"), "") << "not an EFA";
  EXPECT_EQ(provider_device_name(nic, Backend::verbs, "verbs"), "mlx5_0");
}

}  // namespace
}  // namespace fabric
