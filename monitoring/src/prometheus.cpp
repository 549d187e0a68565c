#include "thread_system/monitoring/prometheus.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ostream>

#include "utf8.hpp"

namespace thread_system::monitoring {

namespace {

// Exact decimal seconds of an integer number of nanoseconds: 255 -> "0.000000255".
std::string ns_to_seconds_text(std::uint64_t ns) {
  std::string s = std::to_string(ns / 1'000'000'000u);
  std::uint64_t frac = ns % 1'000'000'000u;
  if (frac == 0) return s;
  char digits[10] = "000000000";
  for (int i = 8; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  int len = 9;
  while (len > 0 && digits[len - 1] == '0') --len;
  s.push_back('.');
  s.append(digits, static_cast<std::size_t>(len));
  return s;
}

double seconds(std::uint64_t ns) { return static_cast<double>(ns) / 1e9; }

void append_help_text(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
}

prometheus_labels with(const prometheus_labels& base, std::string name, std::string value) {
  prometheus_labels l = base;
  l.emplace_back(std::move(name), std::move(value));
  return l;
}

// Appends the sequence that starts at v[i] (a byte >= 0x80) and moves i
// past it: a valid UTF-8 sequence whole, an invalid byte as U+FFFD (the
// exposition format is UTF-8, as the JSON export).
void append_non_ascii(std::string& out, std::string_view v, std::size_t& i) {
  const std::size_t n = detail::utf8_sequence_length(v, i);
  if (n == 0) {
    out.append("\xEF\xBF\xBD");
    ++i;
  } else {
    out.append(v.substr(i, n));
    i += n;
  }
}

// `v` with each byte that is not valid UTF-8 replaced by U+FFFD, as the
// label is written (append_prometheus_label_value()).
std::string valid_utf8(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size();) {
    if (static_cast<unsigned char>(v[i]) < 0x80) {
      out.push_back(v[i++]);
    } else {
      append_non_ascii(out, v, i);
    }
  }
  return out;
}

// `v`, or when `used` holds it already `v#2`, `v#3`, ... (the first of
// those not in `used`); recorded in `used`. Two series of one family with
// the same labels are one series to a server: the later value is lost.
// Compared as written: names that differ only in bytes that are not UTF-8
// are written alike (U+FFFD), so they count as the same name.
std::string distinct(std::vector<std::string>& used, std::string_view v) {
  const std::string base = valid_utf8(v);
  std::string label = base;
  for (std::size_t n = 2; std::find(used.begin(), used.end(), label) != used.end(); ++n) {
    label = base + "#" + std::to_string(n);
  }
  used.push_back(label);
  return label;
}
}  // namespace

std::string prometheus_writer::distinct_pool_label(std::string_view name) { return distinct(pool_labels_, name); }

void append_prometheus_label_value(std::string& out, std::string_view v) {
  for (std::size_t i = 0; i < v.size();) {
    const char c = v[i];
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else if (c == '\n') {
      out.append("\\n");
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      append_non_ascii(out, v, i);
      continue;
    } else {
      out.push_back(c);
    }
    ++i;
  }
}

std::string format_prometheus_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

const std::vector<std::uint64_t>& prometheus_writer::histogram_bounds_ns() {
  static const std::vector<std::uint64_t> bounds = [] {
    std::vector<std::uint64_t> b;
    for (unsigned k = 8; k <= 36; ++k) b.push_back((std::uint64_t{1} << k) - 1);  // 2^k - 1: a bucket's upper end
    return b;
  }();
  return bounds;
}

prometheus_writer::family& prometheus_writer::family_for(std::string_view name, std::string_view help,
                                                         std::string_view type) {
  for (family& f : families_) {
    if (f.name == name) return f;
  }
  families_.push_back(family{std::string(name), std::string(help), std::string(type), {}});
  return families_.back();
}

void prometheus_writer::append_sample(std::string& out, std::string_view name, const prometheus_labels& labels,
                                      std::string_view extra_label_name, std::string_view extra_label_value,
                                      std::string_view value) {
  out.append(name);
  if (!labels.empty() || !extra_label_name.empty()) {
    out.push_back('{');
    bool first = true;
    const auto label = [&](std::string_view k, std::string_view v) {
      if (!first) out.push_back(',');
      first = false;
      out.append(k);
      out.append("=\"");
      append_prometheus_label_value(out, v);
      out.push_back('"');
    };
    for (const auto& [k, v] : labels) label(k, v);
    if (!extra_label_name.empty()) label(extra_label_name, extra_label_value);
    out.push_back('}');
  }
  out.push_back(' ');
  out.append(value);
  out.push_back('\n');
}

void prometheus_writer::counter(std::string_view name, std::string_view help, const prometheus_labels& labels,
                                std::uint64_t value) {
  append_sample(family_for(name, help, "counter").samples, name, labels, {}, {}, std::to_string(value));
}

void prometheus_writer::counter(std::string_view name, std::string_view help, const prometheus_labels& labels,
                                double value) {
  append_sample(family_for(name, help, "counter").samples, name, labels, {}, {}, format_prometheus_value(value));
}

void prometheus_writer::gauge(std::string_view name, std::string_view help, const prometheus_labels& labels,
                              double value) {
  append_sample(family_for(name, help, "gauge").samples, name, labels, {}, {}, format_prometheus_value(value));
}

void prometheus_writer::histogram(std::string_view name, std::string_view help, const prometheus_labels& labels,
                                  const histogram_snapshot& h) {
  std::string& out = family_for(name, help, "histogram").samples;
  const std::string bucket = std::string(name) + "_bucket";
  // One pass over the histogram: cumulative counts at each bound.
  std::size_t i = 0;
  std::uint64_t cumulative = 0;
  for (std::uint64_t bound : histogram_bounds_ns()) {
    while (i < h.counts.size() && histogram_layout::upper_bound(i) <= bound) cumulative += h.counts[i++];
    append_sample(out, bucket, labels, "le", ns_to_seconds_text(bound), std::to_string(cumulative));
  }
  append_sample(out, bucket, labels, "le", "+Inf", std::to_string(h.count));
  append_sample(out, std::string(name) + "_sum", labels, {}, {}, format_prometheus_value(seconds(h.sum)));
  append_sample(out, std::string(name) + "_count", labels, {}, {}, std::to_string(h.count));
}

void prometheus_writer::write(std::ostream& os) const { os << str(); }

std::string prometheus_writer::str() const {
  std::string out;
  for (const family& f : families_) {
    out.append("# HELP ");
    out.append(f.name);
    out.push_back(' ');
    append_help_text(out, f.help);
    out.append("\n# TYPE ");
    out.append(f.name);
    out.push_back(' ');
    out.append(f.type);
    out.push_back('\n');
    out.append(f.samples);
  }
  return out;
}

void append_prometheus(prometheus_writer& w, const monitor_report& r) {
  const pool_metrics& m = r.metrics;
  const prometheus_labels pool{{"pool", w.distinct_pool_label(m.pool_name)}};

  w.counter("thread_system_pool_jobs_accepted_total", "Jobs accepted by enqueue/submit.", pool, m.accepted);
  w.counter("thread_system_pool_jobs_executed_total", "Jobs run to completion, failed ones included.", pool,
            m.executed);
  w.counter("thread_system_pool_jobs_failed_total", "Jobs that threw or reported an error.", pool, m.failed);
  w.counter("thread_system_pool_jobs_cancelled_total",
            "Accepted jobs cancelled instead of completed: by stop(cancel_pending), by their cancellation token, or by "
            "backpressure::drop_oldest.",
            pool, m.cancelled);
  w.counter("thread_system_pool_steals_total", "Jobs moved between workers by stealing.", pool, m.steals);
  w.counter("thread_system_pool_parks_total", "Times a worker went to sleep for lack of work.", pool, m.parks);
  w.gauge("thread_system_pool_queue_depth", "Jobs waiting now.", pool, static_cast<double>(m.queue_depth));
  w.gauge("thread_system_pool_queue_depth_peak", "Largest queue depth seen by the monitor's samples.", pool,
          static_cast<double>(r.peak_queue_depth));
  w.gauge("thread_system_pool_workers", "Worker threads.", pool, static_cast<double>(m.worker_count));
  w.gauge("thread_system_pool_throughput_jobs_per_second", "Jobs finished per second over the monitor's window.", pool,
          r.throughput_per_s);
  w.gauge("thread_system_pool_error_ratio", "Failed / executed jobs over the monitor's window.", pool, r.error_rate);
  w.gauge("thread_system_pool_utilisation_ratio", "Mean busy share of the workers over the last sampling interval.",
          pool, r.recent_utilisation);
  w.gauge("thread_system_pool_stuck_workers", "Workers without progress in one job for longer than the threshold.",
          pool, static_cast<double>(r.stuck_workers));
  w.gauge("thread_system_pool_health_status", "Overall health: 0 ok, 1 warning, 2 critical.", pool,
          static_cast<double>(static_cast<int>(r.health.status)));
  for (const health_check& c : r.health.checks) {
    w.gauge("thread_system_pool_health_check_status", "Health per check: 0 ok, 1 warning, 2 critical.",
            with(pool, "check", c.name), static_cast<double>(static_cast<int>(c.status)));
  }

  if (m.has_latency) {
    // Histograms only: Prometheus derives any percentile over any window
    // from the buckets (histogram_quantile over rate(..._bucket[5m])).
    // Percentiles of everything since the pool started (a summary) would
    // barely move on a long-running pool; JSON export carries those.
    w.histogram("thread_system_pool_job_wait_seconds",
                "Time from enqueue to start, of sampled jobs (pool_options::latency_sample_every).", pool, m.wait);
    w.histogram("thread_system_pool_job_run_seconds", "Run time of sampled jobs (pool_options::latency_sample_every).",
                pool, m.run);
  }

  std::vector<std::string> worker_labels;
  for (std::size_t i = 0; i < m.workers.size(); ++i) {
    const worker_metrics& wm = m.workers[i];
    const prometheus_labels worker = with(pool, "worker", distinct(worker_labels, wm.name));
    w.counter("thread_system_worker_jobs_processed_total", "Jobs this worker ran, failed ones included.", worker,
              wm.processed);
    w.counter("thread_system_worker_jobs_failed_total", "Jobs this worker ran that failed.", worker, wm.failed);
    w.counter("thread_system_worker_jobs_cancelled_total",
              "Jobs this worker took and cancelled: at stop(cancel_pending), or by their cancellation token.", worker,
              wm.cancelled);
    w.counter("thread_system_worker_busy_seconds_total", "Time running or looking for jobs.", worker,
              std::chrono::duration<double>(wm.busy_time).count());
    w.counter("thread_system_worker_idle_seconds_total", "Time parked waiting for work.", worker,
              std::chrono::duration<double>(wm.idle_time).count());
    const bool have = i < r.workers.size();
    w.gauge("thread_system_worker_utilisation_ratio", "Busy share over the last sampling interval.", worker,
            have ? r.workers[i].recent_utilisation : 0.0);
    w.gauge("thread_system_worker_stuck", "1 while the worker is in one job longer than the threshold.", worker,
            have && r.workers[i].stuck ? 1.0 : 0.0);
  }

  std::vector<std::string> type_labels;
  for (const job_type_metrics& t : m.job_types) {
    const prometheus_labels type = with(pool, "type", distinct(type_labels, t.type_name));
    w.counter("thread_system_job_type_accepted_total", "Jobs of this type accepted.", type, t.accepted);
    w.counter("thread_system_job_type_executed_total", "Jobs of this type run.", type, t.executed);
    w.counter("thread_system_job_type_failed_total", "Jobs of this type that failed.", type, t.failed);
    w.counter("thread_system_job_type_cancelled_total",
              "Jobs of this type cancelled: by stop(cancel_pending), their cancellation token or drop_oldest.", type,
              t.cancelled);
    w.gauge("thread_system_job_type_waiting", "Jobs of this type waiting now.", type, static_cast<double>(t.waiting));
    if (t.has_latency) {
      w.histogram("thread_system_job_type_wait_seconds", "Time from enqueue to start, of sampled jobs of this type.",
                  type, t.wait);
    }
  }
}

std::string to_prometheus(const monitor_report& r) {
  prometheus_writer w;
  append_prometheus(w, r);
  return w.str();
}

std::string to_prometheus(const std::vector<monitor_report>& reports) {
  prometheus_writer w;
  for (const monitor_report& r : reports) append_prometheus(w, r);
  return w.str();
}

void write_prometheus(std::ostream& os, const monitor_report& r) { os << to_prometheus(r); }

}  // namespace thread_system::monitoring
