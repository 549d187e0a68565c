// Prometheus text exposition format, version 0.0.4.
//
// Every family is written once with its HELP and TYPE lines, followed by
// all of its samples (so several pools share one family and the output is
// valid for any number of pools). Each series is written once: a pool whose
// name (or monitor_options::pool_label) an earlier report of the same
// writer had is labelled `name#2` (then `#3`, ...), and so are workers and
// job types of one report with the same name (compared as written: names
// that differ only in bytes that are not UTF-8 are the same name) - give
// pools distinct names for labels that do not depend on the order of the
// reports. Counters end in `_total`; times are in
// seconds; label values are escaped (backslash, double quote, newline), and
// a byte that is not valid UTF-8 becomes U+FFFD (the format is UTF-8).
//
// Latency histograms are exported as Prometheus histograms
// (`<name>_bucket{le="..."}`, `<name>_sum`, `<name>_count`) with fixed
// bucket bounds of (2^k - 1) ns for k = 8..36, i.e. 255 ns ... 68.7 s, plus
// +Inf. Each bound is the inclusive upper end of a latency_histogram bucket
// (see latency_histogram.hpp), so every cumulative count is exact, not
// interpolated. Percentiles are left to the server (histogram_quantile()
// over any window); nothing is exported with a `quantile` label, which
// Prometheus reserves for summaries. The output passes
// `promtool check metrics` (tested when promtool is installed).
//
// Serve the text with content type `prometheus_content_type`.
//
// Threading: plain functions and a value-type writer; use one writer from
// one thread at a time. The reports are read, never modified.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "thread_system/monitoring/pool_monitor.hpp"

namespace thread_system::monitoring {

/// The content type to serve the exposition text with.
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// Label name/value pairs of one sample, written in this order.
using prometheus_labels = std::vector<std::pair<std::string, std::string>>;

/// Collects samples per family and writes them grouped.
class prometheus_writer {
 public:
  /// Adds an integer sample with `labels` to counter family `name`; a family keeps the `help` of its first sample.
  void counter(std::string_view name, std::string_view help, const prometheus_labels& labels, std::uint64_t value);
  /// As counter() above, for a floating-point value (shortest round-trip form).
  void counter(std::string_view name, std::string_view help, const prometheus_labels& labels, double value);
  /// Adds a sample with `labels` to gauge family `name`; a family keeps the `help` of its first sample.
  void gauge(std::string_view name, std::string_view help, const prometheus_labels& labels, double value);
  /// `h` in nanoseconds, exported in seconds with the fixed bounds above.
  void histogram(std::string_view name, std::string_view help, const prometheus_labels& labels,
                 const histogram_snapshot& h);

  /// The `pool` label for a report of a pool called `name`: `name` the first
  /// time this writer is asked, then `name#2`, `name#3`, ...
  [[nodiscard]] std::string distinct_pool_label(std::string_view name);

  /// Writes str() to `os`.
  void write(std::ostream& os) const;
  /// Every family in order of first use: its HELP and TYPE lines, then all of its samples.
  [[nodiscard]] std::string str() const;

  /// Bucket bounds used by histogram(), in ns (ascending, without +Inf).
  [[nodiscard]] static const std::vector<std::uint64_t>& histogram_bounds_ns();

 private:
  struct family {
    std::string name;
    std::string help;
    std::string type;
    std::string samples;  // complete lines
  };
  family& family_for(std::string_view name, std::string_view help, std::string_view type);
  static void append_sample(std::string& out, std::string_view name, const prometheus_labels& labels,
                            std::string_view extra_label_name, std::string_view extra_label_value,
                            std::string_view value);

  std::vector<family> families_;
  std::vector<std::string> pool_labels_;  // given by distinct_pool_label()
};

/// Appends a label value with Prometheus escaping.
void append_prometheus_label_value(std::string& out, std::string_view v);
/// A sample value: integers exactly, doubles in shortest round-trip form,
/// NaN / +Inf / -Inf spelled as the format wants.
[[nodiscard]] std::string format_prometheus_value(double v);

/// Adds every metric of `r` to `w` (several reports may share one writer).
void append_prometheus(prometheus_writer& w, const monitor_report& r);
/// The exposition text of one report.
[[nodiscard]] std::string to_prometheus(const monitor_report& r);
/// The exposition text of several reports, each family written once.
[[nodiscard]] std::string to_prometheus(const std::vector<monitor_report>& reports);
/// Writes to_prometheus(r) to `os`.
void write_prometheus(std::ostream& os, const monitor_report& r);

}  // namespace thread_system::monitoring
