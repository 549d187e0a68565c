// collect(pool): reads a live pool's public observation API into a
// pool_metrics value.
//
// Works with any pool type that offers some of:
//   get_name()                 -> pool_metrics::pool_name
//   get_statistics()           -> pool_statistics (accepted, executed, ...)
//   get_workers()              -> per-worker thread_worker::get_statistics(),
//                                 get_name(), latency()
//   latency()                  -> the pool's merged wait/run histograms
//   get_type_statistics()      -> per-job-type counters and wait histogram
// Each part is detected at compile time; what a pool does not offer is left
// empty (has_latency == false, no job_types, ...).
//
// Threading: call from any thread while the pool is alive, concurrently with
// its workers and with other collectors. Nothing is stopped or locked beyond
// what the pool's own accessors do. Counters are read one by one, so two
// counters may come from slightly different moments (e.g. a job finishing
// during the read can be in `executed` but not yet in a worker's count).
// Must not be called after the pool is destroyed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "thread_system/detail/clock.hpp"
#include "thread_system/monitoring/metrics.hpp"
#include "thread_system/pools/thread_worker.hpp"

namespace thread_system::monitoring {

namespace detail {

using thread_system::detail::steady_now_ns;

[[nodiscard]] inline std::int64_t unix_now_ms() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <typename Stats>
void copy_worker_statistics(const Stats& s, worker_metrics& m) {
  m.processed = s.jobs_processed;
  m.failed = s.jobs_failed;
  m.cancelled = s.jobs_cancelled;
  m.steals = s.steals;
  m.parks = s.parks;
  m.busy_time = s.busy_time;
  m.idle_time = s.idle_time;
  if constexpr (requires { s.busy_since_ns; }) {
    m.busy_since_ns = static_cast<std::uint64_t>(s.busy_since_ns);
    m.busy_since_known = true;
  }
  const double busy = static_cast<double>(s.busy_time.count());
  const double idle = static_cast<double>(s.idle_time.count());
  m.utilisation = busy + idle > 0.0 ? busy / (busy + idle) : 0.0;
}

template <typename Worker>
void collect_worker(const Worker& w, worker_metrics& m) {
  copy_worker_statistics(w.get_statistics(), m);
  if constexpr (requires {
                  w.latency().wait;
                  w.latency().run;
                }) {
    auto l = w.latency();
    m.wait = l.wait;
    m.run = l.run;
    m.has_latency = true;
  }
}

template <typename TypeStats>
void copy_type_statistics(const TypeStats& t, job_type_metrics& m) {
  m.type_name = std::string(t.type_name);
  m.accepted = t.accepted;
  m.executed = t.executed;
  m.failed = t.failed;
  m.cancelled = t.cancelled;
  m.waiting = t.waiting;
  if constexpr (requires { t.wait.counts; }) {
    m.wait = t.wait;
    m.has_latency = true;
  }
}

}  // namespace detail

/// Per-type part of a typed pool's metrics from its get_type_statistics()
/// result (any range of records with the job_type_statistics fields).
template <typename Range>
void collect_job_types(const Range& type_statistics, pool_metrics& out) {
  out.job_types.clear();
  for (const auto& t : type_statistics) {
    job_type_metrics m;
    detail::copy_type_statistics(t, m);
    out.job_types.push_back(std::move(m));
  }
}

/// Reads `pool` into `out` (reusing its storage).
template <typename Pool>
void collect_into(const Pool& pool, pool_metrics& out) {
  out.steady_ns = detail::steady_now_ns();
  out.unix_ms = detail::unix_now_ms();
  if constexpr (requires { pool.get_name(); }) out.pool_name = std::string(pool.get_name());

  if constexpr (requires { pool.get_statistics().accepted; }) {
    const auto s = pool.get_statistics();
    out.accepted = s.accepted;
    out.executed = s.executed;
    out.failed = s.failed;
    out.cancelled = s.cancelled;
    out.queue_depth = s.queued;
    out.worker_count = s.workers;
    out.steals = s.steals;
    out.parks = s.parks;
  }

  out.has_latency = false;
  out.wait = {};
  out.run = {};
  if constexpr (requires { pool.get_workers(); }) {
    const auto workers = pool.get_workers();
    out.workers.resize(workers.size());
    for (std::size_t i = 0; i < workers.size(); ++i) {
      worker_metrics& m = out.workers[i];
      m.index = i;
      m.name = std::string(workers[i]->get_name());
      if (m.name.empty()) m.name = out.pool_name + "-" + std::to_string(i);
      detail::collect_worker(*workers[i], m);
    }
    if constexpr (!requires { pool.get_statistics().accepted; }) out.worker_count = workers.size();
  } else {
    out.workers.clear();
  }

  if constexpr (requires {
                  pool.latency().wait;
                  pool.latency().run;
                }) {
    auto l = pool.latency();
    out.wait = l.wait;
    out.run = l.run;
    out.has_latency = true;
  } else {
    for (const worker_metrics& w : out.workers) {
      if (!w.has_latency) continue;
      out.wait.merge(w.wait);
      out.run.merge(w.run);
      out.has_latency = true;
    }
  }

  if constexpr (requires { pool.get_type_statistics(); }) {
    collect_job_types(pool.get_type_statistics(), out);
  } else {
    out.job_types.clear();
  }
}

/// Reads `pool` into a new pool_metrics.
template <typename Pool>
[[nodiscard]] pool_metrics collect(const Pool& pool) {
  pool_metrics m;
  collect_into(pool, m);
  return m;
}

}  // namespace thread_system::monitoring
