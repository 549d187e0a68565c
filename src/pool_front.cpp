// pool_front: the members thread_pool and typed_thread_pool_t<T> share, each
// a call into the core (src/pool_core.hpp). The pushes are in
// pool_core_push.cpp, next to the core's push paths they inline.
#include "thread_system/pools/pool_front.hpp"

#include <exception>
#include <new>
#include <string>

#include "pool_core.hpp"
#include "pool_timers.hpp"

namespace thread_system::detail {

namespace {
void delete_core(pool_core* core) noexcept { delete core; }
}  // namespace

unexpected_error unknown_queue_kind(const char* kind, pool_queue q) noexcept {
  return make_error_nothrow(error_code::invalid_argument, [&] {
    return std::string(kind) + ": " + std::to_string(static_cast<int>(q)) + " is not a pool_queue";
  });
}

pool_front::pool_front(core_config config) try
    : core_(new pool_core(std::move(config)), &delete_core), timers_(std::make_unique<pool_timers>()) {
} catch (const std::bad_alloc&) {
  throw error_exception(out_of_memory_error().value);
}

pool_front::~pool_front() { stop_for_destructor(); }

void pool_front::stop_for_destructor() noexcept {
  if (core_ == nullptr) return;  // handed over (below)
  const bool on_timer_thread = timers_->on_timer_thread();
  const bool in_frame = !on_timer_thread && core_->inside_own_frame();
  const bool on_worker = !on_timer_thread && !in_frame && core_->on_own_worker();
  if (!on_timer_thread && !in_frame && !on_worker) {
    if (!core_->is_stopped()) (void)stop(stop_mode::drain);
    retire_spawn_key();
    return;
  }
  // Destroyed where the pool cannot be stopped and freed now: its last
  // owner was dropped by code the pool itself runs - a job on one of its
  // workers (a job that holds a shared_ptr to its pool), a timer's function
  // on its timer thread (destroyed there when the pool refuses the run, or
  // run there by caller_runs), or a job's code that a bounded push or
  // stop() runs on the calling thread (caller_runs, a dropped or discarded
  // job's hook or destructor, a drained job) while frames of the core below
  // still use it. Everything that refers to this object ends here; the core
  // goes on and is freed later, by a thread that is there anyway: nothing
  // allocates and no thread is started.
  core_->begin_stop(stop_mode::drain);
  if (!on_timer_thread) {
    // The timers first (their runs call into this object), then the spawn
    // registry's entry (failure reports push through it).
    timers_->close_and_stop(stop_mode::drain);
    retire_spawn_key();
    if (in_frame) {
      // The outermost frame of the core on this thread orphans it as it ends.
      core_.release()->orphan_to_outermost_frame();
    } else {
      // The core drains (stop_mode::drain, as the destructor promises) and
      // its last worker to leave frees it - this one, once its job has
      // returned, or another.
      core_.release()->orphan();
    }
    return;
  }
  // On the timer thread, inside a dispatch (the core may still be in use
  // below this call: a caller_runs run's bookkeeping). The timer queue stops
  // without a join and cancels its pending timers now, while this object
  // exists (a discarded sleep reports through it); its thread, once it has
  // left the dispatch, orphans the core (drained and freed by its last
  // worker) and frees the timers.
  // The queue's pending timers are cancelled inside this call, while core_
  // and timers_ are still set: a discarded sleep resumes its coroutine with
  // `cancelled`, and what that lets out is reported through this object
  // (report_failure(), the core's error handler). Only then does this
  // object let go of them.
  retire_spawn_key();
  pool_core* const core = core_.get();
  pool_timers* const timers = timers_.get();
  timers->abandon_on_timer_thread(job_function([core, timers] {
    core->orphan();
    delete timers;
  }));
  (void)core_.release();    // owned by the timer thread's step above from here
  (void)timers_.release();  // likewise
}

result<void> pool_front::start() {
  return refuse_if_out_of_memory([&] { return core_->start(); });
}

std::vector<thread_worker*> pool_front::get_workers() const { return core_->get_workers(); }

result<void> pool_front::set_affinity(std::size_t worker, std::span<const int> cpus) {
  return refuse_if_out_of_memory([&] { return core_->set_affinity(worker, cpus); });
}

result<void> pool_front::set_nice(std::size_t worker, int nice) {
  return refuse_if_out_of_memory([&] { return core_->set_nice(worker, nice); });
}

result<native_thread_handle> pool_front::native_handle(std::size_t worker) const {
  return refuse_if_out_of_memory([&] { return core_->native_handle(worker); });
}

void pool_front::pause() noexcept { core_->pause(); }

void pool_front::resume() noexcept { core_->resume(); }

bool pool_front::is_paused() const noexcept { return core_->is_paused(); }

void pool_front::wait_idle() { core_->wait_idle(); }

stop_report pool_front::stop(stop_mode mode) {
  // From a worker, or from a job the pool discards on this thread (a
  // drop_oldest victim's hook or destructor, a job stop() cancels): refused
  // with invalid_argument before anything stops (not even the timers, nor
  // begin_stop()'s refusal of a full pool's submissions).
  if (const char* refusal = core_->refusal_on_this_thread(/*stop=*/true)) core_->throw_refusal(refusal);
  // From the timer thread (a timer's function that backpressure::caller_runs
  // ran there): stopping would join that thread from itself. Refused before
  // anything stops, as on a worker.
  if (timers_->on_timer_thread()) core_->throw_refusal("stop() called on the pool's timer thread");
  // A full pool makes no one wait from here (a timer's run blocked on room
  // would keep the timer thread, which the next step joins, from ending).
  core_->begin_stop(mode);
  // Timers first, while the pool still accepts their due runs (see
  // timer_queue.hpp: drain dispatches due one-shot timers, cancels the rest;
  // a run that finds a full pool is refused now instead of waiting).
  timers_->close_and_stop(mode);
  return core_->stop(mode);
}

bool pool_front::is_running() const noexcept { return core_->is_running(); }

bool pool_front::is_stopped() const noexcept { return core_->is_stopped(); }

result<void> pool_front::resize(std::size_t n) {
  return refuse_if_out_of_memory([&] { return core_->resize(n); });
}

pool_statistics pool_front::get_statistics() const { return core_->get_statistics(); }

worker_latency pool_front::latency() const { return core_->latency(); }

std::size_t pool_front::worker_count() const { return core_->worker_count(); }

const std::string& pool_front::get_name() const noexcept { return core_->name_; }

void pool_front::set_error_handler(error_handler handler) { core_->set_error_handler(std::move(handler)); }

timer_statistics pool_front::get_timer_statistics() const { return timers_->statistics(); }

result<timer_handle> pool_front::add_timer(timer_routed_dispatch target, built_timer&& timer) {
  return refuse_if_out_of_memory(
      [&] { return timers_->add(core_->kind_, core_->name_, std::move(target), std::move(timer)); });
}

std::string pool_front::named() const { return core_->named(); }

unexpected_error pool_front::stopped_error() const noexcept { return core_->stopped_error(); }

result<void> pool_front::add_workers(std::vector<std::unique_ptr<thread_worker>> workers) {
  return core_->enqueue_batch(std::move(workers));
}

bool pool_front::stop_begun() const noexcept {
  // acquire: pairs with the release stores of state_ in stop().
  const auto st = core_->state_.load(std::memory_order_acquire);
  return st == pool_core::state::stopping || st == pool_core::state::stopped;
}

worker_masks pool_front::active_worker_masks(std::size_t first_n) const { return core_->active_worker_masks(first_n); }

void pool_front::report_failure(const std::exception_ptr& e) noexcept { core_->report_failure(e); }

}  // namespace thread_system::detail
