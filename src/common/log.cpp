#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <memory>

namespace fabric::log {

namespace {
std::shared_ptr<spdlog::logger> make_logger() {
  // Each Python extension (_native, _kv, _moe) links its own copy of this library but they share
  // spdlog's registry: the second copy reuses the first one's logger instead of throwing
  // "logger with name 'fabric' already exists" at import.
  if (auto existing = spdlog::get("fabric")) return existing;
  std::shared_ptr<spdlog::logger> logger;
  try {
    logger = spdlog::stderr_color_mt("fabric");
  } catch (const spdlog::spdlog_ex&) {
    if (auto raced = spdlog::get("fabric")) return raced;  // another copy registered it first
    throw;
  }
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
