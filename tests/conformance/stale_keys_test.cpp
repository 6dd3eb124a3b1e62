// Keys across incarnations: an engine that registers its memory in the same order as another
// (a restarted peer does exactly what its predecessor did) gets other keys. With keys counted
// from 1, a survivor's WRITE or READ still addressed to a dead peer reached its successor when
// tcp reused the port, and completed ok against the successor's memory: the field soak saw "an
// ok read of 48618 bytes ... does not hold the bytes sent" under load.

#include <set>
#include <vector>

#include "fixture.hpp"

namespace fabric::conformance {
namespace {

using StaleKeysTest = ProviderTest;

TEST_P(StaleKeysTest, AnEngineRegisteringInTheSameOrderAsAnotherGetsOtherKeys) {
  const EngineConfig cfg = config();
  std::set<std::uint64_t> first_keys;
  for (int incarnation = 0; incarnation < 2; ++incarnation) {
    ASSERT_ENGINE(engine, cfg);
    const StopGuard stop_guard(engine.get());
    std::vector<std::vector<std::byte>> buffers(3, std::vector<std::byte>(4096));
    for (auto& b : buffers) {
      auto r = engine->reg_mr(b.data(), b.size(), Device::host(),
                              Access::remote_write | Access::remote_read);
      ASSERT_OK(r.status());
      for (const RemoteKey& k : r->desc.keys()) {
        if (incarnation == 0) {
          first_keys.insert(k.rkey);
        } else {
          EXPECT_EQ(first_keys.count(k.rkey), 0u)
              << "key " << k.rkey << " was the previous engine's too";
        }
      }
    }
  }
  EXPECT_EQ(first_keys.size(), 3u * cfg.domains_per_group) << "keys repeat within one engine";
}

FABRIC_INSTANTIATE_PROVIDERS(StaleKeysTest);

}  // namespace
}  // namespace fabric::conformance
