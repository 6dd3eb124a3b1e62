#pragma once
// How both roles build their engine: same provider, loopback only.

#include <memory>

#include <fabric/engine.hpp>

#include "options.hpp"

namespace demo {

// IP providers pick an interface from the environment when they start, so
// this must run before the first engine exists in the process.
void force_loopback();

std::unique_ptr<fabric::TransferEngine> make_engine(const Options& options);

}  // namespace demo
