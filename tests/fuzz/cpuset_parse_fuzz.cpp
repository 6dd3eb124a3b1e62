// CpuSet::parse is public API for cpulist text ("0-3,8", as in /sys and
// taskset -c): it never crashes, stays within bounded memory and time, and
// what it accepts prints back in a form that parses to the same set.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fabric/topology.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto set = fabric::CpuSet::parse(text);
  if (!set) {
    FUZZ_CHECK(set.status().code() == fabric::Errc::invalid_argument);
    return 0;
  }
  FUZZ_CHECK(std::is_sorted(set->cpus.begin(), set->cpus.end()));
  FUZZ_CHECK(std::adjacent_find(set->cpus.begin(), set->cpus.end()) == set->cpus.end());
  FUZZ_CHECK(set->cpus.empty() || set->cpus.front() >= 0);

  auto again = fabric::CpuSet::parse(set->to_string());
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *set);
  return 0;
}
