// Engines of several DomainGroups (docs/api.md#groups): memory registered on a group leaves and
// arrives through that group's Domains, every group of one engine reaches every group of a peer,
// one immediate table counts what arrives through any group, and bad group numbers are errors.
//
// Most checks write from one engine's group into another group of the same engine: a real
// provider path between distinct endpoints (and on shm, CMA), with nothing but the group
// choice varying. One test writes from a child process into the parent's last group.

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fabric_test/data.hpp"
#include "fabric_test/sync.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

struct Shape {
  std::string provider;
  std::uint32_t groups = 2;
  std::uint32_t domains = 1;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  return info.param.provider + "_" + std::to_string(info.param.groups) + "g" +
         std::to_string(info.param.domains) + "d";
}

class MultiGroupTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override { FABRIC_SKIP_IF_UNAVAILABLE(GetParam().provider); }
  [[nodiscard]] std::uint32_t groups() const { return GetParam().groups; }
  [[nodiscard]] EngineConfig config() const {
    EngineConfig c = engine_config(GetParam().provider);
    c.domains_per_group = GetParam().domains;
    c.groups.assign(GetParam().groups, GroupConfig{});
    c.host_group = 0;  // its own shapes, whatever FABRIC_TEST_GROUPS says
    return c;
  }
};

constexpr std::size_t kRegion = 256 * 1024;

// One source and one destination region per group.
struct PerGroup {
  std::vector<std::vector<std::byte>> src;
  std::vector<std::vector<std::byte>> dst;
  std::vector<Registered> src_reg;
  std::vector<Registered> dst_reg;
};

::testing::AssertionResult register_per_group(TransferEngine& engine, std::uint32_t groups,
                                              PerGroup& out) {
  for (std::uint32_t g = 0; g < groups; ++g) {
    out.src.push_back(test::random_bytes(kRegion, 0x6000 + g));
    out.dst.emplace_back(kRegion, std::byte{0});
  }
  for (std::uint32_t g = 0; g < groups; ++g) {
    auto s = engine.reg_mr(out.src[g].data(), kRegion, Device::host(), Access::remote_write, g);
    auto d = engine.reg_mr(out.dst[g].data(), kRegion, Device::host(), Access::remote_write, g);
    if (!s.ok() || !d.ok()) {
      return ::testing::AssertionFailure()
             << "reg_mr on group " << g << ": " << (s.ok() ? d.status() : s.status()).to_string();
    }
    out.src_reg.push_back(std::move(s).value());
    out.dst_reg.push_back(std::move(d).value());
  }
  return ::testing::AssertionSuccess();
}

TEST_P(MultiGroupTest, TheEngineNamesItsGroupsAndEachDescriptorItsGroup) {
  // The memory outlives the engine that registers it.
  PerGroup mem;
  std::vector<std::byte> plain(4096);
  ASSERT_ENGINE(engine, config());
  StopGuard stop(engine.get());
  ASSERT_EQ(engine->num_groups(), groups());
  ASSERT_EQ(engine->groups().size(), groups());
  EXPECT_EQ(engine->main_address().num_groups(), groups());
  EXPECT_EQ(engine->main_address().num_domains(), GetParam().domains);
  for (const GroupInfo& g : engine->groups()) {
    EXPECT_EQ(g.nics.size(), GetParam().domains);
    EXPECT_EQ(g.gpu, -1);
  }
  // Every Domain of every group is its own endpoint with its own address.
  const NetAddr& self = engine->main_address();
  for (std::size_t a = 0; a < groups() * GetParam().domains; ++a) {
    for (std::size_t b = a + 1; b < groups() * GetParam().domains; ++b) {
      const auto x = self.domain_address(a / GetParam().domains, a % GetParam().domains);
      const auto y = self.domain_address(b / GetParam().domains, b % GetParam().domains);
      EXPECT_FALSE(std::equal(x.begin(), x.end(), y.begin(), y.end()))
          << "Domains " << a << " and " << b << " share an address";
    }
  }
  ASSERT_TRUE(register_per_group(*engine, groups(), mem));
  for (std::uint32_t g = 0; g < groups(); ++g) {
    EXPECT_EQ(mem.dst_reg[g].desc.group(), g);
    EXPECT_EQ(mem.dst_reg[g].desc.owner(), self);
    auto parsed = MrDesc::parse(mem.dst_reg[g].desc.to_string());
    ASSERT_OK(parsed);
    EXPECT_EQ(parsed->group(), g);
  }
  // Host memory without a group goes to group 0 ...
  auto reg = engine->reg_mr(plain.data(), plain.size());
  ASSERT_OK(reg);
  EXPECT_EQ(reg->desc.group(), 0u);
  // ... or to EngineConfig::host_group; a named group still wins.
  EngineConfig last = config();
  last.host_group = groups() - 1;
  ASSERT_ENGINE(other, last);
  StopGuard stop_other(other.get());
  auto on_last = other->reg_mr(plain.data(), plain.size());
  ASSERT_OK(on_last);
  EXPECT_EQ(on_last->desc.group(), groups() - 1);
  auto named = other->reg_mr(plain.data(), plain.size(), Device::host(), Access::remote_write, 0);
  ASSERT_OK(named);
  EXPECT_EQ(named->desc.group(), 0u);
}

TEST_P(MultiGroupTest, AGroupThatDoesNotExistIsRefusedAndNothingStaysRegistered) {
  std::vector<std::byte> buf(8192);  // outlives the engine that registers it
  ASSERT_ENGINE(engine, config());
  StopGuard stop(engine.get());
  auto bad = engine->reg_mr(buf.data(), 4096, Device::host(), Access::remote_write, groups());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Errc::invalid_argument);
  EXPECT_NE(bad.status().message().find("group " + std::to_string(groups())), std::string::npos)
      << bad.status().to_string();

  // reg_mrs over several groups is all or nothing: a bad range after good ones on other groups
  // leaves none of them registered (their handles never reach the caller).
  std::vector<MemoryRange> ranges;
  for (std::uint32_t g = 0; g < groups(); ++g) {
    ranges.push_back({buf.data(), 4096, Device::host(), g});
  }
  ranges.push_back({buf.data() + 4096, 4096, Device::host(), groups() + 3});
  auto batch = engine->reg_mrs(ranges);
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.status().message().find("range " + std::to_string(groups())), std::string::npos)
      << batch.status().to_string();
  ranges.pop_back();
  auto good = engine->reg_mrs(ranges);
  ASSERT_OK(good);
  for (std::uint32_t g = 0; g < groups(); ++g) EXPECT_EQ((*good)[g].desc.group(), g);

  // nics are per group once groups are given.
  EngineConfig both = config();
  both.nics.assign(GetParam().domains, "127.0.0.1");
  auto refused = TransferEngine::create(both);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::invalid_argument);

  // A host group the engine would not have.
  EngineConfig past = config();
  past.host_group = groups();
  auto no_such = TransferEngine::create(past);
  ASSERT_FALSE(no_such.ok());
  EXPECT_EQ(no_such.status().code(), Errc::invalid_argument);
  EXPECT_NE(no_such.status().message().find("host_group " + std::to_string(groups())),
            std::string::npos)
      << no_such.status().to_string();
}

TEST_P(MultiGroupTest, EveryGroupWritesIntoEveryGroupAndOneCounterSeesThemAll) {
  PerGroup mem;  // outlives the engine that registers it
  ASSERT_ENGINE(engine, config());
  ASSERT_TRUE(register_per_group(*engine, groups(), mem));
  constexpr std::uint32_t kImm = 0x6a00;
  auto counter = engine->imm_counter(kImm);
  ASSERT_OK(counter);
  StopGuard stop(engine.get());
  // Group s writes slot s of every group d's destination: G*G writes, all with one immediate.
  const std::uint64_t slot = kRegion / groups();
  std::vector<std::shared_ptr<CompletionFlag>> flags;
  for (std::uint32_t s = 0; s < groups(); ++s) {
    for (std::uint32_t d = 0; d < groups(); ++d) {
      SingleWrite w;
      w.src = {mem.src_reg[s].handle, slot * d};
      w.dst = {mem.dst_reg[d].desc, slot * s};
      w.length = slot;
      w.imm = kImm;
      flags.push_back(std::make_shared<CompletionFlag>());
      ASSERT_OK(engine->submit_single_write(w, flags.back()));
    }
  }
  for (auto& f : flags) ASSERT_OK(f->wait(kWait));
  // A write sharded over the K Domains (the default routing) carries the immediate on each shard.
  const std::uint64_t expected = std::uint64_t{groups()} * groups() * GetParam().domains;
  ASSERT_OK((*counter)->wait(expected, kWait));
  for (std::uint32_t d = 0; d < groups(); ++d) {
    for (std::uint32_t s = 0; s < groups(); ++s) {
      EXPECT_EQ(std::memcmp(mem.dst[d].data() + slot * s, mem.src[s].data() + slot * d, slot), 0)
          << "group " << s << " into group " << d;
    }
  }
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ((*counter)->value(), expected) << "exactly one per shard";
}

TEST_P(MultiGroupTest, PagedScatterAndBarrierCrossGroups) {
  PerGroup mem;  // outlives the engine that registers it
  ASSERT_ENGINE(engine, config());
  ASSERT_TRUE(register_per_group(*engine, groups(), mem));
  constexpr std::uint32_t kPaged = 0x6b00;
  constexpr std::uint32_t kScatter = 0x6b01;
  constexpr std::uint32_t kBarrier = 0x6b02;
  auto paged_n = engine->imm_counter(kPaged);
  auto scatter_n = engine->imm_counter(kScatter);
  auto barrier_n = engine->imm_counter(kBarrier);
  ASSERT_OK(paged_n);
  ASSERT_OK(scatter_n);
  ASSERT_OK(barrier_n);
  StopGuard stop(engine.get());
  const std::uint32_t last = groups() - 1;

  // Paged: pages 0, 2, 4, ... of the last group's source into pages 7, 6, 5, ... of group 0.
  constexpr std::uint64_t kPage = 4096;
  PagedWrite pw;
  pw.src = mem.src_reg[last].handle;
  pw.dst = mem.dst_reg[0].desc;
  pw.page_length = kPage;
  pw.src_pages = {{0, 2, 4, 6}, kPage, 0};
  pw.dst_pages = {{7, 6, 5, 4}, kPage, 0};
  pw.imm = kPaged;
  auto paged_done = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine->submit_paged_writes(pw, paged_done));
  ASSERT_OK(paged_done->wait(kWait));
  ASSERT_OK((*paged_n)->wait(4, kWait));
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(std::memcmp(mem.dst[0].data() + (7 - i) * kPage,
                          mem.src[last].data() + 2 * i * kPage, kPage),
              0)
        << "page " << i;
  }

  // Scatter from group 0's source: one slice into the second half of every group's region,
  // through a peer group (self, once per group) and without one.
  const std::uint64_t half = kRegion / 2;
  const std::uint64_t slice = half / groups();
  std::vector<NetAddr> peers(groups(), engine->main_address());
  auto peer_group = engine->add_peer_group(peers);
  ASSERT_OK(peer_group);
  for (bool use_group : {false, true}) {
    SCOPED_TRACE(use_group ? "peer group" : "no peer group");
    Scatter sc;
    sc.src = mem.src_reg[0].handle;
    sc.imm = kScatter;
    if (use_group) sc.group = *peer_group;
    for (std::uint32_t g = 0; g < groups(); ++g) {
      ScatterSlice s;
      s.dst = mem.dst_reg[g].desc;
      s.length = slice - 1;
      s.src_offset = slice * g;
      s.dst_offset = half + slice * g + (use_group ? 1 : 0);
      sc.slices.push_back(std::move(s));
    }
    auto done = std::make_shared<CompletionFlag>();
    ASSERT_OK(engine->submit_scatter(sc, done));
    ASSERT_OK(done->wait(kWait));
    ASSERT_OK((*scatter_n)->wait(std::uint64_t{groups()} * (use_group ? 2 : 1), kWait));
    for (std::uint32_t g = 0; g < groups(); ++g) {
      EXPECT_EQ(std::memcmp(mem.dst[g].data() + half + slice * g + (use_group ? 1 : 0),
                            mem.src[0].data() + slice * g, slice - 1),
                0)
          << "slice into group " << g;
    }
  }

  // Barrier: one immediate into every group.
  Barrier b;
  for (std::uint32_t g = 0; g < groups(); ++g) b.dsts.push_back(mem.dst_reg[g].desc);
  b.imm = kBarrier;
  auto barrier_done = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine->submit_barrier(b, barrier_done));
  ASSERT_OK(barrier_done->wait(kWait));
  ASSERT_OK((*barrier_n)->wait(groups(), kWait));
}

TEST_P(MultiGroupTest, SendsAndImmediateOnlyWritesReachTheirGroups) {
  // Before the engine and its StopGuard: its callbacks use them until it has stopped.
  test::WaitableCount received;
  test::WaitableCount reached;
  PerGroup mem;
  std::vector<std::byte> got;
  std::mutex got_mutex;
  ASSERT_ENGINE(engine, config());
  StopGuard stop(engine.get());
  ASSERT_OK(engine->submit_recvs(engine->config().max_message_size, 4,
                                 [&](std::span<const std::byte> data) {
                                   std::lock_guard lock(got_mutex);
                                   got.assign(data.begin(), data.end());
                                   received.add();
                                 }));
  const auto message = test::random_bytes(777, 0x6c00);
  auto sent = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine->submit_send(engine->main_address(), message, sent));
  ASSERT_OK(sent->wait(kWait));
  ASSERT_TRUE(received.wait_for(1, kWait));
  {
    std::lock_guard lock(got_mutex);
    EXPECT_EQ(got, message);
  }

  ASSERT_TRUE(register_per_group(*engine, groups(), mem));
  constexpr std::uint32_t kImm = 0x6c01;
  auto counter = engine->imm_counter(kImm);
  ASSERT_OK(counter);
  for (std::uint32_t g = 0; g < groups(); ++g) {
    auto done = std::make_shared<CompletionFlag>();
    ASSERT_OK(engine->submit_imm(kImm, mem.dst_reg[g].desc, done));
    ASSERT_OK(done->wait(kWait));
  }
  ASSERT_OK((*counter)->wait(groups(), kWait));
  // expect_imm_count sees arrivals from every group too.
  constexpr std::uint32_t kExpected = 0x6c02;
  ASSERT_OK(engine->expect_imm_count(kExpected, groups(), [&](std::uint32_t, std::uint64_t n) {
    reached.add(n);
  }));
  for (std::uint32_t g = 0; g < groups(); ++g) {
    ASSERT_OK(engine->submit_imm(kExpected, mem.dst_reg[g].desc, OnDone{}));
  }
  ASSERT_TRUE(reached.wait_for(groups(), kWait));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(reached.value(), groups()) << "fired once, with the count expected";
}

TEST_P(MultiGroupTest, AChildWritesIntoTheParentsLastGroup) {
  constexpr std::uint64_t kLen = 64 * 1024 + 5;
  constexpr std::uint64_t kSeed = 0x6d00;
  RemoteWriter writer(config(), kLen, kSeed);
  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> dst(kLen, std::byte{0});
  auto reg = engine->reg_mr(dst.data(), dst.size(), Device::host(), Access::remote_write,
                            groups() - 1);
  ASSERT_OK(reg);
  constexpr std::uint32_t kImm = 0x6d01;
  auto counter = engine->imm_counter(kImm);
  ASSERT_OK(counter);
  StopGuard stop(engine.get());
  ASSERT_TRUE(writer.connect(reg->desc));
  SingleWriteSpec spec;
  spec.length = kLen;
  spec.imm = kImm;
  const Outcome outcome = writer.single_write(spec);
  ASSERT_TRUE(outcome.ok()) << outcome.to_string();
  ASSERT_OK((*counter)->wait(1, kWait));
  EXPECT_EQ(dst, test::random_bytes(kLen, kSeed));
  EXPECT_TRUE(writer.finish().has_value());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MultiGroupTest,
    ::testing::Values(Shape{"shm", 2, 1}, Shape{"shm", 2, 2}, Shape{"shm", 4, 1},
                      Shape{"shm", 3, 4}, Shape{"tcp", 2, 1}, Shape{"tcp", 2, 2},
                      Shape{"tcp", 4, 4}, Shape{"sockets", 2, 2}, Shape{"udp", 2, 1},
                      Shape{"verbs", 2, 1}, Shape{"verbs", 2, 2}),
    shape_name);

}  // namespace
}  // namespace fabric::conformance
