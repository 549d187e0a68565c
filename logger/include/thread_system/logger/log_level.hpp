// log_level: the severities of the async logger, lowest to highest, plus
// `off` (a logger level that lets nothing through; never a record's level).
// log_types: the seed API's message types and the level each maps to.
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

/// The seed API's message types (logger::write(), log_module::write_*()),
/// each mapped to a log_level by to_log_level().
enum class log_types : std::uint8_t {
  None,         ///< Not logged.
  Exception,    ///< log_level::critical
  Error,        ///< log_level::error
  Information,  ///< log_level::info
  Debug,        ///< log_level::debug
  Sequence,     ///< log_level::trace
  Parameter,    ///< log_level::trace
};

/// The level a seed message type is logged at (None, and a value outside the enumeration: log_level::off, which
/// write() does not log: None is skipped, any other such value refused with invalid_argument).
[[nodiscard]] constexpr log_level to_log_level(log_types type) noexcept {
  switch (type) {
    case log_types::Exception:
      return log_level::critical;
    case log_types::Error:
      return log_level::error;
    case log_types::Information:
      return log_level::info;
    case log_types::Debug:
      return log_level::debug;
    case log_types::Sequence:
    case log_types::Parameter:
      return log_level::trace;
    case log_types::None:
      break;
  }
  return log_level::off;
}

}  // namespace thread_system
