#pragma once
// How both roles build their engine: same provider, bound to --bind.

#include <memory>

#include <fabric/engine.hpp>

#include "options.hpp"

namespace demo {

// IP providers pick an interface from the environment when they start, so
// this must run before the first engine exists in the process: `lo` for a
// loopback bind address, --iface if given, else the user's environment.
void choose_interface(const Options& options);

std::unique_ptr<fabric::TransferEngine> make_engine(const Options& options);

}  // namespace demo
