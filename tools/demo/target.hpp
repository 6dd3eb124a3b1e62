#pragma once
// The receiving role: owns the destination region, counts immediates and
// checks every byte the writer claims to have written.

#include "options.hpp"

namespace demo {

// Returns the process exit code; throws DemoError on any failure.
int run_target(const Options& options);
// --listen: waits for one writer on options.listen, then is its target.
int serve(Options options);

}  // namespace demo
