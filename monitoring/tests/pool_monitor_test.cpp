// pool_monitor and collect(): exact counters against a real pool under
// concurrent load, window arithmetic with a scripted source, stuck-worker
// detection (a job blocked on a latch), the background sampler, and the
// generic per-type / per-worker collection.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

#include <unistd.h>

#include "format_checkers.hpp"
#include "support/test_support.hpp"
#include "thread_system/monitoring/monitoring.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace thread_system::monitoring {
namespace {

using namespace std::chrono_literals;

template <typename P>
constexpr bool pool_has_latency_api = requires(const P& p) { p.latency().wait; };
template <typename O>
constexpr bool options_have_sampling = requires(O o) { o.latency_sample_every = 1u; };

template <typename O>
void set_latency_sampling(O& o, std::uint32_t every) {
  if constexpr (options_have_sampling<O>) o.latency_sample_every = every;
}

pool_options quiet_options(std::string name) {
  pool_options o = thread_system::test::pool_opts(std::move(name));
  o.on_error = [](std::exception_ptr) {};  // failures are counted, not printed
  return o;
}

// A manual steady clock for exact windows.
struct manual_clock {
  std::atomic<std::uint64_t> now{1'000'000'000};
  void advance(std::chrono::nanoseconds d) {
    now.fetch_add(static_cast<std::uint64_t>(d.count()), std::memory_order_relaxed);  // test clock only
  }
  std::function<std::uint64_t()> fn() {
    return [this] { return now.load(std::memory_order_relaxed); };  // test clock only
  }
};

// ---- against a real pool --------------------------------------------------------------

TEST(PoolMonitor, CountersAreExactUnderConcurrentLoad) {
  pool_options o = quiet_options("load");
  set_latency_sampling(o, 4);
  thread_pool pool{3, o};
  monitor_options mo;
  mo.interval = 1ms;
  mo.window_samples = 8;
  pool_monitor mon{pool, mo};
  ASSERT_TRUE(mon.start());

  constexpr std::size_t producers = 4;
  const std::size_t per_producer = thread_system::test::scaled(20'000);
  std::atomic<std::uint64_t> ran{0};
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&] {
      for (std::size_t i = 0; i < per_producer; ++i) {
        const bool fail = i % 10 == 0;
        auto r = pool.enqueue([&ran, fail] {
          ran.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
          if (fail) throw std::runtime_error("expected failure");
        });
        ASSERT_TRUE(r);
      }
    });
  }
  // Readers racing the load: snapshots and exports must be safe meanwhile.
  std::thread reader([&] {
    for (int i = 0; i < 50; ++i) {
      if (auto r = mon.latest()) {
        (void)to_prometheus(*r);
        (void)to_json(*r);
      }
      (void)collect(pool);
    }
  });
  for (auto& t : threads) t.join();
  reader.join();
  pool.wait_idle();
  // The background sampler has taken a sample of its own (with a small
  // workload it may not have had a turn yet), so ours is at least the second.
  EXPECT_TRUE(thread_system::test::eventually([&] { return mon.latest().has_value(); }));

  const std::uint64_t total = producers * per_producer;
  const std::uint64_t expected_failures = producers * ((per_producer + 9) / 10);
  const monitor_report r = mon.sample();
  mon.stop();
  EXPECT_FALSE(mon.is_running());
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), total);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(r.metrics.accepted, total);
  EXPECT_EQ(r.metrics.executed, total);
  EXPECT_EQ(r.metrics.failed, expected_failures);
  EXPECT_EQ(r.metrics.cancelled, 0u);
  EXPECT_EQ(r.metrics.queue_depth, 0u);
  EXPECT_EQ(r.metrics.worker_count, 3u);
  ASSERT_EQ(r.metrics.workers.size(), 3u);
  std::uint64_t by_workers = 0;
  std::uint64_t failed_by_workers = 0;
  for (const worker_metrics& w : r.metrics.workers) {
    by_workers += w.processed;
    failed_by_workers += w.failed;
    EXPECT_FALSE(w.name.empty());
    EXPECT_GE(w.utilisation, 0.0);
    EXPECT_LE(w.utilisation, 1.0);
  }
  EXPECT_EQ(by_workers, total);
  EXPECT_EQ(failed_by_workers, expected_failures);
  EXPECT_GE(r.sample_number, 2u);
  EXPECT_EQ(r.stuck_workers, 0u);
  EXPECT_GE(r.peak_queue_depth, r.window_min_queue_depth);
  if constexpr (pool_has_latency_api<thread_pool>) {
    ASSERT_TRUE(r.metrics.has_latency);
    EXPECT_GT(r.metrics.run.count, 0u);
    EXPECT_LE(r.metrics.run.count, total);
    EXPECT_LE(r.metrics.wait.count, total);
    EXPECT_EQ(r.run.count, r.metrics.run.count);
    EXPECT_LE(r.run.p50_ns, r.run.p99_ns);
  }

  test::prometheus_checker c;
  EXPECT_TRUE(c.check(to_prometheus(r))) << c.error();
  const std::string json_text = to_json(r);
  test::json_parser p(json_text);
  EXPECT_TRUE(p.parse()) << p.error();
}

TEST(PoolMonitor, CollectNamesWorkersAndCountsASmallRun) {
  thread_pool pool{2, quiet_options("named")};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.enqueue([] {}));
  pool.wait_idle();
  const pool_metrics m = collect(pool);
  EXPECT_EQ(m.pool_name, "named");
  EXPECT_EQ(m.accepted, 100u);
  EXPECT_EQ(m.executed, 100u);
  ASSERT_EQ(m.workers.size(), 2u);
  EXPECT_EQ(m.workers[0].index, 0u);
  EXPECT_EQ(m.workers[1].name, "named-1");
  EXPECT_GT(m.steady_ns, 0u);
  EXPECT_GT(m.unix_ms, 0);
}

// Waits (bounded by the test watchdog) until exactly `n` workers are inside a
// busy stretch, so idle workers have parked and cannot look "stuck" while
// still spinning between two quick samples.
// Waits until exactly `n` workers have an open busy stretch (busy_since_ns
// != 0); fails the test after 60 s instead of hanging.
void wait_for_busy_workers(const thread_pool& pool, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    const pool_metrics m = collect(pool);
    std::size_t busy = 0;
    for (const auto& w : m.workers) busy += w.busy_since_ns != 0 ? 1 : 0;
    if (busy == n) return;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << busy << " workers busy, waited for " << n;
      return;
    }
    std::this_thread::sleep_for(1ms);
  }
}

TEST(PoolMonitor, StuckWorkerIsReportedAndClearsWhenTheJobFinishes) {
  thread_pool pool{2, quiet_options("stuck")};
  manual_clock clock;
  monitor_options mo;
  mo.clock = clock.fn();
  mo.thresholds.stuck_after = 1s;
  pool_monitor mon{pool, mo};

  std::latch started{1};
  std::latch release{1};
  ASSERT_TRUE(pool.enqueue([&] {
    started.count_down();
    release.wait();
  }));
  started.wait();
  ASSERT_TRUE(collect(pool).workers.at(0).busy_since_known) << "the core must publish busy_since_ns";
  wait_for_busy_workers(pool, 1);

  monitor_report r = mon.sample();
  EXPECT_EQ(r.stuck_workers, 0u);
  clock.advance(500ms);
  r = mon.sample();
  EXPECT_EQ(r.stuck_workers, 0u) << "0.5 s of observed no-progress is below the 1 s threshold";
  clock.advance(600ms);
  r = mon.sample();
  EXPECT_EQ(r.stuck_workers, 1u);
  std::size_t stuck_index = r.workers.size();
  for (std::size_t i = 0; i < r.workers.size(); ++i) {
    if (r.workers[i].stuck) stuck_index = i;
  }
  ASSERT_LT(stuck_index, r.workers.size());
  EXPECT_EQ(r.workers[stuck_index].no_progress_for, 1100ms);
  EXPECT_EQ(r.health.status, health_status::warning);
  ASSERT_NE(r.health.find("stuck_workers"), nullptr);
  EXPECT_EQ(r.health.find("stuck_workers")->status, health_status::warning);

  release.count_down();
  pool.wait_idle();
  // No busy stretch open (both workers parked or idle-spinning): a stretch
  // open at the next sample is a new one (the other worker may have been
  // woken meanwhile, and on a loaded machine may still be looking for work
  // when the sample is taken).
  wait_for_busy_workers(pool, 0);
  clock.advance(5s);
  r = mon.sample();
  EXPECT_EQ(r.stuck_workers, 0u) << "progress clears it";
  EXPECT_FALSE(r.workers[stuck_index].stuck);
  EXPECT_NE(r.health.find("stuck_workers")->status, health_status::warning);
}

TEST(PoolMonitor, AllWorkersStuckIsCritical) {
  thread_pool pool{2, quiet_options("all-stuck")};
  manual_clock clock;
  monitor_options mo;
  mo.clock = clock.fn();
  mo.thresholds.stuck_after = 1s;
  pool_monitor mon{pool, mo};
  std::latch started{2};
  std::latch release{1};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.enqueue([&] {
      started.count_down();
      release.wait();
    }));
  }
  started.wait();
  (void)mon.sample();
  clock.advance(2s);
  const monitor_report r = mon.sample();
  EXPECT_EQ(r.stuck_workers, 2u);
  EXPECT_EQ(r.health.status, health_status::critical);
  release.count_down();
  pool.wait_idle();
  clock.advance(2s);
  EXPECT_EQ(mon.sample().stuck_workers, 0u);
}

TEST(PoolMonitor, BackgroundSamplerDetectsAndClearsAStuckWorkerInRealTime) {
  thread_pool pool{2, quiet_options("realtime")};
  monitor_options mo;
  mo.interval = 2ms;
  mo.thresholds.stuck_after = 30ms;
  pool_monitor mon{pool, mo};
  ASSERT_TRUE(mon.start());
  EXPECT_TRUE(mon.is_running());
  EXPECT_FALSE(mon.start()) << "already started";

  std::latch started{1};
  std::latch release{1};
  ASSERT_TRUE(pool.enqueue([&] {
    started.count_down();
    release.wait();
  }));
  started.wait();
  // Liveness, not timing: the watchdog bounds these loops.
  for (;;) {
    const auto r = mon.latest();
    if (r && r->stuck_workers == 1) break;
    std::this_thread::sleep_for(1ms);
  }
  release.count_down();
  pool.wait_idle();
  for (;;) {
    const auto r = mon.latest();
    if (r && r->stuck_workers == 0) break;
    std::this_thread::sleep_for(1ms);
  }
  mon.stop();
  mon.stop();  // idempotent
  EXPECT_FALSE(mon.is_running());
  ASSERT_TRUE(mon.start()) << "restartable";
  mon.stop();
}

// ---- scripted source: exact window arithmetic ---------------------------------------------------

struct scripted {
  std::uint64_t accepted = 0, executed = 0, failed = 0, cancelled = 0, depth = 0;
  pool_monitor::collector source() {
    return [this](pool_metrics& m) {
      m.pool_name = "scripted";
      m.accepted = accepted;
      m.executed = executed;
      m.failed = failed;
      m.cancelled = cancelled;
      m.queue_depth = depth;
    };
  }
};

TEST(PoolMonitor, ThroughputErrorRateAndPeakOverTheWindow) {
  scripted s;
  manual_clock clock;
  monitor_options mo;
  mo.clock = clock.fn();
  mo.window_samples = 3;
  pool_monitor mon{s.source(), mo};
  EXPECT_FALSE(mon.latest());

  s.depth = 5;
  monitor_report r = mon.sample();
  EXPECT_EQ(r.sample_number, 1u);
  EXPECT_EQ(r.window, 0ns);
  EXPECT_EQ(r.throughput_per_s, 0.0);
  EXPECT_EQ(r.peak_queue_depth, 5u);

  clock.advance(1s);
  s.accepted = 1200;
  s.executed = 1000;
  s.failed = 10;
  s.depth = 300;
  r = mon.sample();
  EXPECT_EQ(r.window, 1s);
  EXPECT_DOUBLE_EQ(r.throughput_per_s, 1000.0);
  EXPECT_DOUBLE_EQ(r.accept_rate_per_s, 1200.0);
  EXPECT_DOUBLE_EQ(r.error_rate, 0.01);
  EXPECT_EQ(r.peak_queue_depth, 300u);

  clock.advance(1s);
  s.executed = 3000;
  s.cancelled = 100;
  s.failed = 10;
  s.depth = 2;
  r = mon.sample();
  EXPECT_EQ(r.window, 2s);
  EXPECT_DOUBLE_EQ(r.throughput_per_s, 1550.0);  // (3000 + 100) / 2 s
  EXPECT_EQ(r.window_executed, 3000u);
  EXPECT_EQ(r.peak_queue_depth, 300u) << "peak since the monitor started";
  EXPECT_EQ(r.window_min_queue_depth, 2u);

  clock.advance(1s);  // the ring holds 3: the first sample falls out
  s.executed = 4000;
  r = mon.sample();
  EXPECT_EQ(r.window, 2s);
  EXPECT_DOUBLE_EQ(r.throughput_per_s, (4100.0 - 1000.0) / 2.0);
  EXPECT_EQ(r.window_failed, 0u);
  EXPECT_EQ(r.window_min_queue_depth, 2u);
  ASSERT_TRUE(mon.latest());
  EXPECT_EQ(mon.latest()->sample_number, 4u);
}

// start() and stop() from two threads at once: every stop() returns (a
// start() between a stop()'s request and its join cleared the request, the
// old sampler never left and stop() waited for ever - the watchdog fails
// it), and the monitor ends stopped.
TEST(PoolMonitor, StartAndStopRacingEndInOneStateWithNoSamplerLeft) {
  scripted s;
  monitor_options mo;
  mo.interval = 1ms;
  pool_monitor mon{s.source(), mo};
  std::atomic<bool> quit{false};
  std::thread starter([&] {
    while (!quit.load(std::memory_order_relaxed)) (void)mon.start();  // a stop flag only
  });
  thread_system::test::round_budget budget(thread_system::test::scaled(2000), 200, std::chrono::seconds(2));
  for (std::size_t i = 0; budget.next(i); ++i) {
    (void)mon.start();
    mon.stop();
  }
  quit.store(true, std::memory_order_relaxed);
  starter.join();
  mon.stop();
  EXPECT_FALSE(mon.is_running());
  EXPECT_GE(budget.ran(), 1u);
}

// An interval near nanoseconds::max() waits (saturated) instead of
// overflowing into the past: the sampler took thousands of samples a second.
TEST(PoolMonitor, AHugeIntervalSamplesOnce) {
  std::atomic<int> calls{0};
  monitor_options mo;
  mo.interval = std::chrono::nanoseconds::max();
  pool_monitor mon{[&calls](pool_metrics& m) {
                     m.accepted = 1;
                     calls.fetch_add(1, std::memory_order_relaxed);  // a count only
                   },
                   mo};
  ASSERT_TRUE(mon.start());
  std::this_thread::sleep_for(100ms);
  mon.stop();
  EXPECT_LE(calls.load(std::memory_order_relaxed), 1);
}

// A sample whose collector throws is lost whole: latest() keeps the report
// before it (the collector had written into it, so latest() mixed the two).
TEST(PoolMonitor, ASampleThatThrowsLeavesTheLatestReportAsItWas) {
  int call = 0;
  pool_monitor mon{[&call](pool_metrics& m) {
                     ++call;
                     m.accepted = static_cast<std::uint64_t>(call) * 10;
                     if (call == 2) throw std::runtime_error("collector failed part-way");
                   },
                   monitor_options{}};
  const monitor_report first = mon.sample();
  EXPECT_THROW((void)mon.sample(), std::runtime_error);
  const auto latest = mon.latest();
  ASSERT_TRUE(latest);
  EXPECT_EQ(latest->sample_number, first.sample_number);
  EXPECT_EQ(latest->metrics.accepted, 10u);
  const monitor_report third = mon.sample();
  EXPECT_EQ(third.metrics.accepted, 30u);
  EXPECT_EQ(third.sample_number, first.sample_number + 1);
}

// stop() from the collector (the sampler thread) ends the sampling and
// returns; the next stop() joins the sampler (it joined itself:
// std::terminate).
TEST(PoolMonitor, StopFromTheCollectorEndsSampling) {
  pool_monitor* self = nullptr;
  std::atomic<int> calls{0};
  monitor_options mo;
  mo.interval = 1ms;
  pool_monitor mon{[&](pool_metrics& m) {
                     m.accepted = 1;
                     // relaxed: a count; self is set before start()
                     if (calls.fetch_add(1, std::memory_order_relaxed) == 1) self->stop();
                   },
                   mo};
  self = &mon;
  ASSERT_TRUE(mon.start());
  while (mon.is_running()) std::this_thread::sleep_for(1ms);
  const auto start_on_stopping = mon.start();  // joins the leaving sampler, starts anew
  EXPECT_TRUE(start_on_stopping) << start_on_stopping.error().to_string();
  mon.stop();
  EXPECT_FALSE(mon.is_running());
  EXPECT_GE(calls.load(std::memory_order_relaxed), 2);
}

// The collector called by a sample() on a user thread, while the
// background sampler runs, calls back into its monitor: latest() returns the
// previous sample, health() its health, sample() and start() are refused,
// stop() ends the sampling. (latest(), health() and sample() relocked the
// sample's mutex: a hang; stop() joined the sampler, which waited for that
// mutex: a deadlock.) In a child process with an alarm, so a hang fails.
int collector_reentry_scenario() {
  pool_monitor* self = nullptr;
  std::atomic<bool> reenter{false};
  const std::thread::id caller = std::this_thread::get_id();
  bool ok = true;
  monitor_options mo;
  mo.interval = 1ms;
  pool_monitor mon{[&](pool_metrics& m) {
                     m.accepted = 1;
                     // relaxed: set by this same thread before its sample() call
                     if (!reenter.load(std::memory_order_relaxed) || std::this_thread::get_id() != caller) return;
                     ok = ok && self->latest().has_value();
                     (void)self->health();
                     try {
                       (void)self->sample();
                       ok = false;
                     } catch (const error_exception& e) {
                       ok = ok && e.code() == error_code::invalid_argument;
                     }
                     const auto started = self->start();
                     ok = ok && !started && started.error().code() == error_code::invalid_argument;
                     self->stop();
                   },
                   mo};
  self = &mon;
  if (!mon.start()) return 2;
  while (!mon.latest()) std::this_thread::sleep_for(1ms);
  reenter.store(true, std::memory_order_relaxed);  // relaxed: read by this thread only
  (void)mon.sample();
  reenter.store(false, std::memory_order_relaxed);
  if (!ok) return 3;
  if (mon.is_running()) return 4;
  if (!mon.start()) return 5;  // joins the leaving sampler, starts anew
  mon.stop();
  return 0;
}

// Runs `scenario` in a fresh process (re-executed: this one has threads,
// and ThreadSanitizer refuses new threads after a multi-threaded fork) with
// an alarm, so a hang fails; it must return 0.
void expect_zero_in_a_child(int (*scenario)()) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::alarm(60);
        std::_Exit(scenario());
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(PoolMonitor, TheCollectorMayCallItsMonitorFromAUserThread) { expect_zero_in_a_child(&collector_reentry_scenario); }

// health() from the collector before any sample would need a sample inside
// this one: refused, and the outer call throws it. (It relocked the
// sample's mutex: a hang; in a child process with an alarm.)
int health_before_first_sample_scenario() {
  pool_monitor* self = nullptr;
  pool_monitor mon{[&](pool_metrics&) { (void)self->health(); }, monitor_options{}};
  self = &mon;
  try {
    (void)mon.health();
    return 2;
  } catch (const error_exception& e) {
    if (e.code() != error_code::invalid_argument) return 3;
  }
  return mon.latest().has_value() ? 4 : 0;
}

TEST(PoolMonitor, HealthFromTheCollectorBeforeTheFirstSampleIsRefused) {
  expect_zero_in_a_child(&health_before_first_sample_scenario);
}

// A collector that samples another monitor, whose collector uses the first:
// the first still knows it is inside its own sample (latest() returns the
// previous sample, sample() is refused, stop() only ends the sampling).
// (Only the innermost sampling monitor was known: the first relocked its
// own mutex - a hang; in a child process with an alarm.)
int nested_collectors_scenario() {
  pool_monitor* outer_self = nullptr;
  bool ok = true;
  bool nested = false;
  pool_monitor inner{[&](pool_metrics& m) {
                       m.accepted = 2;
                       if (!nested) return;
                       ok = ok && outer_self->latest().has_value();
                       (void)outer_self->health();
                       try {
                         (void)outer_self->sample();
                         ok = false;
                       } catch (const error_exception& e) {
                         ok = ok && e.code() == error_code::invalid_argument;
                       }
                       outer_self->stop();
                     },
                     monitor_options{}};
  pool_monitor outer{[&](pool_metrics& m) {
                       m.accepted = 1;
                       if (nested) (void)inner.sample();
                     },
                     monitor_options{}};
  outer_self = &outer;
  (void)outer.sample();  // a previous sample for latest()
  nested = true;
  (void)outer.sample();
  nested = false;
  if (!ok) return 2;
  return outer.latest()->sample_number == 2 ? 0 : 3;
}

TEST(PoolMonitor, ACollectorMayUseItsMonitorThroughAnotherMonitorsCollector) {
  expect_zero_in_a_child(&nested_collectors_scenario);
}

// The collector fills a default pool_metrics every time: a field it sets
// only sometimes does not come back from the report before the latest.
// (It was handed that report's metrics: workers pushed once reappeared two
// samples later, and accumulated.)
TEST(PoolMonitor, TheCollectorGetsADefaultReportToFill) {
  int call = 0;
  pool_monitor mon{[&call](pool_metrics& m) {
                     ++call;
                     m.workers.push_back(worker_metrics{});
                     if (call == 1) m.queue_depth = 7;
                   },
                   monitor_options{}};
  for (int i = 0; i < 5; ++i) {
    const monitor_report r = mon.sample();
    EXPECT_EQ(r.metrics.workers.size(), 1u) << "sample " << i + 1;
    EXPECT_EQ(r.metrics.queue_depth, i == 0 ? 7u : 0u) << "sample " << i + 1;
  }
}

// Shares are over the pool's current workers: after resize() down,
// get_workers() still lists the removed workers (not busy), and a pool
// whose one current worker is busy and stuck reads fully utilised and
// critical. (They were divided by every listed worker: 25 % and "1 of 4
// stuck", a warning.) A scripted source: 4 listed, 1 current.
TEST(PoolMonitor, SharesAreOverThePoolsCurrentWorkersNotEveryWorkerListed) {
  manual_clock clock;
  std::uint64_t busy_ns = 0;
  monitor_options mo;
  mo.clock = clock.fn();
  mo.thresholds.stuck_after = 1s;
  pool_monitor mon{[&](pool_metrics& m) {
                     m.worker_count = 1;
                     m.workers.resize(4);
                     m.workers[0].busy_time = std::chrono::nanoseconds(busy_ns);
                     m.workers[0].busy_since_known = true;
                     m.workers[0].busy_since_ns = 1;  // one stretch, no job completed
                   },
                   mo};
  (void)mon.sample();
  clock.advance(2s);
  busy_ns += 2'000'000'000;  // busy for the whole interval
  const monitor_report r = mon.sample();
  EXPECT_DOUBLE_EQ(r.recent_utilisation, 1.0);
  EXPECT_EQ(r.stuck_workers, 1u);
  EXPECT_EQ(r.health.status, health_status::critical);
}

// A real pool after resize(4 -> 1): the collector reports one current worker
// and four listed.
TEST(PoolMonitor, CollectReportsTheCurrentWorkersAfterAResizeDown) {
  thread_pool pool{4, quiet_options("resized")};
  ASSERT_TRUE(pool.resize(1));
  pool_metrics m;
  collect_into(pool, m);
  EXPECT_EQ(m.worker_count, 1u);
  EXPECT_EQ(m.workers.size(), 4u);
}

TEST(PoolMonitor, RejectsInvalidOptions) {
  scripted s;
  monitor_options bad_window;
  bad_window.window_samples = 1;
  EXPECT_THROW((pool_monitor{s.source(), bad_window}), error_exception);
  monitor_options bad_interval;
  bad_interval.interval = 0ns;
  EXPECT_THROW((pool_monitor{s.source(), bad_interval}), error_exception);
  // A history no machine can hold: refused, not a raw std::length_error or
  // std::bad_alloc.
  for (const std::size_t window : {monitor_options::max_window_samples + 1, std::size_t{1} << 40, SIZE_MAX}) {
    monitor_options huge_window;
    huge_window.window_samples = window;
    try {
      pool_monitor refused{s.source(), huge_window};
      ADD_FAILURE() << "window_samples " << window << " was accepted";
    } catch (const error_exception& e) {
      EXPECT_EQ(e.code(), error_code::invalid_argument) << window;
    } catch (...) {
      ADD_FAILURE() << "window_samples " << window << ": not an error_exception";
    }
  }
  EXPECT_THROW((pool_monitor{pool_monitor::collector{}, monitor_options{}}), error_exception);
}

TEST(PoolMonitor, PoolLabelOverridesTheName) {
  scripted s;
  monitor_options mo;
  mo.pool_label = "frontend";
  pool_monitor mon{s.source(), mo};
  EXPECT_EQ(mon.sample().metrics.pool_name, "frontend");
}

// ---- generic collection: any pool shape --------------------------------------------------------

struct fake_type_statistics {
  std::string type_name;
  std::uint64_t accepted = 0, executed = 0, failed = 0, cancelled = 0, waiting = 0;
  histogram_snapshot wait;
};

struct fake_latency {
  histogram_snapshot wait;
  histogram_snapshot run;
};

struct fake_worker {
  std::string name;
  latency_histogram wait_h, run_h;
  std::uint64_t busy_since = 0;
  std::uint64_t done = 0;
  [[nodiscard]] const std::string& get_name() const { return name; }
  [[nodiscard]] worker_statistics get_statistics() const {
    worker_statistics s;
    s.jobs_processed = done;
    s.busy_time = 3ms;
    s.idle_time = 1ms;
    s.busy_since_ns = busy_since;
    return s;
  }
  [[nodiscard]] fake_latency latency() const { return {wait_h.snapshot(), run_h.snapshot()}; }
};

struct fake_typed_pool {
  std::vector<fake_worker*> workers;
  [[nodiscard]] std::string get_name() const { return "typed"; }
  [[nodiscard]] std::vector<fake_worker*> get_workers() const { return workers; }
  [[nodiscard]] std::vector<fake_type_statistics> get_type_statistics() const {
    fake_type_statistics high{"high", 10, 8, 1, 0, 2, {}};
    latency_histogram h;
    h.record(1'000);
    h.record(3'000);
    high.wait = h.snapshot();
    return {high, fake_type_statistics{"low", 5, 5, 0, 0, 0, {}}};
  }
};

TEST(Collect, GenericPoolWithTypesAndWorkerLatency) {
  fake_worker a{"a", {}, {}, 0, 4};
  fake_worker b{"", {}, {}, 123, 6};
  a.wait_h.record(100);
  a.run_h.record(2'000);
  b.wait_h.record(300);
  b.run_h.record(4'000);
  fake_typed_pool pool{{&a, &b}};
  const pool_metrics m = collect(pool);
  EXPECT_EQ(m.pool_name, "typed");
  EXPECT_EQ(m.worker_count, 2u) << "from get_workers() when there is no get_statistics()";
  ASSERT_EQ(m.workers.size(), 2u);
  EXPECT_EQ(m.workers[0].name, "a");
  EXPECT_EQ(m.workers[1].name, "typed-1");
  EXPECT_TRUE(m.workers[1].busy_since_known);
  EXPECT_EQ(m.workers[1].busy_since_ns, 123u);
  EXPECT_DOUBLE_EQ(m.workers[0].utilisation, 0.75);
  ASSERT_TRUE(m.has_latency) << "merged from the workers";
  EXPECT_EQ(m.wait.count, 2u);
  EXPECT_EQ(m.run.max, 4'000u);
  ASSERT_EQ(m.job_types.size(), 2u);
  EXPECT_EQ(m.job_types[0].type_name, "high");
  EXPECT_EQ(m.job_types[0].waiting, 2u);
  EXPECT_TRUE(m.job_types[0].has_latency);
  EXPECT_EQ(m.job_types[0].wait.count, 2u);
  EXPECT_EQ(m.job_types[1].executed, 5u);

  // Stuck detection through the generic path, with a manual clock.
  manual_clock clock;
  monitor_options mo;
  mo.clock = clock.fn();
  mo.thresholds.stuck_after = 1s;
  pool_monitor mon{pool, mo};
  (void)mon.sample();
  clock.advance(1s);
  monitor_report r = mon.sample();
  EXPECT_FALSE(r.workers[0].stuck) << "parked (busy_since 0)";
  EXPECT_TRUE(r.workers[1].stuck);
  b.done = 7;  // progress
  clock.advance(1s);
  r = mon.sample();
  EXPECT_FALSE(r.workers[1].stuck);
  clock.advance(1s);
  r = mon.sample();
  EXPECT_TRUE(r.workers[1].stuck) << "no progress again for 1 s";
  b.busy_since = 0;  // parked
  r = mon.sample();
  EXPECT_FALSE(r.workers[1].stuck);

  test::prometheus_checker c;
  const auto doc = c.check(to_prometheus(r));
  ASSERT_TRUE(doc) << c.error();
  EXPECT_EQ(doc->value("thread_system_job_type_waiting", {{"pool", "typed"}, {"type", "high"}}), 2.0);
}

}  // namespace
}  // namespace thread_system::monitoring
