// The scheduler core's stop: cancelling what is queued, stop() in each
// mode (closing, settling, the workers' join) and its report; pause and
// resume; the state queries. Construction, starting and resize are in
// pool_core_lifecycle.cpp; a core stopped or destroyed inside its own code
// (frames, discard scopes, orphan()) in pool_core_frames.cpp.
#include "pool_core.hpp"

#include <array>
#include <cstdint>
#include <mutex>
#include <new>
#include <span>
#include <thread>

#include "thread_system/detail/os_thread.hpp"

namespace thread_system::detail {

namespace {
// queue.pop_share(out, 1), retried while the queue throws std::bad_alloc
// (nothing is taken then): at most `attempts` times, yielding in between;
// 0 attempts means until it works. Returns 0 when it gave up.
std::size_t pop_retrying(detail::injector& queue, std::span<job_function> out, unsigned attempts) noexcept {
  for (unsigned i = 0; attempts == 0 || i < attempts; ++i) {
    try {
      return queue.pop_share(out, 1);
    } catch (const std::bad_alloc&) {
      std::this_thread::yield();
    }
  }
  return 0;
}
}  // namespace

std::uint64_t pool_core::cancel_queued() noexcept {
  const failure_sink_scope sink(as_failure_sink());
  std::array<job_function, max_batch> local;
  std::uint64_t n = 0;
  for (;;) {
    // Giving up is safe: cancel_requested_ is set, so the workers cancel
    // whatever is left as they take it.
    const std::size_t got = pop_retrying(*queue_, local, 1000);
    if (got == 0) return n;
    for (std::size_t i = 0; i < got; ++i) {
      const std::uint8_t tag = local[i].tag();
      if ((tag & bounded_tag) != 0) release_room(1);  // it left the queue
      queue_->note_cancelled(tag);
      // The job's own code (its cancel hook, its destructor): wait_idle()
      // and stop() are refused there instead of waiting for it (and stop()
      // for stop_mutex_, which this thread holds).
      const discard_scope discarding(this);
      local[i].cancel();
      local[i].reset();
    }
    n += got;
  }
}

stop_report pool_core::stop(stop_mode mode) {
  if (const char* refusal = refusal_on_this_thread(/*stop=*/true)) throw_refusal(refusal);
  // (The front stopped the pool's timers before: pool_front::stop().)
  stop_report report;
  {
    // Discarded and left-behind jobs run on this thread (see frame_scope):
    // the frame ends after the lock and the last use of the core.
    const frame_scope in_frame(this);
    // A caller_runs job calling stop() is not waited for by this stop or by
    // another thread's (which would wait for it while it waits for the lock).
    uncount_own_caller_runs();
    std::lock_guard stop_lock(stop_mutex_);
    report = close_for_stop(mode) ? settle_stop(nullptr) : final_report_;
  }
  return report;
}

bool pool_core::close_for_stop(stop_mode mode) noexcept {
  {
    std::lock_guard lock(lifecycle_mutex_);
    if (state_.load(std::memory_order_relaxed) == state::stopped) return false;
    state_.store(state::stopping, std::memory_order_release);  // pairs with acquire in is_running()
  }
  // From here workers_ no longer changes: adding, starting and resizing
  // are refused once stopping (under lifecycle_mutex_, which the store
  // above held), and only stop() - serialised by stop_mutex_ - joins.
  if (mode == stop_mode::cancel_pending) {
    // release: pairs with the acquire in execute(). Before resume() below:
    // a worker holding a job for a paused pool must find it set when it
    // wakes, and cancel that job rather than run it.
    cancel_requested_.store(true, std::memory_order_release);
  }
  // Producers blocked by backpressure give up with pool_stopped (the state
  // store above is ordered before this notify's fence).
  room_available_.notify_all();
  // A paused pool still runs what it accepted (drain) or cancels it.
  paused_.store(false, std::memory_order_seq_cst);  // see resume()
  queue_->close();                                  // from here every push fails with pool_stopped
  resumed_.notify_all();                            // a worker holding a job for resume() runs or cancels it now
  queue_->wait_for_pushes();                        // pushes that raced with close() have settled: accepted() is final
  if (mode == stop_mode::cancel_pending) {
    // (cancel_requested_ is already set, above.)
    // release: pairs with the acquire in idle_now().
    cancelled_by_stop_.fetch_add(cancel_queued(), std::memory_order_release);
  }
  wake_all_groups();
  return true;
}

stop_report pool_core::settle_stop(pool_worker* self) noexcept {
  for (auto& w : workers_) {
    os_thread& t = state_of(*w).thread_;
    if (!t.joinable()) continue;
    if (&state_of(*w) == self) {
      t.detach();  // the finisher's own thread: it ends once the core is gone
    } else {
      t.join();
    }
  }
  // Whatever is still queued runs (drain) or is cancelled (cancel_pending,
  // through execute()) on this thread, so every accepted job is accounted
  // for: jobs no worker ever ran (the pool never started), and jobs a
  // worker left behind because its last pop needed memory it could not get
  // (a worker leaves once the queue is closed and a look finds nothing).
  // Workers are joined: nothing races with these pops.
  {
    std::array<job_function, max_batch> local;
    // Until it works: no one else will ever take these jobs.
    for (std::size_t n = pop_retrying(*queue_, local, 0); n > 0; n = pop_retrying(*queue_, local, 0)) {
      run_left_behind(std::span(local.data(), n));
    }
  }
  // A drop_oldest producer that took a victim before the queue closed is
  // still running its code (cancel hook, destructor); it counts it as
  // dropped when that code returns. acquire: pairs with the decrement in
  // drop_oldest_queued(), so its dropped_ count is in the report.
  for (std::uint32_t n = drops_in_flight_.load(std::memory_order_acquire); n != 0;
       n = drops_in_flight_.load(std::memory_order_acquire)) {
    drops_in_flight_.wait(n, std::memory_order_acquire);
  }
  // caller_runs jobs running on producer threads were accepted: like
  // running jobs, waited for. seq_cst: Dekker with run_on_caller_counted()
  // (this thread's pool_front::stop() stored stop_requested_ seq_cst first;
  // an orphaned core has no frame left, so no run). Acquire: pairs with the
  // release decrement, so their counts are in the report.
  for (std::uint32_t n = caller_runs_in_flight_.load(std::memory_order_seq_cst); n != 0;
       n = caller_runs_in_flight_.load(std::memory_order_acquire)) {
    caller_runs_in_flight_.wait(n, std::memory_order_acquire);
  }
  std::lock_guard lock(lifecycle_mutex_);
  final_report_ = make_report();
  state_.store(state::stopped, std::memory_order_release);  // pairs with acquire in is_stopped()/destructor
  became_idle_.notify_all();
  return final_report_;
}

stop_report pool_core::make_report() const {
  // Caller holds lifecycle_mutex_. Completion counters first, accepted
  // totals last (as in idle_now()): a job read as finished was accepted
  // before its completion was published, so the accepted total read after
  // it includes the job. A report taken while the pool runs therefore never
  // shows more jobs finished than accepted.
  stop_report r;
  r.cancelled = cancelled_by_stop_.load(std::memory_order_acquire);
  r.cancelled += dropped_.load(std::memory_order_acquire);  // pairs with drop_oldest_queued()
  auto add_worker = [&r](const pool_worker& w) {
    // acquire: pairs with the release stores in execute(), so the
    // injector's accepted count read below includes every job counted here.
    r.executed += w.processed_.load(std::memory_order_acquire);
    r.cancelled += w.cancelled_.load(std::memory_order_acquire);
    r.failed += w.failed_.load(std::memory_order_relaxed);  // statistics only
  };
  add_worker(caller_runner_);
  for (const auto& w : workers_) add_worker(state_of(*w));
  // Jobs caller_runs ran on the submitting thread: accepted and finished at
  // once, so one read serves both totals.
  const std::uint64_t by_caller = caller_ran_.load(std::memory_order_relaxed);                  // statistics only
  const std::uint64_t cancelled_by_caller = caller_cancelled_.load(std::memory_order_relaxed);  // statistics only
  r.executed += by_caller;
  r.failed += caller_failed_.load(std::memory_order_relaxed);  // statistics only
  r.cancelled += cancelled_by_caller;
  r.accepted = queue_->accepted() + by_caller + cancelled_by_caller;
  for (const auto& w : workers_)
    r.accepted += state_of(*w).spawned_.load(std::memory_order_acquire);  // pairs with push_local()
  return r;
}

void pool_core::pause() noexcept {
  paused_.store(true, std::memory_order_seq_cst);  // workers see it before taking their next job
}

void pool_core::resume() noexcept {
  // seq_cst store, then wake every group: a worker that read paused_ == true
  // after its prepare_wait() fence is woken by the notify that follows.
  paused_.store(false, std::memory_order_seq_cst);
  resumed_.notify_all();  // workers holding a job in wait_while_paused()
  wake_all_groups();
}

bool pool_core::is_paused() const noexcept {
  return paused_.load(std::memory_order_acquire);  // pairs with pause()/resume()
}

bool pool_core::is_running() const noexcept {
  return state_.load(std::memory_order_acquire) == state::running;  // pairs with the release in start()
}

bool pool_core::is_stopped() const noexcept {
  return state_.load(std::memory_order_acquire) == state::stopped;  // pairs with the release in stop()
}

}  // namespace thread_system::detail
