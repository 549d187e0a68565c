// thread_pool: a fixed set of worker threads running jobs from a shared queue.
//
// Two ways to use it.
//
// Concise (starts at once):
//   thread_system::thread_pool pool{4};                 // default: hardware_concurrency()
//   pool.enqueue([] { work(); });                        // result<void>
//   future<int> f = pool.submit([](int x) { return x * 2; }, 21);
//   pool.wait_idle();
//
// Seed style (configure, then start):
//   auto pool = std::make_shared<thread_pool>("name");    // or ("name", pool_options) to choose the injector etc.
//   pool->enqueue_batch(std::move(workers));             // vector<unique_ptr<thread_worker>>
//   pool->start();
//   pool->enqueue(std::make_unique<callback_job>([]() -> result_void { return {}; }));
//
// Guarantees
//   * Every job that enqueue/submit accepted runs exactly once, or is
//     cancelled and counted: by stop(stop_mode::cancel_pending), by its
//     cancellation token (cancelled before it started), or by
//     backpressure::drop_oldest. Nothing else discards a job.
//   * Refusals are errors: a null/empty job is `invalid_argument`; anything
//     submitted after stop() began is `pool_stopped`; a full pool is
//     `queue_full` (pool_options::backpressure with `reject`, or the
//     fixed-capacity injector pool_queue::bounded, which bounds only what
//     comes from outside the workers and refuses at once). A refused job is not
//     run and, for submit(), no future is returned (the error is thrown as
//     `error_exception` because a future cannot carry a refusal otherwise).
//   * A fire-and-forget job that throws (or a seed job whose do_work()
//     returns an error) is counted as failed and its exception is passed to
//     the error handler; the worker carries on. submit() puts the exception
//     into the future instead (still counted as failed).
//   * Jobs submitted before start() are kept and run once started.
//   * Idle workers sleep: a worker out of work spins briefly, polls for up
//     to 100 us more while yielding its CPU, then parks (no CPU use).
//   * The destructor is stop(stop_mode::drain).
//
// Workers and their threads
//   * A pool has at most `thread_pool::max_workers` (256) workers. Asking
//     for more (the constructor, enqueue_batch(), resize()) is refused with
//     `invalid_argument` before any thread starts.
//   * Workers start as a batch, all or none: when the OS refuses a thread
//     part-way, the threads already created are joined before they run
//     anything, nothing changes, and the call returns (the constructor
//     throws) `resource_exhausted`. resize() keeps its previous size then.
//   * pool_options::worker_stack_size sets the workers' stack (0: the
//     platform default, 8 MiB on Linux). Waits inside jobs that help (a
//     future's get(), task_group::wait(), parallel_for) run other jobs on
//     that stack, so helping waits nest: with the default stack about
//     11 000 levels of a job waiting on a job that waits on a job... fit
//     in a release build (about 2 000 under AddressSanitizer; measured on
//     x86-64 with GCC 12); a bigger stack allows proportionally more (tests/pools/thread_pool_test.cpp,
//     DeepHelpingRecursionWithAConfiguredStack).
//
// Out of memory
//   * A submission that cannot allocate is refused with `resource_exhausted`
//     (submit() throws it as error_exception); nothing is accepted then.
//   * A worker that cannot allocate (a job node, a bigger deque) never
//     fails a job and never terminates: it takes jobs one at a time, which
//     needs no allocation, and a job it spawns goes to the pool's queue
//     instead of its own deque. Each failure is counted
//     (pool_statistics::allocation_failures) and the first of a run of
//     failures is passed to the error handler as error_exception
//     {resource_exhausted}; the worker tries again on its next batch.
//
// Scheduling (ARCHITECTURE.md has the whole picture)
//   * A job submitted from outside goes to the pool's queue (the injector,
//     pool_options::queue); a job submitted by a job running on a worker
//     goes to that worker: into its LIFO slot, pushing the slot's previous
//     job onto its Chase-Lev deque.
//   * A worker takes, in order: every 61st time one job from the injector
//     (so it is never starved); its LIFO slot (the newest job, cache-hot);
//     the newest job of its deque; a batch from the injector; a job stolen
//     from the oldest end of another worker's deque; last, another worker's
//     LIFO slot. A job that blocks therefore never holds back the job it
//     spawned: an idle worker takes it (a continuation, below, is the one
//     exception).
//   * A coroutine that hops onto this pool from one of its own workers
//     (`co_await pool.schedule()`) is a continuation: it goes into that
//     worker's LIFO slot and runs there as soon as the current job returns.
//     No worker is woken for it, idle workers do not spin on it, and a
//     thief takes it only after its owner has finished no job for 50 us (an
//     owner blocked in the job that resumed it, or descheduled) - and only
//     a thief that is awake anyway, looking for work or helping a wait: a
//     job that resumes a coroutine by hand and then blocks, with every
//     other worker asleep, holds that continuation until it returns.
//   * The LIFO slot is bounded: after `lifo_slot_budget` jobs in a row from
//     the slot, the slot's job goes onto the deque and the oldest job of the
//     deque runs, so a job that keeps spawning a successor cannot starve the
//     jobs spawned before it (with the deque empty there is none, and the
//     slot's job runs).
//
// Threading: all members may be called concurrently from any thread, except
// that stop(), wait_idle() and the destructor must not be called from one of
// this pool's own workers (they would wait for themselves; stop() and
// wait_idle() throw `error_exception{invalid_argument}` if they are).
//
// Visibility: everything a job did is visible to a thread after wait_idle()
// or stop() returns in that thread, and to whoever observes the job's future
// become ready.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/core/job.hpp"
#include "thread_system/core/job_batch.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/core/stop_mode.hpp"
#include "thread_system/coro/coro_base.hpp"
#include "thread_system/coro/sleep_awaiter.hpp"
#include "thread_system/pools/backpressure.hpp"
#include "thread_system/pools/pool_options.hpp"
#include "thread_system/pools/submission.hpp"
#include "thread_system/pools/this_job.hpp"
#include "thread_system/pools/thread_worker.hpp"
#include "thread_system/scheduler/future.hpp"
#include "thread_system/scheduler/injector.hpp"
#include "thread_system/scheduler/timer_queue.hpp"
#include "thread_system/scheduler/worker_statistics.hpp"
#include "thread_system/sync/cancellation.hpp"
#include "thread_system/sync/event_count.hpp"

namespace thread_system {

template <typename T>
class typed_thread_pool_t;
class thread_pool;

namespace detail {

// For parallel_for's lazy splitting (src/thread_pool.cpp): true when work
// handed to `pool` by the calling thread has all been taken - on a worker of
// `pool`, its own deque and LIFO slot are empty; on any other thread, the
// pool's queue is empty - so an idle worker would find nothing to steal
// from us.
[[nodiscard]] bool nothing_left_to_steal(const thread_pool& pool) noexcept;

// Workers with the same responsibilities park on one event count; a push
// wakes a worker of every group that serves the job's kind. An untyped pool
// has a single group.
struct wake_group {
  explicit wake_group(std::uint64_t m, std::uint32_t spinners) : mask(m), max_spinners(spinners) {}
  // Workers polling the queue before they park. Producers skip the wake-up
  // while one is spinning; at most max_spinners spin at a time.
  alignas(64) std::atomic<std::uint32_t> spinning{0};
  const std::uint64_t mask;
  const std::uint32_t max_spinners;
  event_count work_available;  // the group's workers park here
};

/// Tag for the constructor typed pools use.
struct custom_injector_t {};

// Neither a seed job nor a seed worker (those have enqueue overloads of their own).
template <typename F>
concept not_a_seed_object =
    !std::is_convertible_v<F, std::unique_ptr<job>> && !std::is_convertible_v<F, std::unique_ptr<thread_worker>>;

}  // namespace detail

/// A worker thread's platform handle (thread_pool::native_handle()).
using native_thread_handle = detail::os_thread::native_handle_type;

/// A fixed set of worker threads running jobs from a shared queue, with work stealing (see the header comment).
class thread_pool {
 public:
  /// The most workers one pool can have (see "Workers and their threads").
  static constexpr std::size_t max_workers = 256;

  /// Jobs a worker takes from its LIFO slot in a row before it runs the
  /// oldest job of its deque (see Scheduling above).
  static constexpr std::uint32_t lifo_slot_budget = 3;

  /// Seed style: a named pool with no workers, not started (default options).
  explicit thread_pool(std::string name);

  /// Seed style with options: a pool named `name` (options.name is not
  /// used), no workers, not started; the injector, backpressure, latency
  /// sampling, stack size and error handler come from `options`. Throws
  /// `error_exception{invalid_argument}` for invalid backpressure, as the
  /// concise constructor.
  thread_pool(std::string name, const pool_options& options);

  /// Concise style: `worker_count` workers, started. Throws
  /// `error_exception{invalid_argument}` when worker_count is 0.
  explicit thread_pool(std::size_t worker_count = default_worker_count(), pool_options options = {});

  /// stop(stop_mode::drain) unless already stopped. Must not be called from one of this pool's workers.
  ~thread_pool();
  /// Not copyable.
  thread_pool(const thread_pool&) = delete;
  /// Not copyable.
  thread_pool& operator=(const thread_pool&) = delete;

  /// hardware_concurrency(), or 1 when unknown.
  [[nodiscard]] static std::size_t default_worker_count() noexcept;

  // ---- workers (seed style) -------------------------------------------

  /// Adds a worker. Before start() it waits for start(); on a running pool it
  /// starts at once. Null is `invalid_argument`; after stop, `pool_stopped`.
  result<void> enqueue(std::unique_ptr<thread_worker> worker);
  /// Adds all workers or none: refused up front for a null entry
  /// (`invalid_argument`), more than max_workers in all (`invalid_argument`)
  /// or after stop (`pool_stopped`); on a running pool, if the OS refuses a
  /// thread part-way (`resource_exhausted`), the threads already made are
  /// joined before any of them ran a job and none of the workers is added.
  result<void> enqueue_batch(std::vector<std::unique_ptr<thread_worker>> workers);
  /// Starts the workers. `invalid_argument` with no workers,
  /// `already_started` when running, `pool_stopped` after stop().
  result<void> start();
  /// The workers, in the order added. Valid until the pool is destroyed.
  [[nodiscard]] std::vector<thread_worker*> get_workers() const;

  // ---- jobs ----------------------------------------------------------------

  /// Seed-style job. Null is `invalid_argument`.
  result<void> enqueue(std::unique_ptr<job> j);
  /// Seed-style batch: all accepted or none (a null entry refuses the batch).
  result<void> enqueue_batch(std::vector<std::unique_ptr<job>> jobs);

  /// A job_function. On refusal `fn` is left untouched, so the caller may
  /// run or keep it (nothing is lost silently).
  result<void> enqueue(job_function&& fn) { return push_one(std::move(fn)); }

  /// Any callable `f()`, run once. An empty std::function or null function
  /// pointer is `invalid_argument`.
  template <runnable F>
    requires detail::not_a_seed_object<F>
  result<void> enqueue(F&& f) {
    return detail::refuse_if_out_of_memory([&] { return push_one(job_function(std::forward<F>(f))); });
  }

  /// A range of callables, accepted all or none under one queue lock.
  template <callable_range R>
  result<void> enqueue_batch(R&& callables) {
    return detail::refuse_if_out_of_memory([&]() -> result<void> {
      std::vector<job_function> batch = detail::to_job_batch(std::forward<R>(callables));
      return push_batch(batch);
    });
  }

  /// Runs `f(args...)` once and returns a future for its result or
  /// exception. Arguments are decay-copied (moved when rvalues). Throws
  /// `error_exception` when refused (`pool_stopped`, `invalid_argument`).
  /// Waiting on the future from one of this pool's workers helps run other
  /// jobs (see future.hpp), so a job may wait for a child it submitted.
  template <typename F, typename... Args>
    requires submittable<F, Args...>
  [[nodiscard]] auto submit(F&& f, Args&&... args)
      -> future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> {
    return detail::throw_if_out_of_memory([&] {
      auto [result_future, fn] = detail::make_submission(std::forward<F>(f), std::forward<Args>(args)...);
      if (auto r = push_one(std::move(fn)); !r) throw error_exception(r.error());
      return std::move(result_future);
    });
  }

  /// `f()` as a job carrying `token`: if the token is cancelled before the
  /// job starts, it never runs and is counted as cancelled; while it runs,
  /// this_job::token() / this_job::is_cancelled() let it poll the token.
  template <runnable F>
  result<void> enqueue(cancellation_token token, F&& f) {
    return detail::refuse_if_out_of_memory(
        [&] { return push_one(detail::make_cancellable_job(std::move(token), std::forward<F>(f))); });
  }

  /// submit() with a token: cancelled before it starts, the job does not run
  /// and the future completes with error_exception{cancelled}.
  template <typename F, typename... Args>
    requires submittable<F, Args...>
  [[nodiscard]] auto submit(cancellation_token token, F&& f, Args&&... args)
      -> future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> {
    return detail::throw_if_out_of_memory([&] {
      auto [result_future, fn] =
          detail::make_cancellable_submission(std::move(token), std::forward<F>(f), std::forward<Args>(args)...);
      if (auto r = push_one(std::move(fn)); !r) throw error_exception(r.error());
      return std::move(result_future);
    });
  }

  // ---- timers --------------------------------------------------------------
  // Delayed and periodic jobs run on this pool. One timer thread per pool,
  // created on first use and parked while nothing is due. The contract is
  // timer_queue's (timer_queue.hpp): a run never starts early; periodic runs
  // keep to their grid (no drift) and never overlap; timer_handle::cancel()
  // prevents runs not yet started. stop() stops the timers first: drain
  // dispatches one-shot timers already due and cancels (and counts, see
  // get_timer_statistics()) every other timer; afterwards schedule_*()
  // returns `pool_stopped`. The first schedule_*() starts the timer thread:
  // when the OS refuses it, that call returns `resource_exhausted`.

  /// Runs `f` once, `delay` from now.
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_after(std::chrono::duration<Rep, Period> delay, F&& f) {
    return with_timers([&](timer_queue& q) { return q.schedule_after(delay, std::forward<F>(f)); });
  }
  /// Runs `f` once at `when` (steady_clock; at once if that has passed).
  template <typename Duration, typename F>
  result<timer_handle> schedule_at(std::chrono::time_point<std::chrono::steady_clock, Duration> when, F&& f) {
    return with_timers([&](timer_queue& q) { return q.schedule_at(when, std::forward<F>(f)); });
  }
  /// Runs `f` every `period`, first after one period. `f` may take a
  /// `const timer_tick&` (its scheduled time and index).
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_every(std::chrono::duration<Rep, Period> period, F&& f) {
    return with_timers([&](timer_queue& q) { return q.schedule_every(period, std::forward<F>(f)); });
  }
  /// Runs `f` every `period`, first after `initial_delay`.
  template <typename Rep1, typename Period1, typename Rep2, typename Period2, typename F>
  result<timer_handle> schedule_every(std::chrono::duration<Rep1, Period1> initial_delay,
                                      std::chrono::duration<Rep2, Period2> period, F&& f) {
    return with_timers([&](timer_queue& q) { return q.schedule_every(initial_delay, period, std::forward<F>(f)); });
  }
  /// Timers scheduled, fired, cancelled (including by stop()), skipped.
  [[nodiscard]] timer_statistics get_timer_statistics() const;

  // ---- coroutines (coro/task.hpp, docs/COROUTINES.md) ---------------------------

  /// `co_await pool.schedule();` continues the coroutine in a job of this
  /// pool; throws the refusal (pool_stopped, ...) instead of suspending when
  /// the pool does not accept it.
  [[nodiscard]] detail::schedule_awaiter schedule() noexcept { return detail::schedule_awaiter(coroutine_target()); }
  /// `co_await pool.sleep_for(d);` resumes on a worker after `d` (the timer
  /// queue; no thread blocks). See coro/sleep_awaiter.hpp.
  template <typename Rep, typename Period>
  [[nodiscard]] detail::sleep_awaiter<detail::pool_timer_arm<thread_pool>> sleep_for(
      std::chrono::duration<Rep, Period> d) {
    return {detail::pool_timer_arm<thread_pool>{this}, detail::due_after(d), coroutine_target()};
  }
  /// `co_await pool.sleep_until(t);` resumes on a worker at `t` (steady_clock).
  template <typename Duration>
  [[nodiscard]] detail::sleep_awaiter<detail::pool_timer_arm<thread_pool>> sleep_until(
      std::chrono::time_point<std::chrono::steady_clock, Duration> t) {
    return {detail::pool_timer_arm<thread_pool>{this}, detail::due_at(t), coroutine_target()};
  }

  // ---- threads ----------------------------------------------------------------

  /// Pins worker `worker` (index in get_workers()) to `cpus` (Linux).
  /// `invalid_argument` for a worker that is not running or a CPU that does
  /// not exist; `not_supported` where the platform cannot do it or the OS
  /// refuses. Worker threads are named "<pool name>-<index>" (or the worker's
  /// own name) for the OS.
  result<void> set_affinity(std::size_t worker, std::span<const int> cpus);
  /// Sets worker `worker`'s nice level (-20..19; Linux, per thread). Raising
  /// priority needs privileges: `not_supported` with the OS's reason.
  result<void> set_nice(std::size_t worker, int nice);
  /// The platform handle of worker `worker`'s thread (pthread_t on Linux and
  /// macOS), for platform calls the pool does not wrap. Valid while that
  /// worker runs: from start() (or the resize() that started it) until
  /// stop() or a resize() that removes it joins the thread; using it after
  /// that is undefined, as std::thread::native_handle() after join().
  /// `invalid_argument` when `worker` is not an index into get_workers() or
  /// that worker is not running (before start(), after stop(), or removed by
  /// resize()).
  [[nodiscard]] result<native_thread_handle> native_handle(std::size_t worker) const;

  // ---- lifecycle -----------------------------------------------------------

  /// Pauses the pool: jobs are still accepted, but none starts until
  /// resume(); jobs already running finish. Idle workers park (≈0% CPU).
  /// stop(drain) on a paused pool resumes it and runs everything queued;
  /// wait_idle() on a paused pool with queued jobs waits for resume().
  /// Exceptions: a job a worker had already taken when pause() was called
  /// may still start; backpressure::caller_runs runs jobs on the submitting
  /// thread; a worker leaving after resize() runs the jobs on its own deque.
  void pause() noexcept;
  /// Ends pause(): queued jobs start again and parked workers are woken.
  void resume() noexcept;
  /// True between pause() and resume().
  [[nodiscard]] bool is_paused() const noexcept;

  /// Blocks until every job accepted before the call has finished (or been
  /// cancelled). Returns at once on a pool that was never started.
  void wait_idle();

  /// Stops the pool (see stop_mode) and joins the workers. Idempotent: later
  /// calls return the same report. On a pool that was never started, drain
  /// runs the pending jobs on the calling thread.
  stop_report stop(stop_mode mode = stop_mode::drain);

  /// True from a successful start() (or the concise constructor) until stop() begins.
  [[nodiscard]] bool is_running() const noexcept;
  /// True once stop() has finished.
  [[nodiscard]] bool is_stopped() const noexcept;

  /// Changes the number of workers to `n` (1..256), under load. Growing
  /// starts workers at once (reusing ones that left earlier). Shrinking
  /// asks the newest workers to leave: each finishes the job it is running
  /// and the jobs on its own deque first, so nothing is lost and no worker
  /// exits mid-job; resize() does not wait for that. Before start() it sets
  /// how many workers start() starts: the newest are set aside (not
  /// destroyed: get_workers() still lists them) until a later resize()
  /// takes them back. `invalid_argument` for 0 or more than
  /// 256; `pool_stopped` after stop(); `resource_exhausted` when the OS
  /// refuses a thread (nothing changes: the threads made for this call are
  /// joined before they run a job, and the pool keeps its previous size).
  result<void> resize(std::size_t n);

  // ---- observation ----------------------------------------------------------

  /// A snapshot of the pool's counters (see worker_statistics.hpp for its consistency).
  [[nodiscard]] pool_statistics get_statistics() const;
  /// Wait and run times of sampled jobs, merged over all workers (see
  /// pool_options::latency_sample_every).
  [[nodiscard]] worker_latency latency() const;
  /// Workers in the pool, not counting those resize() asked to leave.
  [[nodiscard]] std::size_t worker_count() const;
  /// True when the calling thread is one of this pool's workers.
  [[nodiscard]] bool is_worker_thread() const noexcept { return on_own_worker(); }
  /// The pool's name (pool_options::name, or the seed-style constructor's argument).
  [[nodiscard]] const std::string& get_name() const noexcept { return name_; }
  /// The injector queue this pool was built with.
  [[nodiscard]] pool_queue queue_kind() const noexcept { return queue_kind_; }
  /// Replaces the failure handler (null restores the default stderr line).
  void set_error_handler(error_handler handler);

 private:
  enum class state : int { created, running, stopping, stopped };

  friend bool detail::nothing_left_to_steal(const thread_pool& pool) noexcept;
  template <typename T>
  friend class typed_thread_pool_t;
  friend struct detail::coro_access;

  // Coroutine resumptions go in as plain jobs.
  [[nodiscard]] detail::resume_target coroutine_target() noexcept {
    return {this, [](void* pool, std::uintptr_t, job_function&& job, bool continuation) {
              auto* p = static_cast<thread_pool*>(pool);
              return continuation ? p->enqueue_continuation(std::move(job)) : p->enqueue(std::move(job));
            }};
  }
  void report_coroutine_failure(const std::exception_ptr& e) noexcept { report_failure(e); }

  // Typed pools: a pool around their own injector. Jobs are never pushed to
  // workers' deques by producers (every job goes through the injector, where
  // its kind and priority are known); a worker's deque only holds the rest of
  // a batch of its highest kind, and there is no stealing. Not started.
  thread_pool(detail::custom_injector_t, std::string name, std::unique_ptr<detail::injector> queue,
              std::uint32_t latency_sample_every, error_handler on_error, thread_system::backpressure bounds,
              std::size_t worker_stack_size);

  // Pushes through the injector with `push()` (which returns result<void>),
  // then wakes a worker for the kinds in `kind_mask`.
  template <typename Push>
  // `wake`: when given, the push sets it (see injector::push_and_check())
  // and the pool wakes a worker only if it is true.
  result<void> push_external(std::uint64_t kind_mask, std::span<job_function> fns, Push&& push,
                             const bool* wake = nullptr) {
    // The top tag bit is the pool's: a job never arrives holding room.
    for (auto& fn : fns) fn.set_tag(static_cast<std::uint8_t>(fn.tag() & ~bounded_tag));
    auto queue_push = [&]() -> result<void> {
      if (auto q = push(); !q) return refusal(q.error());
      return {};
    };
    result<void> r = bounds_.capacity != 0 ? push_bounded(fns, queue_push) : queue_push();
    if (!r) {
      // A wait_idle() waiter may have seen an accepted count the refusal
      // rolled back: let it look again.
      became_idle_.notify_all();
      return r;
    }
    if (wake == nullptr || *wake) wake_worker_if_needed(kind_mask);
    return {};
  }
  // Bounded pools (see backpressure.hpp): reserve room for `fns` per the
  // policy, tag them, push them with `push()`, give the room back on refusal.
  // When the policy ran them on this thread, `ran_inline` is set and nothing
  // was pushed.
  template <typename Push>
  result<void> push_bounded(std::span<job_function> fns, Push&& push) {
    bool ran_inline = false;
    if (auto r = acquire_room(fns, ran_inline); !r) return r;
    if (ran_inline) return {};
    for (auto& fn : fns) fn.set_tag(static_cast<std::uint8_t>(fn.tag() | bounded_tag));
    auto give_back = [&] {
      for (auto& fn : fns) fn.set_tag(static_cast<std::uint8_t>(fn.tag() & ~bounded_tag));
      release_room(fns.size());
    };
    result<void> r;
    try {
      r = push();
    } catch (...) {  // e.g. bad_alloc: the jobs were not queued
      give_back();
      throw;
    }
    if (!r) give_back();
    return r;
  }
  result<void> acquire_room(std::span<job_function> fns, bool& ran_inline);
  // The pool's timer queue, created on first use: `pool_stopped` after
  // stop(), `resource_exhausted` when its thread cannot be started (a later
  // call tries again).
  result<timer_queue*> timers();
  // Runs `schedule(queue)` on timers(); its refusal, or resource_exhausted
  // out of memory, otherwise.
  template <typename Schedule>
  result<timer_handle> with_timers(Schedule&& schedule) {
    return detail::refuse_if_out_of_memory([&]() -> result<timer_handle> {
      auto t = timers();
      if (!t) return unexpected_error{t.error()};
      return schedule(**t);
    });
  }
  unexpected_error stopped_error() const {
    return make_error(error_code::pool_stopped, "thread_pool '" + name_ + "' is stopped");
  }
  [[nodiscard]] result<int> worker_os_tid(std::size_t worker) const;
  // Worker `worker` if it is running (its thread joinable, not exited).
  // Caller holds lifecycle_mutex_.
  [[nodiscard]] result<thread_worker*> running_worker_locked(std::size_t worker) const;
  [[nodiscard]] bool try_reserve(std::size_t n) noexcept;
  void release_room(std::size_t n) noexcept;
  [[nodiscard]] bool drop_oldest_queued();
  void run_on_caller(job_function& fn);
  void wait_while_paused() noexcept;
  // Runs `fn`, reports an escaping exception, destroys the callable.
  job_outcome run_guarded(job_function& fn) noexcept;

  // Stamps `fn` with the enqueue time when this thread's sampling countdown
  // says so.
  void stamp_if_sampled(job_function& fn) const noexcept;
  // Typed pools: jobs executed and failed with `tag`, over all workers.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> kind_totals(std::uint8_t tag) const;
  [[nodiscard]] detail::injector& injector_ref() const noexcept { return *queue_; }
  // The active workers (those resize() has not asked to leave or set aside):
  // how many, and the union of their responsibility masks, of all and of the
  // first `first_n` in the order added (the ones resize(first_n) keeps).
  // Allocates nothing.
  struct worker_masks {
    std::uint64_t all = 0;
    std::uint64_t first_n = 0;
    std::size_t active = 0;
  };
  [[nodiscard]] worker_masks active_worker_masks(std::size_t first_n = 0) const;

  result<void> push_one(job_function&& fn);
  result<void> push_one_unchecked(job_function&& fn);
  result<void> push_batch_unchecked(std::span<job_function> fns);
  // push_one() for a job that goes through the injector.
  result<void> push_to_injector(job_function&& fn);
  result<void> push_local(thread_worker& w, job_function&& fn, bool continuation = false);
  // A coroutine's resumption pushed by `co_await schedule()` from one of
  // this pool's workers: into the worker's empty LIFO slot without waking
  // another worker (the pushing job ends at once, and this worker takes the
  // slot next - the continuation rule of Asio's and Tokio's schedulers);
  // otherwise as enqueue().
  result<void> enqueue_continuation(job_function&& fn);
  bool find_and_run(thread_worker& w, std::span<job_function> local, bool helping);
  class worker_help;  // a worker's detail::help_source (src/thread_pool.cpp)
  // Jobs popped from the queue per call when the pool drains or cancels it
  // (stop()). A worker's own batch is thread_worker::injector_batch(); the
  // queue hands out only a fair share (queued / workers), so a small backlog
  // is spread over the workers instead of hoarded by one.
  static constexpr std::size_t max_batch = 16;
  // The job in w's LIFO slot, within its budget (see lifo_budget in the
  // source); owner thread only.
  bool take_from_lifo_slot(thread_worker& w, bool helping, detail::job_node*& out) noexcept;
  // Whether `victim` has finished no job for continuation_grace_ns since w
  // (a thief) started watching it: only then does w take the continuation
  // in victim's LIFO slot (see try_steal()).
  static bool owner_stalled(thread_worker& w, const thread_worker& victim) noexcept;
  bool try_steal(thread_worker& w, detail::job_node*& out);
  void run_node(thread_worker& w, detail::job_node* node);
  void execute(thread_worker& w, job_function& fn);
  [[nodiscard]] bool work_visible(const thread_worker& w) const noexcept;
  result<void> push_batch(std::span<job_function> fns);
  [[nodiscard]] unexpected_error refusal(const error& queue_error) const;
  void wake_worker_if_needed(std::uint64_t kind_mask = ~std::uint64_t{0}) noexcept;
  void wake_all_groups() noexcept;
  detail::wake_group& group_for(std::uint64_t mask);
  // Starts the threads of `batch`, all or none (see "Workers and their
  // threads"); `before_go()` runs once they all exist, before any of them
  // runs. Caller holds lifecycle_mutex_.
  template <typename BeforeGo>
  result<void> launch(std::span<thread_worker* const> batch, BeforeGo before_go);
  // The parts of a worker's set-up that allocate; may throw std::bad_alloc.
  void prepare_worker(thread_worker& w);
  // Makes a started worker visible to thieves (a new one gets a steal slot).
  void publish_worker(thread_worker& w) noexcept;
  [[nodiscard]] unexpected_error too_many_workers(std::size_t requested) const;
  // A worker's allocation failed: count it, report the first of a run.
  void note_allocation_failure(thread_worker& w) noexcept;
  [[nodiscard]] std::size_t active_workers_locked() const noexcept;
  void worker_main(thread_worker& w);
  void run_batch(thread_worker& w, std::span<job_function> batch);
  [[nodiscard]] thread_worker* own_worker() const noexcept;
  void report_failure(const std::exception_ptr& e) noexcept;
  [[nodiscard]] bool idle_now() const noexcept;
  [[nodiscard]] bool on_own_worker() const noexcept;
  [[nodiscard]] bool nothing_left_to_steal_from_caller() const noexcept;  // see detail::nothing_left_to_steal()
  [[nodiscard]] std::uint64_t cancel_queued() noexcept;
  [[nodiscard]] stop_report make_report() const;

  std::string name_;
  std::unique_ptr<detail::injector> queue_;  // never null
  pool_queue queue_kind_ = pool_queue::mutex;

  // Lifecycle: state_ changes under lifecycle_mutex_; read lock-free.
  std::mutex stop_mutex_;  // serialises stop(); never taken by workers
  mutable std::mutex lifecycle_mutex_;
  std::atomic<state> state_{state::created};
  std::vector<std::unique_ptr<thread_worker>> workers_;  // guarded by lifecycle_mutex_
  std::atomic<std::size_t> worker_count_{0};
  // Started workers, for thieves (lock-free reads): slots [0, published_)
  // are set and never change. Written under lifecycle_mutex_.
  std::unique_ptr<std::atomic<thread_worker*>[]> steal_table_{new std::atomic<thread_worker*>[max_workers]};
  std::atomic<std::size_t> published_{0};
  detail::job_node_pool node_pool_;
  stop_report final_report_{};  // guarded by lifecycle_mutex_
  // Accounts for jobs that stop() runs on the calling thread in a pool that
  // was never started (no OS thread behind it).
  thread_worker caller_runner_{"caller"};

  mutable std::mutex handler_mutex_;
  std::shared_ptr<const error_handler> handler_;  // guarded by handler_mutex_

  // Set before workers are told to stop in cancel_pending mode.
  std::atomic<bool> cancel_requested_{false};

  alignas(64) std::atomic<std::uint64_t> cancelled_by_stop_{0};

  // The job_function tag bit of jobs that hold room in a bounded pool
  // (detail::job_tag in scheduler/injector.hpp has the whole byte).
  static constexpr std::uint8_t bounded_tag = detail::job_tag::holds_room;
  thread_system::backpressure bounds_{};
  alignas(64) std::atomic<std::size_t> queued_external_{0};  // bounded pools: jobs holding room
  event_count room_available_;                               // producers blocked by backpressure
  alignas(64) std::atomic<std::uint64_t> dropped_{0};        // drop_oldest victims (count as finished)
  std::atomic<std::uint64_t> caller_ran_{0};                 // jobs run by caller_runs
  std::atomic<std::uint64_t> caller_failed_{0};
  std::atomic<std::uint64_t> caller_cancelled_{0};
  alignas(64) std::atomic<bool> paused_{false};
  event_count resumed_;  // workers holding a job while paused park here

  // false in typed pools: see the custom-injector constructor.
  bool local_deques_ = true;
  // Makes the workers resize() adds (a typed pool makes universal workers of its own type).
  std::unique_ptr<thread_worker> (*make_worker_)() = [] { return std::make_unique<thread_worker>(); };
  std::uint32_t latency_sample_every_ = 32;
  std::uint32_t max_spinners_ = 1;
  std::size_t stack_size_ = 0;  // worker threads' stack, bytes (0: default)
  // What the error handler receives when a worker runs out of memory (built
  // up front: out of memory there is nothing left to build it with).
  std::exception_ptr out_of_memory_report_;

  // Wake groups (see detail::wake_group): slots [0, group_count_) are set
  // and never change; written under lifecycle_mutex_.
  static constexpr std::size_t max_groups = 64;
  std::vector<std::unique_ptr<detail::wake_group>> owned_groups_;  // guarded by lifecycle_mutex_
  std::unique_ptr<std::atomic<detail::wake_group*>[]> groups_{new std::atomic<detail::wake_group*>[max_groups]};
  std::atomic<std::size_t> group_count_{0};

  event_count became_idle_;  // wait_idle() parks here

  // Declared last: destroyed first, so its thread is gone before the queue
  // and workers it dispatches into.
  detail::pool_timers timers_;
};

}  // namespace thread_system
