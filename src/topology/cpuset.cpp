#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <utility>
#include <vector>

#include "fabric/topology.hpp"

namespace fabric {

namespace {

// Linux has no CPU numbers this large; anything above is a typo, not a CPU.
constexpr int kMaxCpu = 1 << 20;

Result<int> parse_cpu(std::string_view text, std::string_view list) {
  int value = -1;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0 || value > kMaxCpu) {
    return Status(Errc::invalid_argument,
                  fmt::format("CPU list \"{}\": \"{}\" is not a CPU number", list, text));
  }
  return value;
}

}  // namespace

CpuSet CpuSet::from(std::vector<int> cpus) {
  std::erase_if(cpus, [](int cpu) { return cpu < 0; });
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return CpuSet{std::move(cpus)};
}

Result<CpuSet> CpuSet::parse(std::string_view list) {
  // Items are kept as ranges and expanded once, after merging: expanding each
  // item as it came let a 4 KiB list of repeated "0-1048576" ask for
  // gigabytes (found by tests/fuzz/cpuset_parse). Now the result is bounded
  // by kMaxCpu + 1 entries whatever the input repeats.
  std::vector<std::pair<int, int>> ranges;
  std::string_view rest = list;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item.empty()) {
      return Status(Errc::invalid_argument, fmt::format("CPU list \"{}\" has an empty item", list));
    }
    const auto dash = item.find('-');
    auto first = parse_cpu(item.substr(0, dash), list);
    if (!first) return first.status();
    int last = *first;
    if (dash != std::string_view::npos) {
      auto upper = parse_cpu(item.substr(dash + 1), list);
      if (!upper) return upper.status();
      last = *upper;
      if (last < *first) {
        return Status(Errc::invalid_argument,
                      fmt::format("CPU list \"{}\": range \"{}\" runs backwards", list, item));
      }
    }
    ranges.emplace_back(*first, last);
  }
  std::sort(ranges.begin(), ranges.end());
  CpuSet set;
  int next = 0;  // the lowest CPU not emitted yet
  for (const auto& [first, last] : ranges) {
    for (int cpu = std::max(first, next); cpu <= last; ++cpu) set.cpus.push_back(cpu);
    next = std::max(next, last + 1);
  }
  return set;
}

bool CpuSet::contains(int cpu) const noexcept {
  return std::binary_search(cpus.begin(), cpus.end(), cpu);
}

std::string CpuSet::to_string() const {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace fabric
