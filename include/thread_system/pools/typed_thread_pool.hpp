// typed_thread_pool_t<T>: a pool whose jobs have a type (a priority class)
// and whose workers serve the types they are responsible for, highest
// priority first.
//
//   using namespace thread_system;
//   auto pool = std::make_shared<typed_thread_pool_t<job_types>>("PriorityPool");
//   for (auto t : {job_types::RealTime, job_types::Batch, job_types::Background}) {
//     auto w = std::make_unique<typed_thread_worker_t<job_types>>();
//     w->set_responsibilities({t});                        // a specialist
//     pool->add_worker(std::move(w));
//   }
//   pool->add_worker(std::make_unique<typed_thread_worker_t<job_types>>());  // universal
//   pool->start();
//   pool->enqueue(job_types::RealTime, [] { handle_tick(); });
//   future<int> f = pool->submit(job_types::Batch, [](int x) { return x * 2; }, 21);
//
// Or concisely: `typed_thread_pool_t<job_types> pool{4};` - four universal
// workers, started.
//
// Types and priority
//   * T is any enum (or integer) type; its rank (0 = highest priority) comes
//     from `priority_order`, or its value (typed_pool_options.hpp has the rule).
//   * Each type has its own queue, created on first use, of the kind given by
//     `queue` / set_queue_strategy() (adaptive by default).
//
// Scheduling (one worker loop for the whole library: this pool runs on the
// same core as thread_pool)
//   * A worker serves only the types in its responsibilities (a worker with
//     none set is universal: it serves every type). It always takes the
//     highest-priority job it serves that is queued. Jobs of the highest
//     type it serves may come as a batch (a fair share of that queue, kept
//     on the worker's own deque and run next unless a job of a higher type
//     appears meanwhile); any other type one job at a time, so the choice
//     is made again for every such job. Jobs do not migrate between workers
//     (no stealing), so a specialist never runs another type.
//   * Strict priority by default: a lower type starts on a worker only when
//     no job of a higher type that worker serves is queued. With one worker
//     this is an exact order. With several workers it holds per worker: a
//     specialist for Background runs Background jobs while RealTime jobs wait
//     for the RealTime workers; that is what responsibilities are for.
//   * Aging (opt-in, `aging_bound` > 0): a type whose jobs have been queued
//     for `aging_bound` without one of them starting is served next by the
//     first worker serving it that looks for work, ahead of higher types. So
//     under a flood of high-priority work a Background type is still served
//     at least once per bound (plus the duration of the jobs that are running
//     when the bound expires).
//   * Waking: workers with identical responsibilities park together; a push
//     wakes one worker of each such group that serves the job's type.
//
// Guarantees (as for thread_pool)
//   * Every accepted job runs exactly once, or is cancelled and counted:
//     by stop(stop_mode::cancel_pending), by its cancellation token, or by
//     backpressure::drop_oldest (which picks the oldest job of the
//     lowest-priority type that has one).
//   * Refusals are errors: an empty job is `invalid_argument`; a type outside
//     the priority order or beyond rank 63 is `invalid_argument`; a type that
//     no added worker serves is `no_worker` (checked at enqueue time, so a job
//     is never accepted to wait forever; add the worker first); after stop,
//     `pool_stopped`. submit() throws the error as `error_exception`.
//   * Failures of fire-and-forget jobs go to the error handler and are counted
//     (per type too); submit() puts them into the future.
//   * The destructor is stop(stop_mode::drain).
//
// As on thread_pool: cancellation tokens (enqueue(type, token, f),
// submit(type, token, f, args...); this_job::token() inside the job),
// pause()/resume(), set_affinity()/set_nice() of a worker, backpressure and
// latency sampling (typed_pool_options), statistics and the error handler.
// Timers: schedule_after/at/every(type, ...) queue each run as a job of
// that type. resize() as thread_pool's, except that it never leaves a type
// without a worker (it adds universal workers and refuses a shrink that would
// orphan a type).
//
// Threading: every member may be called from any thread, except that stop()
// and wait_idle() must not be called from one of this pool's workers. The
// destructor may run on one, on the pool's timer thread, or in a job run on
// a submitting thread, as for thread_pool (the pool is drained and freed by
// its last worker). Visibility as for thread_pool.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/core/job_batch.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/coro/coro_base.hpp"
#include "thread_system/coro/sleep_awaiter.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/pools/job_types.hpp"
#include "thread_system/pools/submission.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"
#include "thread_system/pools/typed_pool_options.hpp"
#include "thread_system/pools/typed_worker.hpp"
#include "thread_system/queues/queue_kind.hpp"
#include "thread_system/scheduler/typed_injector.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace thread_system {

/// A pool whose jobs have a type (a priority class) and whose workers serve the types they are responsible for,
/// highest priority first (see the header comment).
template <typename T>
class typed_thread_pool_t : public detail::pool_front {
  static_assert(job_type<T>, "typed_thread_pool_t<T>: T must be an enum or integer type");

 public:
  /// The worker class this pool accepts.
  using worker_type = typed_thread_worker_t<T>;
  /// Most job types a pool can have: ranks 0..63.
  static constexpr std::size_t max_types = detail::typed_injector::max_kinds;

  /// Seed style: no workers, not started.
  explicit typed_thread_pool_t(std::string name = "typed_thread_pool", typed_pool_options<T> options = {})
      : typed_thread_pool_t(with_name(std::move(options), std::move(name))) {}
  // (Arguments are built by the caller: an allocation failure there is the
  // caller's std::bad_alloc, before this pool exists.)

  /// Concise: `universal_workers` universal workers, started. Throws
  /// error_exception (invalid_argument for 0 workers, or the start error).
  typed_thread_pool_t(std::size_t universal_workers, typed_pool_options<T> options)
      : typed_thread_pool_t(std::move(options)) {
    if (universal_workers == 0) {
      throw error_exception(error{error_code::invalid_argument, "typed_thread_pool: worker count must be at least 1"});
    }
    // Universal workers, made as resize() makes them (more than max_workers: invalid_argument).
    if (auto r = resize(universal_workers); !r) throw error_exception(r.error());
    if (auto r = start(); !r) {
      (void)stop(stop_mode::cancel_pending);
      throw error_exception(r.error());
    }
  }
  /// Concise with default options: `universal_workers` universal workers, started. Throws as the constructor above.
  explicit typed_thread_pool_t(std::size_t universal_workers) try
      : typed_thread_pool_t(universal_workers, typed_pool_options<T>{}) {
  } catch (const std::bad_alloc&) {  // the default options' name
    throw error_exception(detail::out_of_memory_error().value);
  }

  /// Not copyable.
  typed_thread_pool_t(const typed_thread_pool_t&) = delete;
  /// Not copyable.
  typed_thread_pool_t& operator=(const typed_thread_pool_t&) = delete;
  /// stop(stop_mode::drain), while every member jobs may still use exists
  /// (and a spawned task's failure report: see coro/spawn.hpp).
  ~typed_thread_pool_t() { stop_for_destructor(); }

  // ---- configuration and workers --------------------------------------------

  /// Seed API: the same as set_queue() (queue_strategy is pool_queue).
  result<void> set_queue_strategy(queue_strategy strategy) { return set_queue(strategy); }
  /// The queue kind for types used from now on. Before the first job only: afterwards `already_started`;
  /// `invalid_argument` for pool_queue::bounded.
  result<void> set_queue(pool_queue kind) {
    if (kind == pool_queue::bounded) return bounded_refused();
    if (!is_known(kind)) return unknown_queue_kind(kind);
    if (!injector().set_queue_kind(kind)) {
      return make_error_nothrow(error_code::already_started,
                                [this] { return named() + ": the queue kind is fixed once a job was queued"; });
    }
    return {};
  }

  /// The queue kind of the per-type queues (typed_pool_options::queue or set_queue()).
  [[nodiscard]] pool_queue queue_kind() const { return injector().queue_kind(); }

  /// Adds a worker (seed: add_worker / enqueue). Its responsibilities must
  /// name types this pool knows (`invalid_argument`). Null: `invalid_argument`;
  /// after stop: `pool_stopped`. On a running pool it starts at once.
  result<void> add_worker(std::unique_ptr<worker_type> worker) {
    if (!worker) return make_error(error_code::invalid_argument, "typed_thread_pool::add_worker: null worker");
    return detail::refuse_if_out_of_memory([&] {
      std::vector<std::unique_ptr<worker_type>> one;
      one.push_back(std::move(worker));
      return enqueue_batch(std::move(one));
    });
  }
  /// Same as add_worker().
  result<void> enqueue(std::unique_ptr<worker_type> worker) { return add_worker(std::move(worker)); }

  /// Adds all workers, or none when one is refused up front (see add_worker).
  result<void> enqueue_batch(std::vector<std::unique_ptr<worker_type>> workers) {
    return detail::refuse_if_out_of_memory([&] { return add_workers(std::move(workers)); });
  }

  /// Starts the workers (as thread_pool::start()).
  result<void> start() {
    std::lock_guard lock(config_mutex_);
    auto r = pool_front::start();
    refresh_served();  // all workers started, or none (the pool stays startable)
    return r;
  }

  /// The workers in the order added.
  [[nodiscard]] std::vector<worker_type*> get_workers() const {
    std::vector<worker_type*> out;
    for (thread_worker* w : pool_front::get_workers()) out.push_back(static_cast<worker_type*>(w));
    return out;
  }

  // ---- jobs --------------------------------------------------------------------

  /// Any callable `f()` as a job of `type`. On refusal the callable is not run.
  template <thread_system::runnable F>
  result<void> enqueue(T type, F&& f) {
    return detail::refuse_if_out_of_memory([&] { return enqueue(type, job_function(std::forward<F>(f))); });
  }

  /// `f()` as a job of `type` carrying `token` (as thread_pool::enqueue(token, f)):
  /// cancelled before it starts, it never runs and is counted as cancelled;
  /// while it runs, this_job::token() / this_job::is_cancelled() see the token.
  template <thread_system::runnable F>
  result<void> enqueue(T type, cancellation_token token, F&& f) {
    return detail::refuse_if_out_of_memory(
        [&] { return enqueue(type, detail::make_cancellable_job(std::move(token), std::forward<F>(f))); });
  }

  /// A job_function of `type`. On refusal `fn` is left untouched.
  result<void> enqueue(T type, job_function&& fn) {
    if (!fn) {
      return make_error_nothrow(error_code::invalid_argument, [this] { return named() + ": empty job"; });
    }
    return detail::refuse_if_out_of_memory([&]() -> result<void> {
      std::size_t rank = served_rank(type);
      if (rank == max_types) {  // the refusal (or a worker added since)
        auto r = routable_rank(type);
        if (!r) return unexpected_error{std::move(r).error()};
        rank = *r;
      }
      return push_rank(rank, std::move(fn));
    });
  }

  /// Seed-style typed job (compat/typed_job.hpp); its type() routes it.
  /// Null or not runnable(): `invalid_argument`.
  result<void> enqueue(std::unique_ptr<typed_job_t<T>> j) {
    const T type = j ? j->type() : T{};
    auto fn = typed_job_t<T>::to_job_function(std::move(j), "typed_thread_pool::enqueue");
    if (!fn) return unexpected_error{std::move(fn).error()};  // moved: a copy could fail for memory
    return enqueue(type, std::move(*fn));
  }

  /// A range of callables of one type, accepted all or none.
  template <callable_range R>
  result<void> enqueue_batch(T type, R&& callables) {
    return detail::refuse_if_out_of_memory([&] { return enqueue_range(type, std::forward<R>(callables)); });
  }

 private:
  // Refusals in enqueue(type, f)'s order: an empty job, then the type.
  // A refused batch is given back (detail::offer_job_batch).
  template <typename R>
  result<void> enqueue_range(T type, R&& callables) {
    return detail::offer_job_batch(std::forward<R>(callables), [&](std::span<job_function> batch) -> result<void> {
      if (auto r = refuse_empty_jobs(batch); !r) return r;
      auto rank = routable_rank(type);
      if (!rank) return unexpected_error{std::move(rank).error()};
      for (auto& fn : batch) fn.set_tag(detail::job_tag::with_rank(fn.tag(), *rank));  // the injector routes by the tag
      return push_routed_batch(std::uint64_t{1} << *rank, batch);
    });
  }

 public:
  /// Runs `f(args...)` as a job of `type`; the future carries its result or
  /// exception, and waiting on it from one of this pool's workers helps run
  /// other jobs that worker serves. Throws error_exception when refused.
  /// A job submitted by a job goes to the typed queue (its type decides who
  /// runs it), not to the submitting worker: past half a worker's stack its
  /// waits run none of the queue's jobs (sync/helping_wait.hpp), so a chain
  /// of jobs each waiting for the next one it submits may nest only that
  /// deep on a one-worker typed pool and then waits for good (x86-64,
  /// release build: 3 000 levels finished with the default 8 MiB stack and
  /// 8 000 did not; 10 and 40 with a 64 KiB stack).
  template <typename F, typename... Args>
    requires submittable<F, Args...>
  [[nodiscard]] auto submit(T type, F&& f, Args&&... args)
      -> future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> {
    return detail::throw_if_out_of_memory([&] {
      // An empty callable first, then the type (as enqueue(type, f)), both
      // before the callable is moved.
      detail::refuse_empty_submission(f);
      if (auto rank = routable_rank(type); !rank) throw error_exception(rank.error());
      auto [result_future, fn] = detail::make_submission(std::forward<F>(f), std::forward<Args>(args)...);
      if (auto r = enqueue(type, std::move(fn)); !r) throw error_exception(r.error());
      return std::move(result_future);
    });
  }

  /// submit() with a token (as thread_pool::submit(token, f, args...)): cancelled
  /// before it starts, the job does not run and the future completes with
  /// error_exception{cancelled}.
  template <typename F, typename... Args>
    requires submittable<F, Args...>
  [[nodiscard]] auto submit(T type, cancellation_token token, F&& f, Args&&... args)
      -> future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> {
    return detail::throw_if_out_of_memory([&] {
      detail::refuse_empty_submission(f);  // as above
      if (auto rank = routable_rank(type); !rank) throw error_exception(rank.error());
      auto [result_future, fn] =
          detail::make_cancellable_submission(std::move(token), std::forward<F>(f), std::forward<Args>(args)...);
      if (auto r = enqueue(type, std::move(fn)); !r) throw error_exception(r.error());
      return std::move(result_future);
    });
  }

  // ---- timers ------------------------------------------------------------------
  // Delayed and periodic jobs of a type, as thread_pool's schedule_*() (the
  // contract is timer_queue's: never early, periodic runs on their grid and
  // never overlapping, cancel() through the handle). The type is checked
  // when the timer is scheduled; each run is then queued as a job of that
  // type. Refusals, in thread_pool::schedule_*()'s order: `pool_stopped`
  // once stop() has begun, then the caller's mistakes (`invalid_argument`: a
  // type without a rank, then the timer's own: an empty function, a NaN or
  // negative delay, a bad period), then `no_worker` (no worker serves the
  // type), `resource_exhausted`. One timer thread per pool, started by the
  // first schedule_*(). stop() stops the timers first (drain dispatches
  // one-shot timers already due, cancels and counts the rest).

  /// Runs `f` once as a job of `type`, `delay` from now.
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_after(T type, std::chrono::duration<Rep, Period> delay, F&& f) {
    return with_timers(type, [&](timer_route r) { return detail::timer_after(r, delay, std::forward<F>(f)); });
  }
  /// Runs `f` once as a job of `type` at `when` (steady_clock; at once if that has passed).
  template <typename Duration, typename F>
  result<timer_handle> schedule_at(T type, std::chrono::time_point<std::chrono::steady_clock, Duration> when, F&& f) {
    return with_timers(type, [&](timer_route r) { return detail::timer_at(r, when, std::forward<F>(f)); });
  }
  /// Runs `f` as a job of `type` every `period`, first after one period; `f`
  /// may take a `const timer_tick&`.
  template <typename Rep, typename Period, typename F>
  result<timer_handle> schedule_every(T type, std::chrono::duration<Rep, Period> period, F&& f) {
    return with_timers(type, [&](timer_route r) { return detail::timer_every(r, period, period, std::forward<F>(f)); });
  }
  /// Runs `f` as a job of `type` every `period`, first after `initial_delay`.
  template <typename Rep1, typename Period1, typename Rep2, typename Period2, typename F>
  result<timer_handle> schedule_every(T type, std::chrono::duration<Rep1, Period1> initial_delay,
                                      std::chrono::duration<Rep2, Period2> period, F&& f) {
    return with_timers(
        type, [&](timer_route r) { return detail::timer_every(r, initial_delay, period, std::forward<F>(f)); });
  }

  /// `co_await pool.schedule(type);` continues the coroutine in a job of
  /// `type` (its priority, its workers), as thread_pool::schedule().
  [[nodiscard]] detail::schedule_awaiter schedule(T type) noexcept {
    return detail::schedule_awaiter(coroutine_target(type));
  }
  /// `co_await pool.sleep_for(type, d);` resumes after `d` in a job of
  /// `type` (the timer queue; no thread blocks), as thread_pool::sleep_for().
  template <typename Rep, typename Period>
  [[nodiscard]] detail::sleep_awaiter<detail::typed_timer_arm<typed_thread_pool_t, T>> sleep_for(
      T type, std::chrono::duration<Rep, Period> d) {
    return {detail::typed_timer_arm<typed_thread_pool_t, T>{this, type}, detail::due_after(d), coroutine_target(type)};
  }
  /// `co_await pool.sleep_until(type, t);` resumes at `t` (steady_clock) in a job of `type`.
  template <typename Duration>
  [[nodiscard]] detail::sleep_awaiter<detail::typed_timer_arm<typed_thread_pool_t, T>> sleep_until(
      T type, std::chrono::time_point<std::chrono::steady_clock, Duration> t) {
    return {detail::typed_timer_arm<typed_thread_pool_t, T>{this, type}, detail::due_at(t), coroutine_target(type)};
  }

  // Workers' threads (set_affinity, set_nice, native_handle), pause(),
  // resume(), wait_idle(), stop() (the timers first, then the workers),
  // statistics, latency, the error handler and the timers' counters:
  // detail::pool_front, shared with thread_pool (pools/pool_front.hpp).

  // ---- lifecycle ---------------------------------------------------------------

  /// Changes the number of workers to `n` (1..256), as thread_pool::resize():
  /// under load, nothing lost, no worker leaves mid-job; before start() it
  /// sets how many workers start() starts. Growing takes back workers that
  /// are leaving or left (with their responsibilities), then adds universal
  /// workers. Shrinking keeps the first `n` workers in the order added and
  /// asks the others to leave; it is refused with `no_worker`, and nothing
  /// changes, when the workers kept would not serve every type the pool's
  /// workers serve now (a type's jobs are never left without a worker). A
  /// universal worker serves every type - without a priority_order every
  /// rank 0..63 - so once the pool has one, a shrink must keep one.
  /// Other refusals as thread_pool::resize(), in this order: `invalid_argument`
  /// for 0 or more than 256, then `pool_stopped` after stop() (never
  /// `no_worker` then), `resource_exhausted`.
  result<void> resize(std::size_t n) {
    std::lock_guard lock(config_mutex_);
    // A bad count, then a stopped pool, is refused below (pool_front) before
    // the no_worker check.
    if (n != 0 && n <= max_workers && !stop_begun()) {
      const auto masks = active_worker_masks(n);
      // relaxed: served_ is written only under config_mutex_, held here.
      const std::uint64_t orphaned = served_.load(std::memory_order_relaxed) & ~masks.first_n & ranks_.valid_mask();
      if (n < masks.active && orphaned != 0) {
        const auto rank = static_cast<std::size_t>(std::countr_zero(orphaned));
        return make_error_nothrow(error_code::no_worker, [&] {
          return named() + ": resize to " + std::to_string(n) + " would leave job type " + name_of_rank(rank) +
                 " without a worker";
        });
      }
    }
    auto r = pool_front::resize(n);
    refresh_served();
    return r;
  }

  // ---- observation ----------------------------------------------------------

  /// One entry per type that has been used, highest priority first.
  [[nodiscard]] std::vector<job_type_statistics> get_type_statistics() const {
    std::vector<job_type_statistics> out;
    const detail::typed_injector& inj = injector();
    for (std::uint64_t m = inj.created_mask(); m != 0; m &= m - 1) {
      const auto rank = static_cast<std::size_t>(std::countr_zero(m));
      // Executed and cancelled first, accepted after (done_totals() and
      // view() load with acquire): a live snapshot never shows more jobs
      // run or cancelled than accepted.
      const auto [executed, failed] = inj.done_totals(rank);
      const auto view = inj.view(rank);
      out.push_back(job_type_statistics{name_of_rank(rank), rank, view.accepted, executed, failed, view.cancelled,
                                        view.waiting, view.wait});
    }
    return out;
  }

  /// The priority rank of `type` (0 = highest), or `invalid_argument`.
  [[nodiscard]] result<std::size_t> rank_of(T type) const { return ranks_.rank_of(type, get_name()); }

  /// "RealTime", or "type <n>" for a type without to_string().
  [[nodiscard]] static std::string type_name(T type) { return detail::job_type_ranks<T>::type_name(type); }

 private:
  friend struct detail::coro_access;

  // Coroutine resumptions go in as jobs of their type.
  [[nodiscard]] detail::resume_target coroutine_target(T type) noexcept {
    static constexpr detail::resume_ops ops{
        [](void* pool, std::uintptr_t t, job_function&& job, bool /*continuation*/) {
          return static_cast<typed_thread_pool_t*>(pool)->enqueue(static_cast<T>(t), std::move(job));
        },
        [](void* pool, const std::exception_ptr& e) noexcept {
          static_cast<typed_thread_pool_t*>(pool)->report_failure(e);
        }};
    return {this, &ops, static_cast<std::uintptr_t>(type)};
  }
  result<void> add_workers(std::vector<std::unique_ptr<worker_type>> workers) {
    std::lock_guard lock(config_mutex_);
    std::vector<std::uint64_t> masks;
    masks.reserve(workers.size());
    for (const auto& w : workers) {
      if (!w) {
        return make_error_nothrow(error_code::invalid_argument, [this] { return named() + ": null worker in batch"; });
      }
      if (w->belongs_to_pool()) {
        return make_error(error_code::invalid_argument, "typed_thread_pool: the worker already belongs to a pool");
      }
      auto mask = ranks_.mask_of(w->responsibilities_, get_name());
      if (!mask) return unexpected_error{std::move(mask).error()};
      masks.push_back(*mask);
    }
    std::vector<std::unique_ptr<thread_worker>> base;
    base.reserve(workers.size());
    for (std::size_t i = 0; i < workers.size(); ++i) {
      workers[i]->set_responsibility_mask(masks[i]);  // the core marks it owned when it takes it
      base.push_back(std::move(workers[i]));
    }
    auto r = pool_front::add_workers(std::move(base));
    refresh_served();  // exactly the workers the pool kept (a start may fail part-way)
    return r;
  }

  explicit typed_thread_pool_t(typed_pool_options<T>&& options) try
      : typed_thread_pool_t(std::move(options),
                            new detail::typed_injector(checked_queue_kind(options.queue),
                                                       checked_aging_bound(options.aging_bound))) {  // owned below
  } catch (const std::bad_alloc&) {
    throw error_exception(detail::out_of_memory_error().value);
  }
  // `injector` is new and owned from the first step on.
  typed_thread_pool_t(typed_pool_options<T>&& options, detail::typed_injector* injector) try
      : pool_front(typed_core_config(options, injector)),
        options_(std::move(options)),
        ranks_(options_.priority_order),
        injector_(injector) {
    if (options_.queue == pool_queue::bounded) throw error_exception(bounded_refused().value);
  } catch (const std::bad_alloc&) {
    throw error_exception(detail::out_of_memory_error().value);
  }

  // The core's settings: the typed injector (owned from the first step on),
  // no local deques (jobs go through the injector, which knows their
  // types), universal workers of this pool's type for resize().
  static detail::core_config typed_core_config(const typed_pool_options<T>& o, detail::typed_injector* injector) {
    std::unique_ptr<detail::injector> owned(injector);  // first: nothing below leaks it
    detail::core_config c = detail::core_config_of(o, o.name, std::move(owned));
    c.kind = "typed_thread_pool";
    c.local_deques = false;
    c.make_worker = []() -> std::unique_ptr<thread_worker> { return std::make_unique<worker_type>(); };
    return c;
  }

  static typed_pool_options<T> with_name(typed_pool_options<T> o, std::string name) {
    o.name = std::move(name);
    return o;
  }

  static unexpected_error unknown_queue_kind(pool_queue kind) noexcept {
    return detail::unknown_queue_kind("typed_thread_pool", kind);
  }
  // The constructor's check of typed_pool_options::queue, before the
  // injector is made of it.
  static pool_queue checked_queue_kind(pool_queue kind) {
    if (!is_known(kind)) throw error_exception(unknown_queue_kind(kind).value);
    return kind;
  }
  // A negative bound is a mistake (as a negative idle_wait), not strict priority.
  static std::chrono::nanoseconds checked_aging_bound(std::chrono::nanoseconds bound) {
    if (bound.count() < 0) {
      throw error_exception(
          make_error(error_code::invalid_argument, "typed_pool_options::aging_bound: negative duration").value);
    }
    return bound;
  }

  static unexpected_error bounded_refused() {
    return make_error(error_code::invalid_argument,
                      "typed_thread_pool: pool_queue::bounded is for thread_pool; bound a typed pool with "
                      "typed_pool_options::backpressure");
  }

  std::string name_of_rank(std::size_t rank) const { return ranks_.name_of_rank(rank); }

  // Queues `fn` (left untouched on refusal) as a job of the type of `rank`.
  result<void> push_rank(std::size_t rank, job_function&& fn) {
    fn.set_tag(detail::job_tag::with_rank(fn.tag(), rank));  // the injector routes by the tag
    // Straight into the kind's queue when it exists (and aging is off): the
    // same push, one call fewer (typed_injector::direct_queue()).
    detail::injector* direct = injector_->direct_queue(rank);
    return push_routed(std::uint64_t{1} << rank, direct != nullptr ? *direct : *injector_, std::move(fn));
  }

  // Puts the timer `build(route)` makes on the pool's timer queue (created
  // on first use), the route naming the rank of `type`. Refusals in the
  // order of the timers' comment above (add_timer() checks the stop again,
  // under its lock).
  template <typename Build>
  result<timer_handle> with_timers(T type, Build&& build) {
    return detail::refuse_if_out_of_memory([&]() -> result<timer_handle> {
      if (stop_begun()) return stopped_error();
      auto rank = rank_of(type);
      if (!rank) return unexpected_error{std::move(rank).error()};
      detail::built_timer timer = build(timer_route{static_cast<std::uint32_t>(*rank)});
      if (!timer) return unexpected_error{std::move(timer).error()};
      if (auto served = routable_rank(type); !served) return unexpected_error{std::move(served).error()};
      return add_timer([this](job_function&& fn, timer_route r) { return push_rank(r.id, std::move(fn)); },
                       std::move(timer));
    });
  }

  // The rank of `type` if some added worker serves it, else max_types:
  // routable_rank() without building a refusal (every enqueue asks).
  std::size_t served_rank(T type) const noexcept {
    const std::size_t rank = ranks_.rank_or_none(type);
    // acquire: pairs with the release in refresh_served().
    if (rank < max_types && (served_.load(std::memory_order_acquire) & (std::uint64_t{1} << rank)) != 0) return rank;
    return max_types;
  }

  // The rank of `type` if some added worker serves it; else the refusal:
  // `invalid_argument` for a type without a rank, then `pool_stopped` once
  // stop() has begun (as for every other push), `no_worker` otherwise.
  result<std::size_t> routable_rank(T type) const {
    if (const std::size_t rank = served_rank(type); rank != max_types) return rank;
    auto rank = rank_of(type);
    if (!rank) return rank;
    if (stop_begun()) return stopped_error();
    return not_served(type);
  }

  THREAD_SYSTEM_NOINLINE unexpected_error not_served(T type) const {
    return make_error_nothrow(error_code::no_worker, [&] {
      return named() + ": no worker serves job type " + type_name(type) + "; add one before queueing such jobs";
    });
  }

  detail::typed_injector& injector() const noexcept { return *injector_; }

  // served_ = the types the pool's active workers serve. Caller holds
  // config_mutex_. Allocates nothing (so it cannot fail after a change).
  void refresh_served() {
    const std::uint64_t mask = active_worker_masks().all;
    // release: pairs with the acquire in served_rank().
    served_.store(mask, std::memory_order_release);
  }

  typed_pool_options<T> options_;
  mutable std::mutex config_mutex_;  // serialises worker additions
  // Read by every enqueue and written almost never: a cache line of their
  // own (they are last, and the pool's size is a multiple of the line), so
  // that neither the pool's workers nor whatever the caller keeps next to
  // the pool (a counter its jobs increment, say) writes to the line a
  // producer reads per job.
  alignas(64) detail::job_type_ranks<T> ranks_;  // throws for a bad priority_order
  detail::typed_injector* injector_ = nullptr;   // the core's injector, owned there
  std::atomic<std::uint64_t> served_{0};         // types some added worker serves (bit per rank)
};

/// The seed's names for the default job types.
using typed_thread_pool = typed_thread_pool_t<job_types>;
using typed_thread_worker = typed_thread_worker_t<job_types>;

}  // namespace thread_system
