// Timers as values: what a timer's function receives (timer_tick), a
// timer's handle (timer_handle), the counters (timer_statistics), and the
// building of a timer from a delay, a time point or a period with every check
// on the caller's input. A timer runs once it is on a timer_queue
// (scheduler/timer_queue.hpp, which has the whole timer contract) or on a
// pool's timers (thread_pool::schedule_after() and friends, which put it on
// the pool's own queue, created out of line on first use). This header is
// what the pool headers need: it holds no thread, lock or heap.
//
// Building (detail::timer_after / timer_at / timer_every, used by
// timer_queue and the pools alike) checks the input exactly as the contract
// says: an empty function, a negative or NaN delay, a zero, negative or NaN
// period is invalid_argument (a positive period shorter than the steady
// clock's tick is rounded up to one tick); delays and periods too long for the steady clock
// saturate to "never"; out of memory is resource_exhausted. Nothing is
// scheduled by building.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/functional.hpp"

namespace thread_system {

/// What a timer's function may receive: the due time of this run and its
/// index k on the timer's grid (0 for one-shot timers).
struct timer_tick {
  /// When this run was due on the timer's grid (steady_clock).
  std::chrono::steady_clock::time_point scheduled_time{};
  /// Which run this is: k for run k of a periodic timer (first_due + k * period); 0 for a one-shot timer.
  std::uint64_t index = 0;
};

/// Counters of a timer_queue (each one monotonic).
struct timer_statistics {
  std::uint64_t scheduled = 0;        ///< Timers accepted by schedule_*().
  std::uint64_t fired = 0;            ///< Runs whose function started.
  std::uint64_t cancelled = 0;        ///< Timers ended before all their runs: cancel(), stop, refusal, discard.
  std::uint64_t skipped_periods = 0;  ///< Periodic due times passed over (run in flight, lateness, queue_full).
  std::uint64_t refused = 0;          ///< Runs the target refused.
  std::uint64_t pending = 0;          ///< Timers waiting in the heap now (not counting runs in flight).
  std::uint64_t wakeups = 0;          ///< Times the timer thread woke up (a measure of its CPU use).
};

/// Where due runs go: returns success when it took the job, an error (the
/// job_function left untouched) when it refused it.
using timer_dispatch = std::function<result<void>(job_function&&)>;

/// Which of a target's queues a timer's runs go to (a typed pool's job
/// type, say): given to schedule_*() and handed back with every run.
struct timer_route {
  std::uint32_t id = 0;  ///< Chosen by the target; 0 for timers scheduled without a route.
};

/// A dispatch target with several queues: receives each run with its
/// timer's route. Refusal as for timer_dispatch.
using timer_routed_dispatch = std::function<result<void>(job_function&&, timer_route)>;

namespace detail {

struct timer_core;

// One timer. The schedule fields are guarded by the core's mutex; status
// is an atomic shared with the runs and the handles.
class timer_entry : public std::enable_shared_from_this<timer_entry> {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::size_t not_in_heap = static_cast<std::size_t>(-1);

  // status: who owns the function object.
  static constexpr std::uint32_t pending = 0;    // waiting; the next run (or cancel) takes it
  static constexpr std::uint32_t running = 1;    // a run is executing it
  static constexpr std::uint32_t done = 2;       // a one-shot ran; destroyed
  static constexpr std::uint32_t cancelled = 3;  // no run will start again

  timer_entry(clock::time_point first_due, clock::duration every) noexcept : due(first_due), period(every) {}
  timer_entry(const timer_entry&) = delete;
  timer_entry& operator=(const timer_entry&) = delete;
  virtual ~timer_entry() = default;

  virtual void invoke(const timer_tick& tick) = 0;
  virtual void destroy_callable() noexcept = 0;

  [[nodiscard]] bool periodic() const noexcept { return period.count() > 0; }

  // Takes the timer to `cancelled` if a run can still start; destroys the
  // function when no run holds it. True when this call cancelled it (the
  // caller counts it and removes it from the heap).
  bool try_cancel() noexcept {
    std::uint32_t s = status.load(std::memory_order_acquire);  // pairs with the release CASes of runs
    for (;;) {
      if (s == pending) {
        // acq_rel: we take ownership of the function from the last run
        // (acquire) and publish the cancellation to the next one (release).
        if (status.compare_exchange_weak(s, cancelled, std::memory_order_acq_rel, std::memory_order_acquire)) {
          destroy_callable();
          return true;
        }
      } else if (s == running && periodic()) {
        // The running run keeps the function and destroys it when it ends.
        if (status.compare_exchange_weak(s, cancelled, std::memory_order_acq_rel, std::memory_order_acquire)) {
          return true;
        }
      } else {
        return false;  // done, cancelled, or a one-shot already running
      }
    }
  }

  clock::time_point due;                 // guarded by the core's mutex
  const clock::duration period;          // zero: one-shot
  std::uint64_t index = 0;               // guarded by the core's mutex
  std::uint64_t seq = 0;                 // guarded by the core's mutex
  std::size_t heap_index = not_in_heap;  // guarded by the core's mutex
  // A timer whose run is in flight (dispatched; a periodic one until its
  // run ends, a one-shot one until its run starts) is out of the heap and
  // on one of the core's in-flight lists (guarded by its mutex).
  timer_entry* flight_prev = nullptr;
  timer_entry* flight_next = nullptr;
  bool in_flight = false;
  timer_route route{};  // set before the entry is shared; handed to the target with each run
  std::atomic<std::uint32_t> status{pending};
  // Set before the entry is shared: runs re-arm and count through it, a
  // handle cancels through it. Once the queue is gone nothing is counted.
  std::weak_ptr<timer_core> core;
};

template <typename F>
class timer_entry_impl final : public timer_entry {
 public:
  template <typename G>
  timer_entry_impl(G&& g, clock::time_point first_due, clock::duration every)
      : timer_entry(first_due, every), fn_(std::in_place, std::forward<G>(g)) {}

  void invoke(const timer_tick& tick) override {
    // A returned error is thrown, as from a job (job_function.hpp).
    if constexpr (std::is_invocable_v<F&, const timer_tick&>) {
      detail::invoke_job(*fn_, tick);
    } else {
      detail::invoke_job(*fn_);
    }
  }
  void destroy_callable() noexcept override { fn_.reset(); }

 private:
  std::optional<F> fn_;
};

}  // namespace detail

/// Cancels one timer; copyable (copies refer to the same timer). An empty
/// (default-constructed) handle refers to none.
class timer_handle {
 public:
  /// An empty handle: refers to no timer.
  timer_handle() noexcept = default;

  /// Prevents every run that has not started. True when that prevented at
  /// least one (see the header). False when already cancelled, a one-shot
  /// timer already started, or the handle is empty.
  bool cancel() noexcept;

  /// True while a run of this timer can still start.
  [[nodiscard]] bool is_active() const noexcept;

  /// True when the handle refers to a timer (not default-constructed).
  explicit operator bool() const noexcept { return entry_ != nullptr; }

 private:
  friend class timer_queue;
  explicit timer_handle(std::shared_ptr<detail::timer_entry> e) noexcept : entry_(std::move(e)) {}

  std::shared_ptr<detail::timer_entry> entry_;  // its queue: entry_->core
};

namespace detail {

// NaN and negative delays are refused; too long ones saturate (see the header).
template <typename Rep, typename Period>
[[nodiscard]] result<void> check_timer_delay(std::chrono::duration<Rep, Period> d, const char* what) {
  switch (classify(d)) {
    case duration_kind::nan:
      return make_error(error_code::invalid_argument, std::string("timer_queue: the ") + what + " is not a number");
    case duration_kind::negative:
      return make_error(error_code::invalid_argument, std::string("timer_queue: negative ") + what);
    case duration_kind::zero:
    case duration_kind::positive:
    case duration_kind::too_long:  // saturates to "never"
      return {};
  }
  return {};
}

// Now plus `d` on the steady clock, saturating at time_point::max() ("never").
template <typename Rep, typename Period>
[[nodiscard]] std::chrono::steady_clock::time_point timer_due_after(std::chrono::duration<Rep, Period> d) noexcept {
  return saturating_add(std::chrono::steady_clock::now(), to_clock_duration(d));
}

// A built timer, or why it was refused.
using built_timer = result<std::shared_ptr<timer_entry>>;

// A timer that runs `f` first at `due`, then every `period` (zero: once),
// its runs handed over with `route`.
template <typename F>
[[nodiscard]] built_timer make_timer(timer_route route, std::chrono::steady_clock::time_point due,
                                     std::chrono::steady_clock::duration period, F&& f) {
  using D = std::decay_t<F>;
  static_assert(std::is_invocable_v<D&, const timer_tick&> || std::is_invocable_v<D&>,
                "a timer function is invocable as f() or f(const timer_tick&)");
  if (is_empty_callable(f)) return make_error(error_code::invalid_argument, "timer_queue: empty function");
  std::shared_ptr<timer_entry> e;
  try {
    e = std::make_shared<timer_entry_impl<D>>(std::forward<F>(f), due, period);
  } catch (const std::bad_alloc&) {
    return out_of_memory_error();
  }
  e->route = route;
  return e;
}

// Runs `f` once, `delay` from now.
template <typename Rep, typename Period, typename F>
[[nodiscard]] built_timer timer_after(timer_route route, std::chrono::duration<Rep, Period> delay, F&& f) {
  return refuse_if_out_of_memory([&]() -> built_timer {
    if (auto r = check_timer_delay(delay, "delay"); !r) return unexpected_error{std::move(r).error()};
    return make_timer(route, timer_due_after(delay), std::chrono::steady_clock::duration::zero(), std::forward<F>(f));
  });
}

// Runs `f` once at `when` (at once if that has passed).
template <typename Duration, typename F>
[[nodiscard]] built_timer timer_at(timer_route route, std::chrono::time_point<std::chrono::steady_clock, Duration> when,
                                   F&& f) {
  return refuse_if_out_of_memory([&]() -> built_timer {
    using clock = std::chrono::steady_clock;
    const auto since_epoch = when.time_since_epoch();
    switch (classify(since_epoch)) {
      case duration_kind::nan:
        return make_error(error_code::invalid_argument, "timer_queue: the time point is not a number");
      case duration_kind::negative:
        // Before the clock's epoch: long past, so due at once.
        return make_timer(route, clock::time_point{}, clock::duration::zero(), std::forward<F>(f));
      case duration_kind::zero:
      case duration_kind::positive:
      case duration_kind::too_long:  // saturates to time_point::max(): never
        break;
    }
    return make_timer(route, clock::time_point{to_clock_duration(since_epoch)}, clock::duration::zero(),
                      std::forward<F>(f));
  });
}

// Runs `f` first after `initial_delay`, then every `period`.
template <typename Rep1, typename Period1, typename Rep2, typename Period2, typename F>
[[nodiscard]] built_timer timer_every(timer_route route, std::chrono::duration<Rep1, Period1> initial_delay,
                                      std::chrono::duration<Rep2, Period2> period, F&& f) {
  return refuse_if_out_of_memory([&]() -> built_timer {
    using clock = std::chrono::steady_clock;
    // The period first: schedule_every(period, f) passes it as the initial
    // delay too, and a bad period is what its caller must hear of.
    switch (classify(period)) {
      case duration_kind::nan:
        return make_error(error_code::invalid_argument, "timer_queue: the period is not a number");
      case duration_kind::negative:
      case duration_kind::zero:
        return make_error(error_code::invalid_argument, "timer_queue: the period must be positive");
      case duration_kind::positive:
      case duration_kind::too_long:  // saturates: fires once
        break;
    }
    const clock::duration p = to_clock_duration(period);  // rounded up: a positive period is at least one tick
    if (auto r = check_timer_delay(initial_delay, "initial delay"); !r) return unexpected_error{std::move(r).error()};
    return make_timer(route, timer_due_after(initial_delay), p, std::forward<F>(f));
  });
}

}  // namespace detail

}  // namespace thread_system
