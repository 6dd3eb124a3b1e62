#include "engine_setup.hpp"

#include "common/rendezvous.hpp"

#include "demo_error.hpp"

namespace demo {

void choose_interface(const Options& options) {
  tools::choose_interface(options.bind, options.iface);
}

std::unique_ptr<fabric::TransferEngine> make_engine(const Options& options) {
  fabric::EngineConfig config;
  config.provider = options.provider;
  config.bind_address = options.bind;
  return take(fabric::TransferEngine::create(config),
              "creating a '" + options.provider + "' engine");
}

}  // namespace demo
