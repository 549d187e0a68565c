// Real pools driven into states worth exporting, for the exposition checks:
// the strict in-repo checker (exposition_test.cpp) and Prometheus' own
// `promtool check metrics` (exposition_dump.cpp, ctest
// monitoring.promtool.*).
//
//   busy     one pool that ran, failed, dropped (backpressure::drop_oldest)
//            and token-cancelled jobs, every job timed
//   typed    a typed pool with three job types, failures in one
//   several  busy + typed + an idle pool with an awkward name, in one text
//
// No sleeps: a gate job holds the only worker while the queue is filled,
// and every wait is on a condition (wait_idle(), a future, std::latch).
#pragma once

#include <atomic>
#include <cstddef>
#include <latch>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "thread_system/monitoring/monitoring.hpp"
#include "thread_system/pools/job_types.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/thread_system.hpp"

namespace thread_system::monitoring::test {

/// Jobs queued behind the gate of the busy pool, and its queue bound.
inline constexpr std::size_t busy_capacity = 16;
inline constexpr std::size_t busy_flood = 100;
inline constexpr std::size_t busy_token_jobs = 10;

/// A report of two samples of `pool` (so rates and windows are filled).
template <typename Pool>
monitor_report report_of(const Pool& pool) {
  pool_monitor monitor{pool};
  (void)monitor.sample();
  return monitor.sample();
}

inline monitor_report busy_pool_report() {
  pool_options o;
  o.name = "busy";
  o.latency_sample_every = 1;
  o.on_error = [](std::exception_ptr) {};  // failures are counted; the output stays quiet
  o.backpressure = backpressure::drop_oldest(busy_capacity);
  thread_pool pool{1, o};

  // The gate holds the only worker, so the queue fills: flooding it past
  // the bound drops the oldest jobs, and the token jobs queued last are
  // cancelled before they start.
  std::latch started{1};
  std::latch open{1};
  if (!pool.enqueue([&] {
        started.count_down();
        open.wait();
      })) {
    throw std::runtime_error("busy scenario: gate refused");
  }
  started.wait();
  for (std::size_t i = 0; i < busy_flood; ++i) {
    if (!pool.enqueue([i] {
          if (i % 7 == 0) throw std::runtime_error("scenario failure");
        })) {
      throw std::runtime_error("busy scenario: flood refused");
    }
  }
  cancellation_source source;
  for (std::size_t i = 0; i < busy_token_jobs; ++i) {
    if (!pool.enqueue(source.token(), [] {})) throw std::runtime_error("busy scenario: token job refused");
  }
  source.cancel();
  open.count_down();
  pool.wait_idle();

  // Then steady work within the bound (nothing dropped): a queue of at
  // most busy_capacity at a time, one job in ten failing.
  for (std::size_t round = 0; round < 50; ++round) {
    for (std::size_t i = 0; i < busy_capacity; ++i) {
      if (!pool.enqueue([i] {
            if (i % 10 == 0) throw std::runtime_error("scenario failure");
          })) {
        throw std::runtime_error("busy scenario: steady job refused");
      }
    }
    pool.wait_idle();
  }
  return report_of(pool);
}

inline monitor_report typed_pool_report() {
  typed_pool_options<job_types> o;
  o.name = "typed";
  o.latency_sample_every = 1;
  o.on_error = [](std::exception_ptr) {};
  typed_thread_pool_t<job_types> pool{2, o};
  for (std::size_t i = 0; i < 600; ++i) {
    const job_types type = i % 3 == 0 ? job_types::RealTime : i % 3 == 1 ? job_types::Batch : job_types::Background;
    if (!pool.enqueue(type, [i, type] {
          if (type == job_types::Batch && i % 4 == 1) throw std::runtime_error("scenario failure");
        })) {
      throw std::runtime_error("typed scenario: job refused");
    }
  }
  pool.wait_idle();
  return report_of(pool);
}

/// A pool that never ran anything, named with every character the label
/// escaping has to handle.
inline monitor_report idle_pool_report() {
  pool_options o;
  o.name = "idle \"pool\"\\\nsecond line";
  thread_pool pool{2, o};
  return report_of(pool);
}

inline std::string busy_exposition() { return to_prometheus(busy_pool_report()); }
inline std::string typed_exposition() { return to_prometheus(typed_pool_report()); }
inline std::string several_exposition() {
  return to_prometheus(std::vector<monitor_report>{busy_pool_report(), typed_pool_report(), idle_pool_report()});
}

/// The scenarios by name ("busy", "typed", "several"); empty for others.
inline std::string exposition(std::string_view scenario) {
  if (scenario == "busy") return busy_exposition();
  if (scenario == "typed") return typed_exposition();
  if (scenario == "several") return several_exposition();
  return {};
}

}  // namespace thread_system::monitoring::test
