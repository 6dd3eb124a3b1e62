#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <memory>

namespace fabric::log {

namespace {
std::shared_ptr<spdlog::logger> make_logger() {
  // A process may hold two copies of this static library that share spdlog's registry (a host
  // program linking it beside the Python extension): the second copy reuses the first one's
  // logger instead of throwing "logger with name 'fabric' already exists".
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
