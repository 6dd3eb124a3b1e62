#pragma once
// fabric-info's whole run, callable from the command (main.cpp) and from the Python package's
// `fabric-info` (python/src/info.cpp), so both print the same report for the same options.

#include <ostream>
#include <string>
#include <vector>

namespace info {

// Parses `args` as a command line (args[0] the program's name), writes the report (or --help)
// to `out` and complaints to `err`; returns the exit status.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace info
