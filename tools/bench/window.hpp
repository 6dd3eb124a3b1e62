#pragma once
// The engine side of a timed round: keep up to `window` requests in flight
// until `count` have completed.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fabric/fabric.hpp"

namespace bench {

// Posts one request that reports to `flag`; Errc::again means "not now".
using SubmitOne = std::function<fabric::Status(const std::shared_ptr<fabric::CompletionFlag>& flag)>;

// Each request's submit → completion latency in ns. Throws on any failed
// submission or completion, or when the round outlasts its 120 s bound.
std::vector<std::uint64_t> run_window(std::uint64_t count, std::uint64_t window,
                                      const std::string& what, const SubmitOne& submit);

// run_window on `threads` threads at once, `count` split between them, each
// with its own `window`; `submit` is called concurrently (the engine's submit
// calls take any number of producers). The latencies of all threads, and the
// first thread's failure rethrown here.
std::vector<std::uint64_t> run_windows(std::uint64_t count, std::uint64_t window,
                                       std::uint32_t threads, const std::string& what,
                                       const SubmitOne& submit);

}  // namespace bench
