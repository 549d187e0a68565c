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
// Seed style (configure, then start; the workers' class is in
// pools/thread_worker.hpp and the seed jobs in compat/job.hpp, which this
// header only declares - the umbrella thread_system.hpp has them all; the
// seed overloads below adapt them onto the modern API):
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
//   * A fire-and-forget job that throws, or returns an error (a `result<T>`
//     holding one, an `unexpected_error` from make_error(), an `error`;
//     a seed job whose do_work() returns one), is counted as failed and its
//     exception (the returned error as error_exception) is passed to the
//     error handler; the worker carries on. submit() puts the exception
//     into the future instead (still counted as failed; a returned result
//     is the future's value).
//   * Jobs submitted before start() are kept and run once started.
//   * Idle workers sleep: a worker out of work spins briefly, polls for up
//     to pool_options::idle_wait (100 us by default) more while yielding its
//     CPU, then parks (no CPU use).
//   * Waking them costs a push no locked instruction on Linux: the first
//     pool of a process registers it for membarrier(2)
//     (MEMBARRIER_CMD_PRIVATE_EXPEDITED), pushers then run a compiler
//     barrier instead of a full fence, and a worker that stays parked
//     longer than 1 ms runs one membarrier (a barrier that interrupts the
//     CPUs running this process's other threads) before it sleeps for good.
//     A job is never stranded: in the rare race where a push and a worker
//     going to sleep miss each other, the job waits at most that 1 ms
//     (details: docs/ARCHITECTURE.md, "Parking without lost wake-ups").
//     Elsewhere both sides are full fences.
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
//   * A worker's state, its deque's first ring and its first node list are
//     allocated by the thread that starts it: a worker that runs jobs
//     allocating nothing, and never waits inside one, makes no allocation
//     on its own thread, so it gets no malloc arena of its own (with glibc
//     a page of resident memory per thread). What a worker allocates on its
//     own thread, when it first needs it: a bigger deque or node list, the
//     latency histograms of a sampled job (pool_options::
//     latency_sample_every), and, at its first helping wait, the bounds of
//     its stack (see below; glibc's lookup allocates).
//   * pool_options::worker_stack_size sets the workers' stack (0: the
//     platform default, 8 MiB on Linux). Waits inside jobs that help (a
//     future's get(), task_group::wait(), parallel_for) run other jobs on
//     that stack, so helping waits nest: with the default stack about
//     11 000 levels of a job waiting on a job that waits on a job... fit
//     in a release build (about 2 000 under AddressSanitizer; measured on
//     x86-64 with GCC 12); a bigger stack allows proportionally more (tests/pools/thread_pool_test.cpp,
//     DeepHelpingRecursionWithAConfiguredStack). Past half its stack a
//     helping wait runs only its worker's own jobs (LIFO slot and deque,
//     where that worker's nested waits put their children): jobs from the
//     queue and other workers' deques are left to the rest of the pool, so
//     independent jobs that each wait no longer nest one level per queued
//     job (tests/sync/helping_wait_test.cpp).
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
// that stop() and wait_idle() must not be called from one of this pool's own
// workers (they would wait for themselves; they throw
// `error_exception{invalid_argument}` if they are). The destructor may run
// inside code the pool itself runs - a job on one of its workers (a job
// holding the last shared_ptr to its pool), a timer's function on its timer
// thread (destroyed there when the pool refuses its run, or run there by
// caller_runs), or a job's code that a submission or stop() runs on the
// calling thread (caller_runs, a dropped or discarded job's destructor, a
// drained job): it stops the pool's timers (on the timer thread: cancels
// the pending ones, as no run may reach a destroyed pool) and returns at
// once; the pool closes when that code's call into it returns, every
// accepted job still runs (stop_mode::drain), and the last worker to leave
// joins the others, detaches itself and frees the pool (nothing allocated,
// no thread started; with no worker running, the returning call frees it).
// (At process exit that detached worker may be cut short like any detached
// thread.)
//
// Visibility: everything a job did is visible to a thread after wait_idle()
// or stop() returns in that thread, and to whoever observes the job's future
// become ready.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/core/job_batch.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/core/stop_mode.hpp"
#include "thread_system/coro/coro_base.hpp"
#include "thread_system/coro/sleep_awaiter.hpp"
#include "thread_system/detail/functional.hpp"
#include "thread_system/pools/backpressure.hpp"
#include "thread_system/pools/pool_front.hpp"
#include "thread_system/pools/pool_options.hpp"
#include "thread_system/pools/submission.hpp"
#include "thread_system/pools/this_job.hpp"
#include "thread_system/scheduler/future.hpp"
#include "thread_system/scheduler/injector.hpp"
#include "thread_system/scheduler/timer_handle.hpp"
#include "thread_system/scheduler/worker_statistics.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace thread_system {

class thread_pool;
class thread_worker;  // pools/thread_worker.hpp: needed to make or inspect a worker
class job;            // compat/job.hpp: the seed-style jobs

namespace detail {

// Neither a seed job nor a seed worker (those have enqueue overloads of their own).
template <typename F>
concept not_a_seed_object =
    !std::is_convertible_v<F, std::unique_ptr<job>> && !std::is_convertible_v<F, std::unique_ptr<thread_worker>>;

// How task_group and parallel_for hand their pieces to the pool (defined
// below the class).
struct fork_access;

}  // namespace detail

/// A fixed set of worker threads running jobs from a shared queue, with work stealing (see the header comment).
class thread_pool : public detail::pool_front {
 public:
  /// The most workers one pool can have (see "Workers and their threads").
  static constexpr std::size_t max_workers = pool_front::max_workers;

  /// Seed style: a named pool with no workers, not started (default options).
  explicit thread_pool(std::string name);

  /// Seed style with options: a pool named `name` (options.name is not
  /// used), no workers, not started; the injector, backpressure, latency
  /// sampling, stack size and error handler come from `options`. Throws
  /// `error_exception{invalid_argument}` for invalid backpressure, as the
  /// concise constructor.
  thread_pool(std::string name, const pool_options& options);

  /// Concise style: `worker_count` workers, started. Throws
  /// `error_exception{invalid_argument}` when worker_count is 0. (`options`
  /// by reference: the pool copies what it keeps, so running out of memory
  /// there is its `resource_exhausted`, not a std::bad_alloc from the call.)
  explicit thread_pool(std::size_t worker_count = default_worker_count(), const pool_options& options = {});

  /// stop(stop_mode::drain) unless already stopped. Must not be called from one of this pool's workers.
  ~thread_pool();
  /// Not copyable.
  thread_pool(const thread_pool&) = delete;
  /// Not copyable.
  thread_pool& operator=(const thread_pool&) = delete;

  /// hardware_concurrency() (asked once per process), or 1 when unknown;
  /// at most max_workers.
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
  // start() and get_workers(): detail::pool_front.

  // ---- jobs ----------------------------------------------------------------

  /// Seed-style job (compat/job.hpp), run as job::to_job_function() makes
  /// it. Null or not runnable(): `invalid_argument`.
  result<void> enqueue(std::unique_ptr<job> j);
  /// Seed-style batch: all accepted or none (a null or not runnable() entry
  /// refuses the batch with `invalid_argument`).
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

  /// A range of callables, accepted all or none under one queue lock. A
  /// refused batch is left with the caller: callables moved out of a range
  /// passed as an rvalue (`std::move(v)`) are moved back into it
  /// (core/job_batch.hpp), and a std::vector<job_function> is offered in
  /// place, its jobs moved only once the batch is accepted.
  template <callable_range R>
  result<void> enqueue_batch(R&& callables) {
    return detail::refuse_if_out_of_memory([&]() -> result<void> {
      return detail::offer_job_batch(std::forward<R>(callables),
                                     [this](std::span<job_function> batch) { return push_batch(batch); });
    });
  }

  /// Runs `f(args...)` once and returns a future for its result or
  /// exception. Arguments are decay-copied (moved when rvalues). Throws
  /// `error_exception` when refused, with enqueue()'s codes (`pool_stopped`,
  /// `invalid_argument`, `queue_full`, `timeout`, `resource_exhausted`).
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
    return add_timer(detail::timer_after(timer_route{}, delay, std::forward<F>(f)));
  }
  /// Runs `f` once at `when` (steady_clock; at once if that has passed).
  template <typename Duration, typename F>
  result<timer_handle> schedule_at(std::chrono::time_point<std::chrono::steady_clock, Duration> when, F&& f) {
    return add_timer(detail::timer_at(timer_route{}, when, std::forward<F>(f)));
  }
  /// Runs `f` every `period`, first after one period. `f` may take a
  /// `const timer_tick&` (its scheduled time and index).
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_every(std::chrono::duration<Rep, Period> period, F&& f) {
    return add_timer(detail::timer_every(timer_route{}, period, period, std::forward<F>(f)));
  }
  /// Runs `f` every `period`, first after `initial_delay`.
  template <typename Rep1, typename Period1, typename Rep2, typename Period2, typename F>
  result<timer_handle> schedule_every(std::chrono::duration<Rep1, Period1> initial_delay,
                                      std::chrono::duration<Rep2, Period2> period, F&& f) {
    return add_timer(detail::timer_every(timer_route{}, initial_delay, period, std::forward<F>(f)));
  }

  // ---- coroutines (coro/task.hpp, docs/COROUTINES.md) ---------------------------

  /// `co_await pool.schedule();` continues the coroutine in a job of this
  /// pool; throws the refusal (pool_stopped, ...) instead of suspending when
  /// the pool does not accept it.
  [[nodiscard]] detail::schedule_awaiter schedule() noexcept { return detail::schedule_awaiter(coroutine_target()); }
  /// `co_await pool.sleep_for(d);` resumes on a worker after `d` (the timer
  /// queue; no thread blocks); a zero, negative or NaN `d` is due at once.
  /// See coro/sleep_awaiter.hpp.
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

  // ---- observation ----------------------------------------------------------

  /// The injector queue this pool was built with.
  [[nodiscard]] pool_queue queue_kind() const noexcept { return queue_kind_; }

  // Lifecycle (start, pause, resume, wait_idle, stop, resize), threads
  // (set_affinity, set_nice, native_handle) and observation (get_statistics,
  // latency, worker_count, get_workers, get_name, is_worker_thread,
  // set_error_handler, get_timer_statistics): detail::pool_front, shared
  // with the typed pool (pools/pool_front.hpp has their contracts).

 private:
  friend struct detail::coro_access;
  friend struct detail::fork_access;

  // Coroutine resumptions go in as plain jobs.
  [[nodiscard]] detail::resume_target coroutine_target() noexcept {
    static constexpr detail::resume_ops ops{
        [](void* pool, std::uintptr_t, job_function&& job, bool continuation) {
          auto* p = static_cast<thread_pool*>(pool);
          return continuation ? p->push_continuation(std::move(job)) : p->enqueue(std::move(job));
        },
        [](void* pool, const std::exception_ptr& e) noexcept { static_cast<thread_pool*>(pool)->report_failure(e); }};
    return {this, &ops};
  }

  // Puts a built timer on the pool's timer queue (created on first use); its
  // runs are plain jobs. Refusals: see pool_front::add_timer().
  result<timer_handle> add_timer(detail::built_timer&& timer);

  pool_queue queue_kind_ = pool_queue::mutex;
};

namespace detail {

// A fork-join piece (a task_group child, a parallel_for half): from one of
// the pool's workers onto that worker's deque, past its LIFO slot, where the
// worker's helping wait pops it back and thieves take the oldest piece
// first; from any other thread as enqueue() (pool_front::push_fork()).
struct fork_access {
  static result<void> push(thread_pool& pool, job_function&& fn) { return pool.push_fork(std::move(fn)); }
  /// A callable, wrapped as enqueue(F&&) wraps it (out of memory: resource_exhausted).
  template <runnable F>
  static result<void> push(thread_pool& pool, F&& f) {
    return refuse_if_out_of_memory([&] { return pool.push_fork(job_function(std::forward<F>(f))); });
  }
};

}  // namespace detail

}  // namespace thread_system
