// timer_queue: delayed and periodic jobs, dispatched to a target (usually a
// thread_pool) by one timer thread.
//
//   thread_pool pool{4};
//   timer_queue timers{[&pool](job_function&& f) { return pool.enqueue(std::move(f)); }};
//   auto once = timers.schedule_after(std::chrono::milliseconds(50), [] { flush(); });
//   auto tick = timers.schedule_every(std::chrono::seconds(1), [](const timer_tick& t) { sample(t.scheduled_time); });
//   ...
//   tick->cancel();
//
// Model: one timer thread per timer_queue keeps a binary min-heap of timers
// keyed by due time (steady_clock; equal due times in scheduling order). It
// sleeps on a condition variable until the earliest due time or until a
// timer that is due earlier is added, so an idle queue uses no CPU. When a
// timer is due the thread hands a small job to the dispatch target; the
// user's function runs wherever the target runs it. A target that blocks
// (a pool with a blocking backpressure policy) delays later timers.
//
// Contract:
//   * schedule_*(), statistics(), stop() and every timer_handle member may be
//     called from any thread, including from inside a timer's own function.
//     stop() and the destructor must not be called from the timer thread
//     (a target that runs jobs inline runs them there): stop() throws
//     error_exception{invalid_argument} then.
//   * A run never starts before its due time. Runs are handed to the target
//     in due-time order (ties: scheduling order).
//   * Everything the scheduling thread did before schedule_*() is visible to
//     the timer's function (the heap's mutex, then the target's hand-off).
//   * Periodic timers keep to their grid: run k is due at
//     first_due + k * period however long runs take (no drift); the
//     function may take a `const timer_tick&` to learn its scheduled time and
//     k. A periodic timer never overlaps itself: it is not re-armed while a
//     run is queued or running. When that run ends, the timer is re-armed at
//     the first grid point still ahead, and the grid points passed over
//     meanwhile are counted in skipped_periods (computed in O(1), not one by
//     one); so are grid points the timer thread reaches late (one run, not a
//     burst of catch-up runs). The timer thread sleeps meanwhile: a body
//     longer than its period costs no timer-thread CPU.
//   * timer_handle::cancel() returns true when it prevented at least one run
//     that had not started: after it returns no new run of that timer starts
//     (a run already started finishes; cancel() does not wait for it, so a
//     function may cancel its own timer). The function object is destroyed
//     by cancel() when no run is in progress, else when that run ends.
//   * Accounting: `fired` counts runs whose function started; a run handed
//     to the target but cancelled before it started is not fired, and it
//     reports itself to the target as cancelled (job_outcome::cancelled:
//     a thread_pool counts it in `cancelled`, not `executed`). So for
//     one-shot timers fired + cancelled == scheduled once all have ended.
//   * Target refusals: a one-shot timer whose run is refused is cancelled;
//     a periodic one skips that period when the refusal is queue_full and
//     is cancelled for any other error (pool_stopped). A run the target
//     accepted but discards unrun (stop(cancel_pending) on the pool) counts
//     as cancelled for a one-shot timer; a periodic timer is re-armed.
//   * stop(stop_mode::drain): one-shot timers already due at the moment of
//     the call are dispatched; every other timer (not yet due, and every
//     periodic timer, including one whose run is in flight) is cancelled and
//     counted. stop(cancel_pending) cancels all. After stop() begins,
//     schedule_*() returns pool_stopped. stop() is idempotent and returns
//     the final statistics.
//   * Bad input — an empty function, a negative or NaN delay, a zero,
//     negative or NaN period — is refused with invalid_argument. Delays and
//     periods too long for the steady clock (infinity, hours::max()) are
//     not errors: they saturate to "never" (a timer due at
//     time_point::max() never fires; a period that long fires once). A
//     schedule_at() time in the past runs as soon as possible.
//   * Destruction: the destructor is stop(stop_mode::drain). Runs already
//     handed to the target keep the timer's state alive, so the timer_queue
//     may be destroyed before they run; handles may outlive it (cancel()
//     then only prevents runs not yet started).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/core/stop_mode.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/os_thread.hpp"

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

/// Settings of a timer_queue.
struct timer_queue_options {
  std::string name = "ts-timer";  ///< The timer thread's name (OS-visible, 15 bytes kept on Linux).
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

// Shared statistics; runs and handles keep it alive after the queue is gone.
struct timer_counters {
  // All relaxed: statistics only, no data is published through them.
  std::atomic<std::uint64_t> scheduled{0};
  std::atomic<std::uint64_t> fired{0};
  std::atomic<std::uint64_t> cancelled{0};
  std::atomic<std::uint64_t> skipped_periods{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> wakeups{0};
};

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
  // A periodic timer whose run is in flight (dispatched, not yet ended) is
  // out of the heap and on the core's in-flight list (guarded by its mutex).
  timer_entry* flight_prev = nullptr;
  timer_entry* flight_next = nullptr;
  bool in_flight = false;
  timer_route route{};  // set before the entry is shared; handed to the target with each run
  std::atomic<std::uint32_t> status{pending};
  std::shared_ptr<timer_counters> counters;  // set before the entry is shared
  std::weak_ptr<timer_core> core;            // set before the entry is shared: runs re-arm through it
};

template <typename F>
class timer_entry_impl final : public timer_entry {
 public:
  template <typename G>
  timer_entry_impl(G&& g, clock::time_point first_due, clock::duration every)
      : timer_entry(first_due, every), fn_(std::in_place, std::forward<G>(g)) {}

  void invoke(const timer_tick& tick) override {
    if constexpr (std::is_invocable_v<F&, const timer_tick&>) {
      (*fn_)(tick);
    } else {
      (*fn_)();
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
  timer_handle(std::shared_ptr<detail::timer_entry> e, std::weak_ptr<detail::timer_core> c) noexcept
      : entry_(std::move(e)), core_(std::move(c)) {}

  std::shared_ptr<detail::timer_entry> entry_;
  std::weak_ptr<detail::timer_core> core_;
};

/// Delayed and periodic jobs, handed to a dispatch target (usually a thread_pool) by one timer thread; see the
/// header comment.
class timer_queue {
 public:
  /// The clock of due times.
  using clock = std::chrono::steady_clock;

  /// Starts the timer thread. Throws error_exception{invalid_argument} for
  /// an empty target, {resource_exhausted} when the thread cannot start
  /// (thread_pool's schedule_*() return that error instead).
  explicit timer_queue(timer_dispatch target, timer_queue_options options = {});
  /// A target with several queues: each run is handed over with the route
  /// its timer was scheduled with (the schedule_*() overloads taking a
  /// timer_route; the others use route 0). Throws as the constructor above.
  explicit timer_queue(timer_routed_dispatch target, timer_queue_options options = {});
  /// Not copyable.
  timer_queue(const timer_queue&) = delete;
  /// Not copyable.
  timer_queue& operator=(const timer_queue&) = delete;
  /// stop(stop_mode::drain).
  ~timer_queue();

  /// Runs `f` once, `delay` from now.
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_after(std::chrono::duration<Rep, Period> delay, F&& f) {
    return schedule_after(timer_route{}, delay, std::forward<F>(f));
  }
  /// As schedule_after(delay, f), its run handed to the target with `route`.
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_after(timer_route route, std::chrono::duration<Rep, Period> delay, F&& f) {
    return detail::refuse_if_out_of_memory([&]() -> result<timer_handle> {
      if (auto r = check_delay(delay, "delay"); !r) return unexpected_error{r.error()};
      return schedule_impl(route, after_now(delay), clock::duration::zero(), std::forward<F>(f));
    });
  }

  /// Runs `f` once at `when` (at once if that has passed).
  template <typename Duration, typename F>
  result<timer_handle> schedule_at(std::chrono::time_point<clock, Duration> when, F&& f) {
    return schedule_at(timer_route{}, when, std::forward<F>(f));
  }
  /// As schedule_at(when, f), its run handed to the target with `route`.
  template <typename Duration, typename F>
  result<timer_handle> schedule_at(timer_route route, std::chrono::time_point<clock, Duration> when, F&& f) {
    return detail::refuse_if_out_of_memory([&]() -> result<timer_handle> {
      const auto since_epoch = when.time_since_epoch();
      switch (detail::classify(since_epoch)) {
        case detail::duration_kind::nan:
          return make_error(error_code::invalid_argument, "timer_queue: the time point is not a number");
        case detail::duration_kind::negative:
          // Before the clock's epoch: long past, so due at once.
          return schedule_impl(route, clock::time_point{}, clock::duration::zero(), std::forward<F>(f));
        default:
          return schedule_impl(route, clock::time_point{detail::to_clock_duration(since_epoch)},
                               clock::duration::zero(), std::forward<F>(f));
      }
    });
  }

  /// Runs `f` every `period`, first one period from now.
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_every(std::chrono::duration<Rep, Period> period, F&& f) {
    return schedule_every(timer_route{}, period, period, std::forward<F>(f));
  }
  /// As schedule_every(period, f), its runs handed to the target with `route`.
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_every(timer_route route, std::chrono::duration<Rep, Period> period, F&& f) {
    return schedule_every(route, period, period, std::forward<F>(f));
  }

  /// Runs `f` first after `initial_delay`, then every `period`.
  template <typename Rep1, typename Period1, typename Rep2, typename Period2, typename F>
  result<timer_handle> schedule_every(std::chrono::duration<Rep1, Period1> initial_delay,
                                      std::chrono::duration<Rep2, Period2> period, F&& f) {
    return schedule_every(timer_route{}, initial_delay, period, std::forward<F>(f));
  }
  /// As schedule_every(initial_delay, period, f), its runs handed to the target with `route`.
  template <typename Rep1, typename Period1, typename Rep2, typename Period2, typename F>
  result<timer_handle> schedule_every(timer_route route, std::chrono::duration<Rep1, Period1> initial_delay,
                                      std::chrono::duration<Rep2, Period2> period, F&& f) {
    return detail::refuse_if_out_of_memory([&]() -> result<timer_handle> {
      if (auto r = check_delay(initial_delay, "initial delay"); !r) return unexpected_error{r.error()};
      switch (detail::classify(period)) {
        case detail::duration_kind::nan:
          return make_error(error_code::invalid_argument, "timer_queue: the period is not a number");
        case detail::duration_kind::negative:
        case detail::duration_kind::zero:
          return make_error(error_code::invalid_argument, "timer_queue: the period must be positive");
        default:
          break;
      }
      const clock::duration p = detail::to_clock_duration(period);
      if (p <= clock::duration::zero()) {
        return make_error(error_code::invalid_argument, "timer_queue: the period rounds to zero");
      }
      return schedule_impl(route, after_now(initial_delay), p, std::forward<F>(f));
    });
  }

  /// Stops the timer thread (see the header for what happens to timers).
  /// Idempotent; returns the final statistics.
  timer_statistics stop(stop_mode mode = stop_mode::drain);

  /// A snapshot of the counters; `pending` is the number of timers waiting now.
  [[nodiscard]] timer_statistics statistics() const;

  /// False once stop() has begun.
  [[nodiscard]] bool is_running() const noexcept;

 private:
  // NaN and negative delays are refused; too long ones saturate (see the header).
  template <typename Rep, typename Period>
  static result<void> check_delay(std::chrono::duration<Rep, Period> d, const char* what) {
    switch (detail::classify(d)) {
      case detail::duration_kind::nan:
        return make_error(error_code::invalid_argument, std::string("timer_queue: the ") + what + " is not a number");
      case detail::duration_kind::negative:
        return make_error(error_code::invalid_argument, std::string("timer_queue: negative ") + what);
      default:
        return {};
    }
  }
  template <typename Rep, typename Period>
  static clock::time_point after_now(std::chrono::duration<Rep, Period> d) noexcept {
    return detail::saturating_add(clock::now(), detail::to_clock_duration(d));
  }

  template <typename F>
  result<timer_handle> schedule_impl(timer_route route, clock::time_point due, clock::duration period, F&& f) {
    using D = std::decay_t<F>;
    static_assert(std::is_invocable_v<D&, const timer_tick&> || std::is_invocable_v<D&>,
                  "a timer function is invocable as f() or f(const timer_tick&)");
    if constexpr (nullable_callable<D>) {
      if (f == nullptr) return make_error(error_code::invalid_argument, "timer_queue: empty function");
    }
    std::shared_ptr<detail::timer_entry> e;
    try {
      e = std::make_shared<detail::timer_entry_impl<D>>(std::forward<F>(f), due, period);
    } catch (const std::bad_alloc&) {
      return make_error(error_code::resource_exhausted, "out of memory");
    }
    e->route = route;
    return add(std::move(e));
  }

  result<timer_handle> add(std::shared_ptr<detail::timer_entry> e);

  std::shared_ptr<detail::timer_core> core_;
  std::mutex stop_mutex_;     // serialises stop()
  detail::os_thread thread_;  // guarded by stop_mutex_
};

namespace detail {

// A pool's timer_queue (thread_pool, typed_thread_pool_t): created on first
// use, so a pool that never schedules starts no timer thread, and closed for
// good by close_and_stop(). Every member may be called from any thread.
class pool_timers {
 public:
  // The queue. The first call creates it with `target`, its thread named
  // after the pool (`pool_name`). Errors: pool_stopped once closed ("<kind>
  // '<pool_name>' is stopped"); resource_exhausted when the timer thread
  // cannot start or memory runs out.
  result<timer_queue*> get(std::string_view kind, const std::string& pool_name, timer_routed_dispatch target);
  // From now on get() refuses; then stops the queue (if one was created)
  // with `mode`, outside the lock (runs dispatched meanwhile may call get()).
  void close_and_stop(stop_mode mode);
  // The queue's counters; all zero when none was created.
  [[nodiscard]] timer_statistics statistics() const;

 private:
  mutable std::mutex mutex_;
  std::unique_ptr<timer_queue> queue_;  // created under mutex_, never replaced
  bool closed_ = false;                 // guarded by mutex_
};

}  // namespace detail

}  // namespace thread_system
