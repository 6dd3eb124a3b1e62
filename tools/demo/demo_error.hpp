#pragma once
// The demo's one failure type: anything that goes wrong ends the run, and the
// top level turns it into a message and a non-zero exit.

#include <stdexcept>
#include <string>

#include <fabric/status.hpp>

namespace demo {

class DemoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check(const fabric::Status& status, const std::string& what) {
  if (!status.ok()) throw DemoError(what + ": " + status.to_string());
}

template <typename T>
T take(fabric::Result<T> result, const std::string& what) {
  check(result.status(), what);
  return std::move(result).value();
}

}  // namespace demo
