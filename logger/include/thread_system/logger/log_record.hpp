// log_record, log_entry and line_formatter: what a sink receives.
//
// A `log_record` is one accepted log call as the writer thread read it back
// from the logger's buffer: level, wall-clock time (taken by the producer at
// the call), the producer's thread id, the call's source location and the
// formatted message. The views in it (`message`, `file`, `function`) stay
// valid only for the duration of the `log_sink::write()` call that receives
// it; copy what must outlive the call. `file` and `function` are
// null-terminated strings with static storage (from std::source_location):
// they stay valid for the whole program.
//
// A `log_entry` wraps a record and formats its text line lazily: the first
// `line()` call formats, later calls (from the same or another sink) return
// the same text. Sinks that never call `line()` (a null sink, a callback that
// reads `record()` only) cost no formatting at all.
//
// Line layout (UTC, microseconds; the source part is left out when the record
// has no source location; " [truncated]" is appended when the message was cut
// to the logger's `max_message_bytes`):
//
//   2025-01-02T13:45:01.123456Z [info] [12345] [main.cpp:42] the message\n
//
// Thread-safety: a `line_formatter` and the `log_entry` objects using it
// belong to one thread at a time (the thread writing the logger's records). Records are
// values with borrowed views.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "thread_system/logger/log_level.hpp"

namespace thread_system {

/// One accepted log call as a sink receives it; its views are valid only during the log_sink::write() call.
struct log_record {
  /// The level the call was made at.
  log_level level = log_level::info;
  std::chrono::system_clock::time_point time{};  ///< Taken by the producer at the call.
  std::uint32_t thread_id = 0;                   ///< Producer's OS thread id (Linux: gettid()).
  const char* file = "";                         ///< Source file of the call ("" if none); static storage.
  std::uint32_t line = 0;                        ///< Source line of the call; 0 if none.
  const char* function = "";                     ///< Function of the call ("" if none); static storage.
  std::string_view message;                      ///< The formatted message (no trailing newline).
  bool truncated = false;                        ///< The message was cut to max_message_bytes.
};

/// The OS id of the calling thread (cached per thread), as stored in records.
[[nodiscard]] std::uint32_t current_thread_id() noexcept;

/// Formats records into text lines (layout above). Caches the formatted
/// date-and-seconds prefix, so consecutive records within one second cost
/// only the microseconds. Not thread-safe: one instance per thread.
class line_formatter {
 public:
  /// A formatter with an empty cache.
  line_formatter();
  /// Not copyable.
  line_formatter(const line_formatter&) = delete;
  /// Not copyable.
  line_formatter& operator=(const line_formatter&) = delete;

  /// Formats `record` and returns the line (ending in '\n'); the view is
  /// valid until the next call on this formatter. `level_begin` and
  /// `level_end` receive the byte range of the level name inside the line
  /// (for sinks that colour it).
  std::string_view format(const log_record& record, std::size_t& level_begin, std::size_t& level_end);

 private:
  fmt::memory_buffer line_;
  std::int64_t cached_second_ = INT64_MIN;  // no second yet (-1 is 1969-12-31T23:59:59)
  char cached_prefix_[24] = {};             // "YYYY-MM-DDTHH:MM:SS"
  std::size_t cached_prefix_length_ = 0;
  const char* cached_file_ = nullptr;  // the last record's file, and its base name
  std::string_view cached_base_name_;
};

/// A record plus its lazily formatted line; what `log_sink::write()` gets.
class log_entry {
 public:
  /// Wraps `record`, formatting its line with `formatter` when first asked; both must outlive the entry.
  log_entry(const log_record& record, line_formatter& formatter) noexcept : record_(record), formatter_(formatter) {}
  /// Not copyable.
  log_entry(const log_entry&) = delete;
  /// Not copyable.
  log_entry& operator=(const log_entry&) = delete;

  /// The record, with its views valid during the write() call.
  [[nodiscard]] const log_record& record() const noexcept { return record_; }

  /// The text line, '\n'-terminated; formatted on the first call.
  [[nodiscard]] std::string_view line() const {
    if (!formatted_) {
      line_ = formatter_.format(record_, level_begin_, level_end_);
      formatted_ = true;
    }
    return line_;
  }

  /// [begin, end) of the level name inside line() (formats if needed).
  [[nodiscard]] std::size_t level_begin() const {
    (void)line();
    return level_begin_;
  }
  /// End (exclusive) of the level name inside line() (formats if needed).
  [[nodiscard]] std::size_t level_end() const {
    (void)line();
    return level_end_;
  }

 private:
  const log_record& record_;
  line_formatter& formatter_;
  mutable std::string_view line_;
  mutable std::size_t level_begin_ = 0;
  mutable std::size_t level_end_ = 0;
  mutable bool formatted_ = false;
};

}  // namespace thread_system
