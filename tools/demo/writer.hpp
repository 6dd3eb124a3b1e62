#pragma once
// The initiating role: spawns the target, drives every workload, reports.

#include "options.hpp"

namespace demo {

// Returns the process exit code; throws DemoError on any failure.
int run_writer(const Options& options);

}  // namespace demo
