#include "thread_system/monitoring/health.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <system_error>
#include <utility>

namespace thread_system::monitoring {

namespace {

// As printf's "%.6g", in every locale: a decimal point, never the comma
// of a locale whose LC_NUMERIC has one (the detail text goes into JSON and
// Prometheus output).
std::string format_number(double v) {
  std::array<char, 64> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::general, 6);
  return ec == std::errc{} ? std::string(buf.data(), end) : std::string("?");
}

health_check not_applicable(std::string name, std::string why) {
  health_check c;
  c.name = std::move(name);
  c.applicable = false;
  c.detail = std::move(why);
  return c;
}

// `higher_is_worse`: queue depth, error rate...; otherwise throughput.
health_check grade(std::string name, double value, const threshold& t, bool higher_is_worse, std::string_view unit) {
  health_check c;
  c.name = std::move(name);
  c.value = value;
  c.warning = t.warning;
  c.critical = t.critical;
  const auto beyond = [higher_is_worse, value](double level) {
    return higher_is_worse ? value > level : value < level;
  };
  if (beyond(t.critical)) {
    c.status = health_status::critical;
  } else if (beyond(t.warning)) {
    c.status = health_status::warning;
  }
  const char* cmp = higher_is_worse ? ">" : "<";
  c.detail = format_number(value) + std::string(unit) + " (warning " + cmp + " " + format_number(t.warning) +
             ", critical " + cmp + " " + format_number(t.critical) + ")";
  return c;
}

}  // namespace

const health_check* health_report::find(std::string_view name) const noexcept {
  for (const health_check& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

health_report evaluate_health(const health_inputs& in, const health_thresholds& t) {
  health_report r;

  if (t.throughput_per_s) {
    if (!in.have_window) {
      r.checks.push_back(not_applicable("throughput", "needs two samples"));
    } else if (!in.backlog_sustained) {
      r.checks.push_back(not_applicable("throughput", "no sustained backlog: the rate reflects demand"));
    } else {
      r.checks.push_back(grade("throughput", in.throughput_per_s, *t.throughput_per_s, false, " jobs/s"));
    }
  }
  if (t.queue_depth) {
    r.checks.push_back(grade("queue_depth", static_cast<double>(in.queue_depth), *t.queue_depth, true, " jobs"));
  }
  if (t.error_rate) {
    if (!in.have_window || in.window_executed == 0) {
      r.checks.push_back(not_applicable("error_rate", "no jobs finished in the window"));
    } else {
      const double rate = static_cast<double>(in.window_failed) / static_cast<double>(in.window_executed);
      r.checks.push_back(grade("error_rate", rate, *t.error_rate, true, ""));
    }
  }
  if (t.utilisation) {
    if (!in.have_window || in.workers == 0) {
      r.checks.push_back(not_applicable("utilisation", "needs two samples and a worker"));
    } else {
      r.checks.push_back(grade("utilisation", in.utilisation, *t.utilisation, true, ""));
    }
  }
  if (t.wait_p99_ns) {
    if (!in.have_wait_latency) {
      r.checks.push_back(not_applicable("wait_p99", "no latency samples"));
    } else {
      r.checks.push_back(grade("wait_p99", static_cast<double>(in.wait_p99_ns), *t.wait_p99_ns, true, " ns"));
    }
  }
  if (t.stuck_after.count() > 0) {
    health_check c;
    c.name = "stuck_workers";
    c.value = static_cast<double>(in.stuck_workers);
    c.warning = 1;
    c.critical = static_cast<double>(in.workers);
    if (in.stuck_workers > 0) {
      c.status = in.workers > 0 && in.stuck_workers >= in.workers ? health_status::critical : health_status::warning;
    }
    c.detail =
        std::to_string(in.stuck_workers) + " of " + std::to_string(in.workers) +
        " workers without progress for >= " + format_number(std::chrono::duration<double>(t.stuck_after).count()) +
        " s";
    r.checks.push_back(std::move(c));
  }

  for (const health_check& c : r.checks) r.status = std::max(r.status, c.status);
  return r;
}

}  // namespace thread_system::monitoring
