#pragma once
// The demo's output: a table for people, the same figures as JSON for tools.

#include <cstdint>
#include <string>
#include <vector>

#include "workloads.hpp"

namespace demo {

struct Measurement {
  Workload workload;
  std::uint64_t iterations = 0;  // requests in the timed run
  double seconds = 0;
  bool verified = false;

  [[nodiscard]] std::uint64_t bytes() const { return iterations * workload.bytes_per_request(); }
  // Decimal gigabits: 1e9 bits per second.
  [[nodiscard]] double gbps() const { return static_cast<double>(bytes()) * 8 / seconds / 1e9; }
  // Requests per second (a paged batch is one request), as fabric-bench's ops/s.
  [[nodiscard]] double requests_per_s() const { return static_cast<double>(iterations) / seconds; }
  // RDMA WRITEs per second: one per single write, one per page of a batch.
  [[nodiscard]] double writes_per_s() const {
    return static_cast<double>(iterations * workload.ops_per_request()) / seconds;
  }
};

struct Machine {
  std::string hostname;
  unsigned cpus = 0;
  std::string provider;
  std::string backend;
  std::string version;
};
Machine describe_machine(const std::string& provider, const std::string& backend);

void print_header();
void print_row(const Measurement& m);
// Throws DemoError when the file cannot be written.
void write_json(const std::string& path, const Machine& machine,
                const std::vector<Measurement>& results);

}  // namespace demo
