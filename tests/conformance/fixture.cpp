#include "fixture.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace fabric::conformance {

void apply_test_groups(EngineConfig& config) {
  const char* text = std::getenv("FABRIC_TEST_GROUPS");
  if (text == nullptr || *text == '\0') return;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (*end != '\0' || n < 2 || n > static_cast<long>(NetAddr::kMaxGroups)) {
    // A typo must not quietly run the one-group suite instead.
    std::fprintf(stderr, "FABRIC_TEST_GROUPS=%s: expected a group count in 2..%zu\n", text,
                 NetAddr::kMaxGroups);
    std::abort();
  }
  config.groups.assign(static_cast<std::size_t>(n), GroupConfig{});
  config.host_group = static_cast<std::uint32_t>(n - 1);
}

std::unique_ptr<TransferEngine> child_engine(const EngineConfig& config) {
  auto engine = TransferEngine::create(config);
  if (!engine) {
    std::fprintf(stderr, "[child %d] TransferEngine::create(provider=%s): %s\n",
                 static_cast<int>(::getpid()), config.provider.c_str(),
                 engine.status().to_string().c_str());
    return nullptr;
  }
  return std::move(engine).value();
}

}  // namespace fabric::conformance
