#include "fabric/status.hpp"

#include <fmt/format.h>

#include "fabric/device.hpp"

namespace fabric {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::ok: return "ok";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::out_of_range: return "out_of_range";
    case Errc::malformed: return "malformed";
    case Errc::again: return "again";
    case Errc::timeout: return "timeout";
    case Errc::provider: return "provider";
    case Errc::unsupported: return "unsupported";
    case Errc::not_found: return "not_found";
    case Errc::shutdown: return "shutdown";
    case Errc::cancelled: return "cancelled";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return fmt::format("{}: {}", errc_name(code_), message_);
}

BadResultAccess::BadResultAccess(Status status)
    : std::runtime_error("Result holds no value: " + status.to_string()), status_(std::move(status)) {}

std::string Device::to_string() const {
  return is_host() ? std::string("host") : fmt::format("cuda:{}", index);
}

}  // namespace fabric
