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
//     stop() must not be called from the timer thread (a target that runs
//     jobs inline runs them there): it throws error_exception{invalid_argument}
//     then. The destructor may run there (a timer's function that held the
//     queue's last owner, destroyed by the target): every pending timer is
//     cancelled (as stop(cancel_pending)), and the timer thread, detached,
//     ends once it has left that dispatch.
//     stop() joins the timer thread, so it waits for the target to return
//     the run being handed over: from inside a timer's function with a
//     target that may block until that very function returns (a
//     one-worker pool with backpressure::block whose room the function's
//     own job holds), stop() never returns: stop such a queue from another
//     thread. A pool's own timers (thread_pool::schedule_after() and
//     friends) are not affected: the pool's stop() first releases
//     producers blocked for room.
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
//     as cancelled for a one-shot timer; a periodic timer is re-armed. A
//     target that throws refuses the run (as with resource_exhausted), even
//     when the exception came from the timer's own function that the
//     target ran inline (a function's returned error is thrown as
//     error_exception, as a job's: core/job_function.hpp): such a target
//     should catch what its jobs throw (a thread_pool does), or a periodic
//     timer ends at its first exception and a one-shot one is counted both
//     fired and refused.
//   * Memory: schedule_*() allocates (the timer, and room in the queue for
//     it and for every periodic run in flight to come back) and returns
//     resource_exhausted when it cannot. A periodic timer's re-arm after a
//     run allocates nothing, so running out of memory never ends one.
//   * stop(stop_mode::drain): one-shot timers already due at the moment of
//     the call are dispatched (and one-shot runs already handed to the
//     target run); every other timer (not yet due, and every periodic timer,
//     including one whose run is in flight) is cancelled and counted.
//     stop(cancel_pending) cancels all: every timer not yet dispatched and
//     every run handed to the target that has not started (when the target
//     gets to it, it reports itself cancelled); a run that started
//     finishes. After stop() begins,
//     schedule_*() returns pool_stopped. stop() also waits for every
//     timer_handle::cancel() in progress on another thread (one that won
//     its timer destroys the function, and that destructor - a coroutine
//     sleep's discard - may push into the target), so the target may be
//     destroyed once stop() returns; a stop() made on a thread inside a
//     cancel (its function's destructor destroyed the queue's owner) does
//     not wait for that cancel. Not covered: a cancel that wins a one-shot
//     run already handed to the target (due, queued in a busy pool, not yet
//     started) races with the target's own stop as before. stop() is
//     idempotent and returns the final statistics.
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
#include "thread_system/detail/functional.hpp"
#include "thread_system/detail/os_thread.hpp"
#include "thread_system/scheduler/timer_handle.hpp"

namespace thread_system {

namespace detail {
class pool_timers;  // a pool's timers (src/pool_timers.hpp): queues built timers on its timer_queue
}  // namespace detail

/// Settings of a timer_queue.
struct timer_queue_options {
  std::string name = "ts-timer";  ///< The timer thread's name (OS-visible, 15 bytes kept on Linux).
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
    return add_built(detail::timer_after(route, delay, std::forward<F>(f)));
  }

  /// Runs `f` once at `when` (at once if that has passed).
  template <typename Duration, typename F>
  result<timer_handle> schedule_at(std::chrono::time_point<clock, Duration> when, F&& f) {
    return schedule_at(timer_route{}, when, std::forward<F>(f));
  }
  /// As schedule_at(when, f), its run handed to the target with `route`.
  template <typename Duration, typename F>
  result<timer_handle> schedule_at(timer_route route, std::chrono::time_point<clock, Duration> when, F&& f) {
    return add_built(detail::timer_at(route, when, std::forward<F>(f)));
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
    return add_built(detail::timer_every(route, initial_delay, period, std::forward<F>(f)));
  }

  /// Stops the timer thread (see the header for what happens to timers).
  /// Idempotent; returns the final statistics.
  timer_statistics stop(stop_mode mode = stop_mode::drain);

  /// A snapshot of the counters; `pending` is the number of timers waiting now.
  /// The counters trail the handles: a timer whose handle has just become
  /// inactive by a cancel or a refusal is counted as cancelled, and taken
  /// off the heap, a moment later by the thread that cancelled it (`fired`
  /// is counted when a run starts, before its handle turns inactive).
  [[nodiscard]] timer_statistics statistics() const;

  /// False once stop() has begun.
  [[nodiscard]] bool is_running() const noexcept;

  /// True when called on this queue's timer thread: from a timer's function
  /// that runs there (a target that runs the job on the calling thread), or
  /// from the target itself. stop() throws there (it would join itself).
  [[nodiscard]] bool on_timer_thread() const noexcept;

 private:
  friend class detail::pool_timers;

  // Queues a built timer; its refusal otherwise (pool_stopped once stopped).
  result<timer_handle> add_built(detail::built_timer&& timer) {
    if (!timer) return unexpected_error{std::move(timer).error()};
    return add(std::move(*timer));
  }
  result<timer_handle> add(std::shared_ptr<detail::timer_entry> e);
  // For a pool destroyed on this queue's timer thread (called there, from a
  // run's dispatch): stops the queue without joining (stop_mode::
  // cancel_pending - nothing is dispatched after this call returns),
  // cancels every pending timer before it returns, detaches the timer
  // thread, and has that thread run `after` once it has left the dispatch.
  // The queue object may be destroyed from `after` (its destructor then
  // joins nothing).
  void abandon_on_timer_thread(job_function&& after) noexcept;

  std::shared_ptr<detail::timer_core> core_;
  std::mutex stop_mutex_;     // serialises stop()
  detail::os_thread thread_;  // guarded by stop_mutex_
};

}  // namespace thread_system
