#include "engine_setup.hpp"

#include <cstdlib>

#include "demo_error.hpp"

namespace demo {

void force_loopback() {
  ::setenv("FI_TCP_IFACE", "lo", 1);
  ::setenv("FI_SOCKETS_IFACE", "lo", 1);
}

std::unique_ptr<fabric::TransferEngine> make_engine(const Options& options) {
  fabric::EngineConfig config;
  config.provider = options.provider;
  config.bind_address = "127.0.0.1";
  return take(fabric::TransferEngine::create(config),
              "creating a '" + options.provider + "' engine");
}

}  // namespace demo
