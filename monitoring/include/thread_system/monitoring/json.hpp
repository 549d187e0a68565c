// JSON export of monitor reports, and the small writer behind it.
//
// Output is RFC 8259 JSON: strings are escaped (quote, backslash, control
// characters as \uXXXX or their short forms) and invalid UTF-8 in names is
// replaced by U+FFFD, so the text always parses; non-finite numbers become
// null. The writer appends to a caller's std::string and allocates only as
// that string grows.
//
// Threading: plain functions and a value-type writer; use one writer from
// one thread at a time. The reports are read, never modified.
#pragma once

#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "thread_system/monitoring/pool_monitor.hpp"

namespace thread_system::monitoring {

/// Appends `s` to `out` as a quoted JSON string.
void append_json_string(std::string& out, std::string_view s);

/// A streaming writer: begin/end objects and arrays, key() before each
/// member value; commas are placed automatically. Misuse (a value without a
/// key inside an object) is not diagnosed; the caller owns the structure.
class json_writer {
 public:
  /// A writer that appends to `out`, which must outlive it.
  explicit json_writer(std::string& out) : out_(&out) {}

  /// Opens an object (`{`).
  json_writer& begin_object();
  /// Closes the innermost open object (`}`).
  json_writer& end_object();
  /// Opens an array (`[`).
  json_writer& begin_array();
  /// Closes the innermost open array (`]`).
  json_writer& end_array();
  /// Writes the member name `k` (escaped) and the colon; the next value is that member's value.
  json_writer& key(std::string_view k);

  /// Writes `s` as an escaped JSON string.
  json_writer& value(std::string_view s);
  /// As value(std::string_view); `s` must not be null.
  json_writer& value(const char* s) { return value(std::string_view(s)); }
  /// Writes `true` or `false`.
  json_writer& value(bool b);
  json_writer& value(double d);  ///< shortest round-trip form; NaN/inf become null
  /// Writes `null`.
  json_writer& null();
  /// Writes an integer exactly (any integral type but bool).
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  json_writer& value(T v) {
    separate();
    out_->append(std::to_string(v));
    return *this;
  }

 private:
  void separate();

  std::string* out_;
  std::vector<bool> first_;  // one entry per open container: no member written yet
  bool after_key_ = false;
};

/// The report as one JSON object (pool, counters, queue, rates, latency,
/// workers, job_types, health; see docs/MONITORING.md).
void append_json(json_writer& w, const monitor_report& r);
/// The report as one JSON object (as append_json()).
[[nodiscard]] std::string to_json(const monitor_report& r);
/// Several pools: {"pools":[...]}.
[[nodiscard]] std::string to_json(const std::vector<monitor_report>& reports);
/// Writes to_json(r) to `os`.
void write_json(std::ostream& os, const monitor_report& r);

/// Just the health part: {"status":..., "checks":[...]}.
[[nodiscard]] std::string to_json(const health_report& h);

}  // namespace thread_system::monitoring
