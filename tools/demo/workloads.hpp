#pragma once
// What the demo measures and how much of it: the workload list, how many
// immediates each request yields, and how many requests a timed run makes.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <fabric/requests.hpp>

namespace demo {

enum class Op { single_write, paged_write };
std::string_view op_name(Op op);

struct Workload {
  Op op = Op::single_write;
  std::uint64_t size = 0;   // bytes per write, or per page
  std::uint32_t count = 1;  // pages per batch; 1 for single writes

  [[nodiscard]] std::uint64_t bytes_per_request() const { return size * count; }
  [[nodiscard]] std::uint64_t ops_per_request() const { return count; }
};

std::vector<Workload> all_workloads();

std::uint64_t imms_per_request(const Workload& w, std::size_t num_domains);

// Requests kept in flight: deep for small requests, shallow for big ones so
// the window never pins an unreasonable volume.
std::uint32_t window_for(const Workload& w);

struct Budget {
  double seconds_per_workload;
  std::uint64_t max_bytes;     // per timed run
  std::uint64_t max_ops;       // writes or pages per timed run
  std::uint64_t min_requests;  // so even slow runs measure more than one request
};
Budget budget_for(bool quick);

// Requests for the short untimed run that primes the path and estimates the rate.
std::uint64_t warmup_requests(const Workload& w, const Budget& budget);
// Requests for the timed run, from the warm-up's rate (requests per second).
std::uint64_t timed_requests(const Workload& w, const Budget& budget, double warmup_rate);

}  // namespace demo
