#include "registration.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <vector>

#include "raw/endpoint.hpp"

using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string libfabric_name(const std::string& p) {
  if (p == "tcp") return "tcp;ofi_rxm";
  if (p == "udp") return "udp;ofi_rxd";
  return p;
}

}  // namespace

RegistrationFigures measure_registration(fabric::TransferEngine& engine, const std::string& provider,
                                         std::uint32_t tensors, std::uint64_t tensor_bytes) {
  RegistrationFigures f;
  f.tensors = tensors;
  f.tensor_bytes = tensor_bytes;
  // Separate allocations, touched, so that no measurement pays the page faults.
  std::vector<std::vector<std::byte>> mem(tensors, std::vector<std::byte>(tensor_bytes, std::byte{1}));

  auto t0 = Clock::now();
  std::vector<fabric::MrHandle> handles;
  for (auto& t : mem) {
    auto r = engine.reg_mr(t.data(), t.size());
    if (!r.ok()) {
      std::fprintf(stderr, "reg_mr: %s\n", r.status().to_string().c_str());
      break;
    }
    handles.push_back(r->handle);
  }
  f.reg_mr_ms = ms_since(t0);
  for (auto& h : handles) (void)engine.dereg_mr(h);
  handles.clear();

  std::vector<fabric::MemoryRange> spans;
  for (auto& t : mem) spans.push_back({t.data(), t.size()});
  t0 = Clock::now();
  auto batch = engine.reg_mrs(spans);
  f.reg_mrs_ms = ms_since(t0);
  if (!batch.ok()) {
    std::fprintf(stderr, "reg_mrs: %s\n", batch.status().to_string().c_str());
  } else {
    for (auto& r : *batch) (void)engine.dereg_mr(r.handle);
  }

  if (engine.config().backend != fabric::Backend::libfabric) return f;
  try {
    const std::string name = libfabric_name(provider);
    bench::raw::Endpoint ep(name, name.starts_with("tcp"), "127.0.0.1");
    std::vector<bench::raw::Region> regions;
    regions.reserve(mem.size());
    t0 = Clock::now();
    for (auto& t : mem) regions.push_back(ep.register_region(t.data(), t.size()));
    f.raw_ms = ms_since(t0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "raw baseline: %s\n", e.what());
  }
  return f;
}
