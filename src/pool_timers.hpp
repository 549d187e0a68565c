// pool_timers: a pool's timer_queue (thread_pool, typed_thread_pool_t),
// private to the library. Created on first use, so a pool that never
// schedules starts no timer thread, and closed for good by close_and_stop().
// Every member may be called from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "thread_system/core/error.hpp"
#include "thread_system/core/stop_mode.hpp"
#include "thread_system/scheduler/timer_handle.hpp"
#include "thread_system/scheduler/timer_queue.hpp"

namespace thread_system::detail {

class pool_timers {
 public:
  // Queues `timer` on the queue, which the first call creates with `target`,
  // its thread named after the pool (`pool_name`). Errors, in this order:
  // pool_stopped once closed ("<kind> '<pool_name>' is stopped");
  // resource_exhausted when the timer thread cannot start or memory runs
  // out; the timer's own refusal (it was built from bad input).
  result<timer_handle> add(std::string_view kind, const std::string& pool_name, timer_routed_dispatch target,
                           built_timer&& timer);
  // From now on add() refuses; then stops the queue (if one was created)
  // with `mode`, outside the lock (runs dispatched meanwhile may call add()).
  void close_and_stop(stop_mode mode);
  // The queue's counters; all zero when none was created.
  [[nodiscard]] timer_statistics statistics() const;
  // On the timer thread (a pool destroyed there): from now on add()
  // refuses; the queue stops without a join, cancelling its pending timers,
  // and its thread runs `after` once it has left the current dispatch
  // (timer_queue::abandon_on_timer_thread()). `after` may delete *this.
  void abandon_on_timer_thread(job_function&& after) noexcept;
  // True on the timer thread (a timer's function run there by the pool's
  // caller_runs backpressure, or the dispatch itself).
  [[nodiscard]] bool on_timer_thread() const noexcept;

 private:
  mutable std::mutex mutex_;
  std::unique_ptr<timer_queue> queue_;  // created under mutex_, never replaced
  bool closed_ = false;                 // guarded by mutex_
};

}  // namespace thread_system::detail
