// The scheduler core's accounting: idle detection and wait_idle(), statistics and
// latency, and where a job's failure is reported (the error handler, or a
// line on stderr).
#include "pool_core.hpp"

#include <cstdio>
#include <exception>
#include <mutex>

namespace thread_system::detail {

namespace {
// Made at load time, so that a job cancelled while memory is exhausted can
// still complete its future with the `cancelled` code.
const std::exception_ptr cancelled_error_without_memory = std::make_exception_ptr(
    error_exception(error{error_code::cancelled, "job cancelled (no memory was left to say why)"}));
}  // namespace

const std::exception_ptr& cancelled_without_memory() noexcept { return cancelled_error_without_memory; }

void pool_core::report_failure(const std::exception_ptr& e) noexcept {
  std::shared_ptr<const error_handler> handler;
  {
    std::lock_guard lock(handler_mutex_);
    handler = handler_;
  }
  try {
    if (handler && *handler) {
      (*handler)(e);
      return;
    }
    if (e == out_of_memory_report_) {  // not a job's failure: a worker ran out of memory
      std::fprintf(stderr, "thread_system: pool '%s': a worker could not allocate; it goes on one job at a time\n",
                   name_.c_str());
      return;
    }
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "thread_system: a job in pool '%s' failed: %s\n", name_.c_str(), ex.what());
    } catch (...) {
      std::fprintf(stderr, "thread_system: a job in pool '%s' failed with a non-standard exception\n", name_.c_str());
    }
  } catch (...) {  // the handler itself threw: the failure is already counted
  }
}

void pool_core::set_error_handler(error_handler handler) {
  auto p = handler ? std::make_shared<const error_handler>(std::move(handler)) : nullptr;
  std::lock_guard lock(handler_mutex_);
  handler_ = std::move(p);
}

bool pool_core::idle_now() const noexcept {
  // Completion counters first (acquire, pairing with the release stores in
  // execute() and stop()), then the queue's accepted total. A job counted as finished was
  // accepted before its completion was published, so the total read after
  // includes it; equality therefore means every job accepted before this
  // call has finished. See docs/ARCHITECTURE.md ("Idle detection").
  std::uint64_t finished = cancelled_by_stop_.load(std::memory_order_acquire);
  finished += dropped_.load(std::memory_order_acquire);                   // pairs with drop_oldest_queued()
  finished += caller_runner_.processed_.load(std::memory_order_acquire);  // pairs with execute()
  finished += caller_runner_.cancelled_.load(std::memory_order_acquire);  // pairs with execute()
  std::lock_guard lock(lifecycle_mutex_);
  for (const auto& handle : workers_) {
    const pool_worker& w = state_of(*handle);
    finished += w.processed_.load(std::memory_order_acquire);
    finished += w.cancelled_.load(std::memory_order_acquire);
  }
  // Accepted = injector pushes + jobs spawned onto workers' deques, read
  // after all completion counters (acquire loads above keep them first).
  std::uint64_t accepted = queue_->accepted();
  for (const auto& w : workers_)
    accepted += state_of(*w).spawned_.load(std::memory_order_acquire);  // pairs with push_local()
  return finished == accepted;
}

void pool_core::wait_idle() {
  if (const char* refusal = refusal_on_this_thread(/*stop=*/false)) throw_refusal(refusal);
  if (state_.load(std::memory_order_acquire) == state::created) return;  // nothing can run yet
  for (;;) {
    if (idle_now()) return;
    const auto key = became_idle_.prepare_wait();
    if (idle_now()) {
      became_idle_.cancel_wait();
      return;
    }
    became_idle_.commit_wait(key);
  }
}

pool_statistics pool_core::get_statistics() const {
  pool_statistics s;
  std::lock_guard lock(lifecycle_mutex_);
  const stop_report r = make_report();
  s.accepted = r.accepted;
  s.executed = r.executed;
  s.failed = r.failed;
  s.cancelled = r.cancelled;
  s.queued = queue_->size_approx();
  s.workers = active_workers_locked();
  s.dropped = dropped_.load(std::memory_order_relaxed);        // statistics only
  s.caller_ran = caller_ran_.load(std::memory_order_relaxed);  // statistics only
  s.paused = paused_.load(std::memory_order_relaxed);          // statistics only
  s.queue_switches = queue_->queue_switches();
  for (const auto& handle : workers_) {
    const pool_worker& w = state_of(*handle);
    const auto ws = w.statistics();
    s.steals += ws.steals;
    s.parks += ws.parks;
    s.wakeups += ws.wakeups;
    s.allocation_failures += ws.allocation_failures;
    s.queued += w.deque_.size_approx();
    s.queued += w.lifo_slot_.load(std::memory_order_relaxed) != 0 ? 1 : 0;  // statistics only
  }
  return s;
}

worker_latency pool_core::latency() const {
  worker_latency total;
  std::lock_guard lock(lifecycle_mutex_);
  for (const auto& w : workers_) {
    const worker_latency one = w->latency();
    total.wait.merge(one.wait);
    total.run.merge(one.run);
  }
  return total;
}

}  // namespace thread_system::detail
