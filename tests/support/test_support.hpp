// Helpers shared by the test suites.
#pragma once

#if defined(__linux__)
#include <sched.h>
#endif
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "thread_system/pools/thread_pool.hpp"

namespace thread_system::test {

/// Divides iteration counts in slow builds (sanitizers), never to zero.
/// THREAD_SYSTEM_TEST_SCALE_DIVISOR is set by the asan/tsan presets.
#ifndef THREAD_SYSTEM_TEST_SCALE_DIVISOR
#define THREAD_SYSTEM_TEST_SCALE_DIVISOR 1
#endif
constexpr std::size_t scale_divisor = THREAD_SYSTEM_TEST_SCALE_DIVISOR;
constexpr std::size_t scaled(std::size_t n) { return n / scale_divisor == 0 ? 1 : n / scale_divisor; }

/// A stress loop's stopping rule: at most `rounds` rounds, and once
/// `min_rounds` have run, no new round after `budget` has passed. A round
/// that hands work between threads costs whole scheduler time slices when
/// threads outnumber free cores, so a fixed count that takes a second on an
/// idle machine can outlast the watchdog on a loaded one. Tests assert on
/// the rounds that ran (`ran()`), and a real hang is still caught by the
/// watchdog, since a round in progress is never cut short.
///
///   test::round_budget budget(scaled(100'000));
///   for (std::size_t i = 0; budget.next(i); ++i) { ... }
///   EXPECT_EQ(count, budget.ran());
class round_budget {
 public:
  explicit round_budget(std::size_t rounds, std::size_t min_rounds = 2'000,
                        std::chrono::milliseconds budget = std::chrono::seconds(15))
      : rounds_(rounds),
        min_rounds_(min_rounds < rounds ? min_rounds : rounds),
        deadline_(std::chrono::steady_clock::now() + budget) {}

  /// Whether round `i` (counting from 0, called for every i in order) runs.
  bool next(std::size_t i) {
    if (i < rounds_ && (i < min_rounds_ || i % 64 != 0 || std::chrono::steady_clock::now() < deadline_)) return true;
    ran_ = i;
    if (i < rounds_) std::printf("round_budget: time budget spent after %zu of %zu rounds\n", i, rounds_);
    return false;
  }
  /// Rounds run (valid once next() returned false).
  [[nodiscard]] std::size_t ran() const noexcept { return ran_; }

 private:
  std::size_t rounds_;
  std::size_t min_rounds_;
  std::chrono::steady_clock::time_point deadline_;
  std::size_t ran_ = 0;
};

#if defined(__linux__)
/// The first CPU this process may run on (a container's cpuset need not
/// include CPU 0); -1 when it cannot be read.
inline int first_allowed_cpu() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) return cpu;
  }
  return -1;
}

/// True when the calling thread may run on `cpu` and on no other CPU.
inline bool pinned_to_only(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return false;
  return CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set);
}
#endif

/// Polls `pred` every millisecond until it holds or `limit` passes; returns
/// its last value. For waiting on something another thread will do, so that
/// a slow machine delays the test instead of failing it, while a condition
/// that never comes fails after `limit` instead of hanging.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

/// The injector queue the pool tests run with: THREAD_SYSTEM_TEST_POOL_QUEUE
/// (mutex, lockfree, adaptive, sharded; default mutex). CTest registers the
/// pool suites once per kind, so every guarantee is checked for every queue.
inline pool_queue pool_queue_under_test() {
  const char* env = std::getenv("THREAD_SYSTEM_TEST_POOL_QUEUE");
  if (env == nullptr) return pool_queue::mutex;
  for (auto q : {pool_queue::mutex, pool_queue::lockfree, pool_queue::adaptive, pool_queue::sharded}) {
    if (std::strcmp(env, to_string(q)) == 0) return q;
  }
  std::abort();  // a typo in the test configuration must not silently test the default
}

/// pool_options for a pool under test.
inline pool_options pool_opts(std::string name = "thread_pool") {
  pool_options o;
  o.name = std::move(name);
  o.queue = pool_queue_under_test();
  return o;
}

/// Counts constructions, destructions and invocations of the functors that
/// share it, to prove each job ran at most once and every capture died once.
struct lifetime_tracker {
  std::atomic<std::int64_t> constructed{0};
  std::atomic<std::int64_t> destroyed{0};
  std::atomic<std::int64_t> invoked{0};

  [[nodiscard]] std::int64_t alive() const {
    return constructed.load(std::memory_order_acquire) - destroyed.load(std::memory_order_acquire);
  }
};

/// A callable that reports its lifetime to a tracker. Copies and moves count
/// as constructions, so constructed == destroyed means nothing leaked and
/// nothing was destroyed twice (a double destroy would make alive() < 0).
class counting_functor {
 public:
  explicit counting_functor(lifetime_tracker& t) : tracker_(&t) {
    tracker_->constructed.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  }
  counting_functor(const counting_functor& o) : tracker_(o.tracker_) {
    tracker_->constructed.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  }
  counting_functor(counting_functor&& o) noexcept : tracker_(o.tracker_) {
    tracker_->constructed.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  }
  counting_functor& operator=(const counting_functor&) = delete;
  counting_functor& operator=(counting_functor&&) = delete;
  ~counting_functor() {
    tracker_->destroyed.fetch_add(1, std::memory_order_release);  // pairs with alive()'s acquire
  }
  void operator()() const {
    tracker_->invoked.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  }

 private:
  lifetime_tracker* tracker_;
};

/// Occupies a pool's only worker until released (a job that sleeps until
/// let_go()); hold() returns once the job runs.
struct worker_blocker {
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  void hold(thread_pool& pool) {
    auto r = pool.enqueue([this] {
      started.store(true, std::memory_order_release);  // pairs with the acquire in eventually()
      while (!release.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(100));
    });
    if (!r || !eventually([this] { return started.load(std::memory_order_acquire); })) {
      std::fprintf(stderr, "worker_blocker: the blocking job did not start\n");
      std::abort();
    }
  }
  void let_go() { release.store(true, std::memory_order_release); }  // pairs with the loop above
};

/// A timer function whose destruction (on the timer thread, once its run is
/// refused or has run) holds that thread until `gate` opens, after saying so
/// through `holding`, and then sets `released`; moved-from copies do nothing.
struct holds_the_timer_thread {
  std::latch* holding;
  std::latch* gate;
  std::atomic<bool>* released;
  bool armed = true;
  holds_the_timer_thread(std::latch* h, std::latch* g, std::atomic<bool>* r) : holding(h), gate(g), released(r) {}
  holds_the_timer_thread(holds_the_timer_thread&& o) noexcept
      : holding(o.holding), gate(o.gate), released(o.released), armed(std::exchange(o.armed, false)) {}
  holds_the_timer_thread& operator=(holds_the_timer_thread&&) = delete;
  holds_the_timer_thread(const holds_the_timer_thread&) = delete;
  holds_the_timer_thread& operator=(const holds_the_timer_thread&) = delete;
  void operator()() const {}
  ~holds_the_timer_thread() {
    if (!armed) return;
    holding->count_down();
    gate->wait();
    released->store(true, std::memory_order_release);  // pairs with the test's acquire: the latches are done with
  }
};

/// Holds a pool's only worker inside a job until release(); the
/// constructor returns once the job runs.
struct held_worker {
  std::latch started{1};
  std::latch gate{1};
  explicit held_worker(thread_pool& pool) {
    if (!pool.enqueue([this] {
          started.count_down();
          gate.wait();
        })) {
      std::fprintf(stderr, "held_worker: the holding job was refused\n");
      std::abort();
    }
    started.wait();
  }
  void release() { gate.count_down(); }
};

/// Makes `pool` (one worker) unavailable - its worker held, or the pool
/// paused - runs `call` from this thread, frees the pool and waits until it
/// is idle (its worker has popped whatever was queued). Returns whether a
/// watchdog had to free the pool for `call` to return: the call waited for
/// the pool (the watchdog lets a failing build end rather than hang).
template <typename F>
bool call_needed_the_pool(thread_pool& pool, bool paused, F call) {
  worker_blocker blocker;
  if (paused) {
    pool.pause();
  } else {
    blocker.hold(pool);
  }
  std::atomic<bool> returned{false};
  std::atomic<bool> freed_by_watchdog{false};
  std::thread watchdog([&] {
    if (eventually([&] { return returned.load(std::memory_order_acquire); })) return;
    freed_by_watchdog.store(true, std::memory_order_release);
    blocker.let_go();
    pool.resume();
  });
  call();
  returned.store(true, std::memory_order_release);  // pairs with the watchdog's load
  watchdog.join();
  blocker.let_go();
  pool.resume();
  pool.wait_idle();
  return freed_by_watchdog.load(std::memory_order_acquire);
}
/// The error code a future's get() throws (error_code::ok when it returns).
template <typename T>
error_code error_code_of(future<T>& f) {
  try {
    (void)f.get();
  } catch (const error_exception& e) {
    return e.code();
  }
  return error_code::ok;
}

/// CPU time this process has used (user + system), seconds.
inline double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// Whether `f()` throws error_exception{cancelled}.
inline bool throws_cancelled(const std::function<void()>& f) {
  try {
    f();
  } catch (const error_exception& e) {
    return e.code() == error_code::cancelled;
  }
  return false;
}

}  // namespace thread_system::test
