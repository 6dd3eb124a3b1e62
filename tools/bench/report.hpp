#pragma once

#include <string>

#include "options.hpp"
#include "sweep.hpp"

namespace bench {

void print_table(const SweepResult& r);
void write_json(const Options& opt, const SweepResult& r, const std::string& path);
// Runs plot.py; a missing matplotlib is reported, not an error.
void plot(const std::string& json_path, const std::string& png_path);

}  // namespace bench
