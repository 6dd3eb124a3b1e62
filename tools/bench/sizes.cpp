#include "sizes.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace bench {

namespace {

std::uint64_t parse_size(const std::string& text) {
  char* end = nullptr;
  const std::uint64_t n = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) throw std::runtime_error(fmt::format("--sizes: '{}' is not a size", text));
  const std::string unit(end);
  const int shift = unit.empty() || unit == "B" ? 0
                    : unit == "K" || unit == "KiB" ? 10
                    : unit == "M" || unit == "MiB" ? 20
                    : unit == "G" || unit == "GiB" ? 30
                                                   : -1;
  if (shift < 0) throw std::runtime_error(fmt::format("--sizes: unknown unit in '{}'", text));
  return n << shift;
}

void check(std::uint64_t size, std::uint64_t max_bytes) {
  if (size == 0 || size % 8 != 0 || size > max_bytes) {
    throw std::runtime_error(fmt::format(
        "--sizes: {} B: sizes are multiples of 8 B, at most {} B (the bench's buffer)", size,
        max_bytes));
  }
}

std::vector<std::uint64_t> powers_of_two(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t s = from; s <= to; s *= 2) v.push_back(s);
  return v;
}

}  // namespace

std::vector<std::uint64_t> parse_sizes(const std::string& spec, std::uint64_t max_bytes) {
  if (spec == "all") return powers_of_two(8, max_bytes);
  std::vector<std::uint64_t> sizes;
  if (const auto dash = spec.find('-'); dash != std::string::npos) {
    const std::uint64_t from = parse_size(spec.substr(0, dash));
    const std::uint64_t to = parse_size(spec.substr(dash + 1));
    check(from, max_bytes);
    check(to, max_bytes);
    sizes = powers_of_two(from, to);
    if (sizes.empty()) throw std::runtime_error(fmt::format("--sizes: empty range '{}'", spec));
    return sizes;
  }
  std::istringstream in(spec);
  for (std::string part; std::getline(in, part, ',');) {
    sizes.push_back(parse_size(part));
    check(sizes.back(), max_bytes);
  }
  if (sizes.empty()) throw std::runtime_error("--sizes: no sizes given");
  return sizes;
}

}  // namespace bench
