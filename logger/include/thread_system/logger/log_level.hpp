// log_level: the severities of the async logger, lowest to highest, plus
// `off` (a logger level that lets nothing through; never a record's level).
//
// Thread-safety: plain values and constexpr functions; no state.
#pragma once

#include <cstdint>
#include <string_view>

namespace thread_system {

enum class log_level : std::uint8_t {
  trace = 0,
  debug = 1,
  info = 2,
  warn = 3,
  error = 4,
  critical = 5,
  off = 6,  ///< As a logger level: nothing passes. Not a valid record level.
};

/// Short stable name ("trace", "debug", "info", "warn", "error", "critical", "off").
[[nodiscard]] constexpr std::string_view to_string(log_level level) noexcept {
  switch (level) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warn";
    case log_level::error:
      return "error";
    case log_level::critical:
      return "critical";
    case log_level::off:
      return "off";
  }
  return "unknown";
}

}  // namespace thread_system
