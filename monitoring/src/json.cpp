#include "thread_system/monitoring/json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "utf8.hpp"

namespace thread_system::monitoring {

namespace {

void append_latency(json_writer& w, const latency_summary& s) {
  w.begin_object();
  w.key("count").value(s.count);
  w.key("mean_ns").value(s.mean_ns);
  w.key("min_ns").value(s.min_ns);
  w.key("p50_ns").value(s.p50_ns);
  w.key("p95_ns").value(s.p95_ns);
  w.key("p99_ns").value(s.p99_ns);
  w.key("p999_ns").value(s.p999_ns);
  w.key("max_ns").value(s.max_ns);
  w.end_object();
}

void append_health(json_writer& w, const health_report& h) {
  w.begin_object();
  w.key("status").value(to_string(h.status));
  w.key("checks").begin_array();
  for (const health_check& c : h.checks) {
    w.begin_object();
    w.key("name").value(c.name);
    w.key("status").value(to_string(c.status));
    w.key("applicable").value(c.applicable);
    w.key("value").value(c.value);
    w.key("warning").value(c.warning);
    w.key("critical").value(c.critical);
    w.key("detail").value(c.detail);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (c < 0x20) {
          out.append("\\u00");
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 0xF]);
        } else if (c < 0x80) {
          out.push_back(static_cast<char>(c));
        } else {
          const std::size_t n = detail::utf8_sequence_length(s, i);
          if (n == 0) {
            out.append("\\ufffd");  // one replacement per invalid byte
            ++i;
            continue;
          }
          out.append(s.substr(i, n));
          i += n;
          continue;
        }
    }
    ++i;
  }
  out.push_back('"');
}

void json_writer::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_->push_back(',');
    first_.back() = false;
  }
}

json_writer& json_writer::begin_object() {
  separate();
  out_->push_back('{');
  first_.push_back(true);
  return *this;
}

json_writer& json_writer::end_object() {
  out_->push_back('}');
  first_.pop_back();
  return *this;
}

json_writer& json_writer::begin_array() {
  separate();
  out_->push_back('[');
  first_.push_back(true);
  return *this;
}

json_writer& json_writer::end_array() {
  out_->push_back(']');
  first_.pop_back();
  return *this;
}

json_writer& json_writer::key(std::string_view k) {
  separate();
  append_json_string(*out_, k);
  out_->push_back(':');
  after_key_ = true;
  return *this;
}

json_writer& json_writer::value(std::string_view s) {
  separate();
  append_json_string(*out_, s);
  return *this;
}

json_writer& json_writer::value(bool b) {
  separate();
  out_->append(b ? "true" : "false");
  return *this;
}

json_writer& json_writer::value(double d) {
  if (!std::isfinite(d)) return null();
  separate();
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d);
  out_->append(buf, res.ptr);
  return *this;
}

json_writer& json_writer::null() {
  separate();
  out_->append("null");
  return *this;
}

void append_json(json_writer& w, const monitor_report& r) {
  const pool_metrics& m = r.metrics;
  w.begin_object();
  w.key("pool").value(m.pool_name);
  w.key("timestamp_unix_ms").value(m.unix_ms);
  w.key("sample").value(r.sample_number);

  w.key("counters").begin_object();
  w.key("accepted").value(m.accepted);
  w.key("executed").value(m.executed);
  w.key("failed").value(m.failed);
  w.key("cancelled").value(m.cancelled);
  w.key("steals").value(m.steals);
  w.key("parks").value(m.parks);
  w.end_object();

  w.key("queue").begin_object();
  w.key("depth").value(m.queue_depth);
  w.key("peak").value(r.peak_queue_depth);
  w.key("window_min").value(r.window_min_queue_depth);
  w.end_object();

  w.key("rates").begin_object();
  w.key("window_seconds").value(std::chrono::duration<double>(r.window).count());
  w.key("throughput_per_s").value(r.throughput_per_s);
  w.key("accept_rate_per_s").value(r.accept_rate_per_s);
  w.key("window_executed").value(r.window_executed);
  w.key("window_failed").value(r.window_failed);
  w.key("error_rate").value(r.error_rate);
  w.end_object();

  w.key("utilisation").begin_object();
  w.key("cumulative").value(m.utilisation());
  w.key("recent").value(r.recent_utilisation);
  w.end_object();

  w.key("latency");
  if (m.has_latency) {
    w.begin_object();
    w.key("wait");
    append_latency(w, r.wait);
    w.key("run");
    append_latency(w, r.run);
    w.end_object();
  } else {
    w.null();
  }

  w.key("workers").begin_array();
  for (std::size_t i = 0; i < m.workers.size(); ++i) {
    const worker_metrics& wm = m.workers[i];
    const worker_report* wr = i < r.workers.size() ? &r.workers[i] : nullptr;
    w.begin_object();
    w.key("index").value(wm.index);
    w.key("name").value(wm.name);
    w.key("processed").value(wm.processed);
    w.key("failed").value(wm.failed);
    w.key("cancelled").value(wm.cancelled);
    w.key("steals").value(wm.steals);
    w.key("parks").value(wm.parks);
    w.key("busy_ns").value(static_cast<std::int64_t>(wm.busy_time.count()));
    w.key("idle_ns").value(static_cast<std::int64_t>(wm.idle_time.count()));
    w.key("busy_since_ns");
    if (wm.busy_since_known) {
      w.value(wm.busy_since_ns);
    } else {
      w.null();
    }
    w.key("utilisation").value(wm.utilisation);
    w.key("recent_utilisation").value(wr != nullptr ? wr->recent_utilisation : 0.0);
    w.key("stuck").value(wr != nullptr && wr->stuck);
    w.key("no_progress_ns").value(wr != nullptr ? static_cast<std::int64_t>(wr->no_progress_for.count()) : 0);
    w.key("latency");
    if (wm.has_latency) {
      w.begin_object();
      w.key("wait");
      append_latency(w, summarise(wm.wait));
      w.key("run");
      append_latency(w, summarise(wm.run));
      w.end_object();
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_array();

  w.key("job_types").begin_array();
  for (const job_type_metrics& t : m.job_types) {
    w.begin_object();
    w.key("type").value(t.type_name);
    w.key("accepted").value(t.accepted);
    w.key("executed").value(t.executed);
    w.key("failed").value(t.failed);
    w.key("cancelled").value(t.cancelled);
    w.key("waiting").value(t.waiting);
    w.key("wait");
    if (t.has_latency) {
      append_latency(w, summarise(t.wait));
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_array();

  w.key("health");
  append_health(w, r.health);
  w.end_object();
}

std::string to_json(const monitor_report& r) {
  std::string out;
  json_writer w(out);
  append_json(w, r);
  return out;
}

std::string to_json(const std::vector<monitor_report>& reports) {
  std::string out;
  json_writer w(out);
  w.begin_object().key("pools").begin_array();
  for (const monitor_report& r : reports) append_json(w, r);
  w.end_array().end_object();
  return out;
}

void write_json(std::ostream& os, const monitor_report& r) { os << to_json(r); }

std::string to_json(const health_report& h) {
  std::string out;
  json_writer w(out);
  append_health(w, h);
  return out;
}

}  // namespace thread_system::monitoring
