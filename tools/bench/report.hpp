#pragma once

#include <string>

#include <vector>

#include "options.hpp"
#include "peer_runs.hpp"
#include "sweep.hpp"

namespace bench {

void print_table(const SweepResult& r, const std::vector<PeerRun>& peers);
void write_json(const Options& opt, const SweepResult& r, const std::vector<PeerRun>& peers,
                const std::string& path);
// Runs plot.py; a missing matplotlib is reported, not an error.
void plot(const std::string& json_path, const std::string& png_path);

}  // namespace bench
