#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <memory>

namespace fabric::log {

namespace {
std::shared_ptr<spdlog::logger> make_logger() {
  auto logger = spdlog::stderr_color_mt("fabric");
  spdlog::level::level_enum level = spdlog::level::warn;
  if (const char* env = std::getenv("FABRIC_LOG_LEVEL")) {
    level = spdlog::level::from_str(env);
  }
  logger->set_level(level);
  logger->set_pattern("[%H:%M:%S.%f] [fabric] [%l] [tid %t] %v");
  return logger;
}
}  // namespace

spdlog::logger& get() {
  static const std::shared_ptr<spdlog::logger> logger = make_logger();
  return *logger;
}

}  // namespace fabric::log
