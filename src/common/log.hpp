#pragma once
// The library's logger. Level from FABRIC_LOG_LEVEL (trace, debug, info, warn,
// error, off); default warn, so nothing on the hot path formats by default.

#include <spdlog/spdlog.h>

namespace fabric::log {

spdlog::logger& get();

template <typename... Args>
void debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  auto& l = get();
  if (l.should_log(spdlog::level::debug)) l.debug(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  get().info(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  get().warn(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void error(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  get().error(fmt, std::forward<Args>(args)...);
}

}  // namespace fabric::log
