#include "fixture.hpp"

#include <unistd.h>

#include <cstdio>

namespace fabric::conformance {

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
