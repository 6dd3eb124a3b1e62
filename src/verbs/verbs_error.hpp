#pragma once
// The Status every failed ibverbs call in this backend becomes: the call, then errno's text.

#include <fmt/format.h>

#include <cstring>
#include <string_view>

#include "fabric/status.hpp"

namespace fabric::verbs {

inline Status verbs_error(std::string_view call, int rc) {
  return {Errc::provider, fmt::format("{}: {}", call, std::strerror(rc))};
}

}  // namespace fabric::verbs
