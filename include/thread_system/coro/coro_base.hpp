// Coroutine plumbing shared by task<T> (coro/task.hpp) and the pools'
// awaitables (thread_pool::schedule(), sleep_for(), typed_thread_pool_t::
// schedule(type), co_await on a future). Users include coro/task.hpp; this
// header is what the pool headers need, kept small (<coroutine> only).
//
// Contract of a resumption (see docs/COROUTINES.md):
//   * `co_await pool.schedule()` pushes one job, a *resumption*, into the
//     pool; the coroutine continues inside that job on a worker. It is a job
//     like any other for the statistics, backpressure and stop(): accepted,
//     then executed or cancelled.
//   * A resumption that backpressure::caller_runs runs during the push, on
//     the awaiting thread, counts as run there (`caller_ran`) and the
//     coroutine goes on on that thread from the co_await, at the stack depth
//     it had: any number of such hops uses constant stack.
//   * A push the pool refuses (stopped, full) does not suspend: the
//     coroutine continues on the awaiting thread and the co_await throws
//     error_exception with the refusal (pool_stopped, queue_full, ...). It
//     never hangs.
//   * A resumption the pool discards (stop(cancel_pending), drop_oldest)
//     *abandons* the coroutine: a task<T> chain is destroyed bottom-up (no
//     code after its co_await runs, destructors of its locals do) and the one
//     awaiting the chain's outermost task learns it: sync_wait() throws
//     error_exception{cancelled}, a spawned task is simply gone (its
//     resumption counts as cancelled), when_all() abandons its awaiter once
//     every child has finished or been abandoned. A coroutine that is not a
//     task<T> is instead resumed on the discarding thread and its co_await
//     throws error_exception{cancelled}; the task<T> it awaited is then
//     empty (its frame destroyed there), so awaiting it again is refused
//     (invalid_argument), never a resumption.
//   * A schedule() awaitable may be awaited again (a retry after a
//     refusal): each co_await reports its own outcome only.
//   * While a task runs inside a resumption, this_job::token() is the token
//     its chain was started with (spawn(pool, token, t), sync_wait(t, token)).
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/sync/this_job.hpp"

// Symmetric transfer (a coroutine's await_suspend returning the handle to
// run next) keeps a chain of awaits at constant stack only when the compiler
// turns the resumption into a tail call. Clang does so at every
// optimisation level; GCC only with sibling-call optimisation (-O2) and not
// under AddressSanitizer or ThreadSanitizer. So with GCC (and any compiler
// but Clang) THREAD_SYSTEM_CORO_TRAMPOLINE is 1: every resumption the
// library starts runs in a loop (resume_loop()), and a transfer hands the
// next coroutine to that loop instead of calling it - constant stack
// whatever the flags, and one definition in every translation unit. Define
// it (0 or 1, the same everywhere) to choose.
#ifndef THREAD_SYSTEM_CORO_TRAMPOLINE
#if defined(__clang__)
#define THREAD_SYSTEM_CORO_TRAMPOLINE 0
#else
#define THREAD_SYSTEM_CORO_TRAMPOLINE 1
#endif
#endif

namespace thread_system::detail {

/// What the plumbing does with a pool, erased (one constant table per pool type).
struct resume_ops {
  // `continuation`: the pushing coroutine suspends right after, on this
  // pool's worker (schedule()); the pool need not wake another worker.
  result<void> (*push)(void* pool, std::uintptr_t type, job_function&& job, bool continuation);
  // Hands `e` to the pool's error handler (a spawned task's failure, or what
  // a foreign coroutine let out of a resumption the plumbing could not
  // throw from).
  void (*report)(void* pool, const std::exception_ptr& e) noexcept;
};

/// Where resumptions go: a pool, with its erased operations (for when_all's
/// children, pushed where their parent runs).
struct resume_target {
  void* pool = nullptr;
  const resume_ops* ops = nullptr;
  std::uintptr_t type = 0;  // a typed pool's job type; 0 otherwise

  [[nodiscard]] result<void> push_job(job_function&& job, bool continuation = false) const {
    return ops->push(pool, type, std::move(job), continuation);
  }
  void report(const std::exception_ptr& e) const noexcept { ops->report(pool, e); }
};

/// Where an exception that no job can carry goes on this thread - what a
/// foreign coroutine lets out of resume() on a path that cannot throw: the
/// pool whose worker this thread is, or that discards jobs or a resumption
/// here (set by the pool core and by a discarded resumption); none
/// elsewhere.
struct failure_sink {
  void* pool = nullptr;
  void (*report)(void* pool, const std::exception_ptr& e) noexcept = nullptr;
};
inline thread_local failure_sink t_failure_sink{};

/// Sets this thread's failure_sink for a scope.
class failure_sink_scope {
 public:
  explicit failure_sink_scope(failure_sink sink) noexcept : outer_(std::exchange(t_failure_sink, sink)) {}
  explicit failure_sink_scope(const resume_target& target) noexcept
      : failure_sink_scope(failure_sink{target.pool, target.ops->report}) {}
  ~failure_sink_scope() { t_failure_sink = outer_; }
  failure_sink_scope(const failure_sink_scope&) = delete;
  failure_sink_scope& operator=(const failure_sink_scope&) = delete;

 private:
  failure_sink outer_;
};

/// The resumption running on this thread (none outside one).
inline thread_local const resume_target* t_current_target = nullptr;

/// Sets this_job's token (and the current target) while a coroutine runs,
/// and restores them afterwards.
class resume_scope {
 public:
  resume_scope(const cancellation_token* token, const resume_target* target) noexcept
      : token_(token), target_(std::exchange(t_current_target, target)) {}
  ~resume_scope() { t_current_target = target_; }
  resume_scope(const resume_scope&) = delete;
  resume_scope& operator=(const resume_scope&) = delete;

 private:
  this_job::detail::token_scope token_;
  const resume_target* target_;
};

/// Coroutines that the innermost resume_loop() on this thread starts, one
/// after another, once what it runs now has suspended (when_all's children
/// off a pool: started by that loop instead of each inside its parent's
/// await_suspend(), one frame deeper per nested when_all). One node stands
/// for all the children of one when_all but the first; it lives in that
/// when_all's awaiter and stays in the loop's list until its last frame is
/// taken.
struct deferred_start {
  deferred_start* next = nullptr;
  /// The next frame to start and its chain's token; sets `last` when it is
  /// the node's last one (the node may go once that frame runs).
  std::coroutine_handle<> (*take)(deferred_start& self, const cancellation_token*& token,
                                  bool& last) noexcept = nullptr;
};

/// The innermost resume_loop() on this thread: its deferred starts and, with
/// the trampoline, the coroutine it is resuming and the one handed over to it.
struct resume_loop_state {
#if THREAD_SYSTEM_CORO_TRAMPOLINE
  std::coroutine_handle<> current;
  std::coroutine_handle<> next;
#endif
  deferred_start* first = nullptr;
  deferred_start** last = &first;
};
inline thread_local resume_loop_state* t_resume_loop = nullptr;

/// Runs `h` (and, with the trampoline, whatever it transfers to) until it
/// suspends or finishes.
inline void run_chain([[maybe_unused]] resume_loop_state& s, std::coroutine_handle<> h) {
#if THREAD_SYSTEM_CORO_TRAMPOLINE
  while (h) {
    s.current = h;
    s.next = {};
    h.resume();
    h = s.next;
  }
#else
  h.resume();
#endif
}

/// run_chain(), keeping the first exception a foreign coroutine lets out of
/// resume() in `escaped` (the loop still starts what was deferred to it).
inline void run_chain_keeping(resume_loop_state& s, std::coroutine_handle<> h, std::exception_ptr& escaped) noexcept {
  try {
    run_chain(s, h);
  } catch (...) {
    if (!escaped) escaped = std::current_exception();
  }
}

/// Resumes `h` (and with the trampoline whatever it transfers to), then
/// starts what was deferred to this loop meanwhile, in order. Only a
/// foreign coroutine whose promise rethrows lets an exception out of
/// resume(): the first such is rethrown once every deferred start has run
/// (none is lost).
inline void resume_loop(std::coroutine_handle<> h) {
  resume_loop_state s;
  struct restore {
    resume_loop_state* outer;
    ~restore() { t_resume_loop = outer; }
  } const guard{std::exchange(t_resume_loop, &s)};
  // The resumption this loop runs in (a pool's, or none): what was deferred
  // to it starts in the same one, as it would have started inline. (Every
  // scope that changes the current target starts a loop of its own.)
  const resume_target* const target = t_current_target;
  std::exception_ptr escaped;
  run_chain_keeping(s, h, escaped);
  while (deferred_start* d = s.first) {
    const cancellation_token* token = nullptr;
    bool last = false;
    const std::coroutine_handle<> frame = d->take(*d, token, last);
    if (last) {  // `d` may go once its last frame runs
      s.first = d->next;
      if (s.first == nullptr) s.last = &s.first;
    }
    const resume_scope scope(token, target);
    run_chain_keeping(s, frame, escaped);
  }
  if (escaped) std::rethrow_exception(escaped);
}

/// resume_loop() from a path that cannot throw (a discard, an abandon, a
/// future's completion). Only a coroutine of another type than task<T>
/// whose promise rethrows from unhandled_exception() lets an exception out
/// of resume(): it goes to the error handler of the pool of `report_to`, or
/// else of the resumption running on this thread, or else of this thread's
/// failure_sink (the pool whose worker this is, or that is discarding
/// here); with no pool at all (a future completed by a plain thread),
/// std::terminate() - as an exception leaving a std::thread's function.
inline void resume_loop_reporting(std::coroutine_handle<> h, const resume_target* report_to) noexcept {
  const resume_target* const running = t_current_target;
  try {
    resume_loop(h);
  } catch (...) {
    if (const resume_target* const to = report_to != nullptr ? report_to : running; to != nullptr) {
      to->report(std::current_exception());
      return;
    }
    const failure_sink sink = t_failure_sink;
    if (sink.report == nullptr) std::terminate();
    sink.report(sink.pool, std::current_exception());
  }
}

/// Has the innermost resume_loop() on this thread start `d` once what it
/// runs now suspends; false outside any resume_loop().
[[nodiscard]] inline bool defer_start(deferred_start& d) noexcept {
  resume_loop_state* const s = t_resume_loop;
  if (s == nullptr) return false;
  d.next = nullptr;
  *s->last = &d;
  s->last = &d.next;
  return true;
}

/// From `from`'s await_suspend (or final suspension): continue with `to`.
/// Symmetric transfer, or a hand-over to the loop that resumed `from`.
[[nodiscard]] inline std::coroutine_handle<> transfer(std::coroutine_handle<> from,
                                                      std::coroutine_handle<> to) noexcept {
#if THREAD_SYSTEM_CORO_TRAMPOLINE
  resume_loop_state* s = t_resume_loop;
  if (s != nullptr && s->current == from) {  // the loop called `from` directly
    s->current = {};
    s->next = to;
    return std::noop_coroutine();
  }
#else
  (void)from;
#endif
  return to;
}

/// Who awaits a task that no other task<T> awaits: sync_wait, spawn, a
/// when_all child slot, a coroutine of another type.
class coro_waiter {
 public:
  /// The task finished (value or exception stored): what to resume next.
  virtual std::coroutine_handle<> on_complete() noexcept = 0;
  /// The chain below was abandoned (see the header); the task's frame is
  /// still there, suspended, and belongs to the waiter.
  virtual void on_abandon() noexcept = 0;

 protected:
  coro_waiter() = default;
  coro_waiter(const coro_waiter&) = default;
  coro_waiter& operator=(const coro_waiter&) = default;
  ~coro_waiter() = default;
};

/// The part of a task's promise the plumbing needs (not a template).
class promise_base {
 public:
  /// The awaiting coroutine, resumed when this task finishes (null: ask waiter).
  std::coroutine_handle<> continuation;
  /// The awaiting task's promise when a task<T> awaits this one.
  promise_base* parent = nullptr;
  /// The awaiting task<T> object's handle, cleared when abandon() destroys this frame.
  std::coroutine_handle<>* owner = nullptr;
  /// When no task<T> awaits this one.
  coro_waiter* waiter = nullptr;

  /// Whether the task was started: whoever starts it sets continuation or
  /// waiter first, and neither is cleared while the frame lives.
  [[nodiscard]] bool started() const noexcept { return continuation || waiter != nullptr; }

  /// The chain's cancellation token (owned by the chain's root), or null.
  [[nodiscard]] const cancellation_token* token() const noexcept {
    return reinterpret_cast<const cancellation_token*>(chain_ & ~foreign_bit);  // NOLINT(performance-no-int-to-ptr)
  }
  /// A coroutine of another type awaits this chain (or its when_all): it
  /// may be resumed by hand, outside the library's resume_loop(), so
  /// when_all does not defer starts to that loop (see when_all.hpp).
  [[nodiscard]] bool foreign_driven() const noexcept { return (chain_ & foreign_bit) != 0; }
  void set_chain(const cancellation_token* token, bool foreign_driven) noexcept {
    chain_ = reinterpret_cast<std::uintptr_t>(token) | (foreign_driven ? foreign_bit : 0);
  }
  /// Takes the token and foreign_driven() of the chain `other` belongs to.
  void join_chain(const promise_base& other) noexcept { chain_ = other.chain_; }

 private:
  // The token's address with foreign_driven() in its low bit: one word, so
  // a task's frame stays within its allocation size class (a frame of
  // fib's when_all fork is 256 bytes; detail/recycling_allocator.hpp rounds to 64).
  static constexpr std::uintptr_t foreign_bit = 1;
  static_assert(alignof(cancellation_token) > foreign_bit);
  std::uintptr_t chain_ = 0;
};

/// A promise of this library's coroutines (task<T>): the plumbing links
/// its chain; any other promise is a *foreign* coroutine's.
template <typename P>
concept library_promise = std::is_base_of_v<promise_base, P>;

/// Abandons the chain whose innermost suspended task is `p` (see the header):
/// destroys the frames from `p` up to, not including, the outermost task of
/// the chain, then tells that task's waiter. Iterative, so a deep chain does
/// not recurse.
inline void abandon(promise_base* p) noexcept {
  while (p->parent != nullptr) {
    promise_base* up = p->parent;
    std::coroutine_handle<> frame = std::exchange(*p->owner, {});
    frame.destroy();  // `p` is gone
    p = up;
  }
  if (p->waiter != nullptr) p->waiter->on_abandon();
}

/// A spawned task's failure, set when it finished inside a resumption of its
/// own pool: that resumption rethrows it so the pool counts and reports it.
inline thread_local std::exception_ptr t_pending_failure;
/// The coroutine whose schedule() is pushing its resumption on this thread
/// (null otherwise), and whether the pool ran that resumption right away on
/// this thread (backpressure::caller_runs): the coroutine then goes on from
/// await_suspend() instead of being resumed inside it, one frame deeper at
/// every hop (see schedule_awaiter).
inline thread_local void* t_scheduling = nullptr;
inline thread_local bool t_scheduled_inline = false;

/// Runs `h` as a resumption of `target`'s pool (token and target set), then
/// rethrows a spawned task's failure parked meanwhile (t_pending_failure)
/// so that the pool counts it; if resume() itself threw (a foreign
/// coroutine's promise rethrows), that exception leaves and a parked
/// failure goes to the pool's error handler rather than staying parked.
inline void run_in_resumption(const cancellation_token* token, const resume_target& target, std::coroutine_handle<> h) {
  try {
    const resume_scope scope(token, &target);
    resume_loop(h);
  } catch (...) {
    if (t_pending_failure) target.report(std::exchange(t_pending_failure, nullptr));
    throw;
  }
  if (t_pending_failure) std::rethrow_exception(std::exchange(t_pending_failure, nullptr));
}

/// Where a foreign (non-task) coroutine learns that its resumption was
/// discarded.
struct foreign_slot {
  std::optional<error_code> error;
};

/// The job a resumption is: resumes `handle` on a worker; on discard,
/// abandons the task chain (or resumes a foreign coroutine with `cancelled`).
struct resume_job {
  std::coroutine_handle<> handle;
  promise_base* promise = nullptr;  // null: a foreign coroutine (then `slot` is set)
  foreign_slot* slot = nullptr;
  resume_target target;

  void operator()() const {
    if (t_scheduling != nullptr && t_scheduling == handle.address()) {
      // Run by the push itself, on the thread suspending the coroutine: it
      // goes on from there (schedule_awaiter::await_suspend() returns false).
      t_scheduled_inline = true;
      return;
    }
    run_in_resumption(promise != nullptr ? promise->token() : nullptr, target, handle);
  }
  void cancel() noexcept {
    const resume_target discarding = target;  // this job may go with the coroutine
    // Not a resumption (t_current_target stays): the discarding pool hears
    // what a foreign awaiter above lets out (resume_loop_reporting()).
    const failure_sink_scope sink(discarding);
    if (promise != nullptr) {
      abandon(promise);
    } else {
      slot->error = error_code::cancelled;
      resume_loop_reporting(handle, &discarding);
    }
  }
};
static_assert(sizeof(resume_job) <= job_function::inline_capacity, "a resumption must not allocate");

/// The token of the coroutine whose promise is `P` (null for a foreign one).
template <typename P>
[[nodiscard]] const cancellation_token* token_of(std::coroutine_handle<P> h) noexcept {
  if constexpr (library_promise<P>) {
    return h.promise().token();
  } else {
    (void)h;
    return nullptr;
  }
}

/// The awaitable of schedule(): one resumption pushed into `target`.
class schedule_awaiter {
 public:
  explicit schedule_awaiter(resume_target target) noexcept : target_(target) {}

  [[nodiscard]] static bool await_ready() noexcept { return false; }

  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) {
    // Awaited again (a retry after a refusal): no earlier outcome stays.
    refusal_.reset();
    slot_.error.reset();
    resume_job job{h, nullptr, nullptr, target_};
    if constexpr (library_promise<P>) {
      job.promise = &h.promise();
    } else {
      job.slot = &slot_;
    }
    // After a successful push the coroutine may already run (or be gone) on
    // a worker: nothing here touches `this` afterwards - unless the pool ran
    // the resumption during the push, on this thread (caller_runs): then
    // the coroutine simply goes on here, at the depth it had.
    void* const outer_scheduling = std::exchange(t_scheduling, h.address());
    const bool outer_inline = std::exchange(t_scheduled_inline, false);
    result<void> r;
    try {
      r = target_.push_job(job_function(job), true);
    } catch (...) {
      t_scheduling = outer_scheduling;
      t_scheduled_inline = outer_inline;
      throw;
    }
    const bool ran_inline = std::exchange(t_scheduled_inline, outer_inline);
    t_scheduling = outer_scheduling;
    if (r) return !ran_inline;
    refusal_.emplace(std::move(r).error());
    return false;  // not suspended: continue here and throw the refusal
  }

  void await_resume() {
    if (refusal_) throw error_exception(std::move(*refusal_));
    if (slot_.error) {
      throw error_exception(
          error{*slot_.error, "resumption discarded by the pool (stop(cancel_pending) or drop_oldest)"});
    }
  }

 private:
  resume_target target_;
  std::optional<error> refusal_;
  foreign_slot slot_;
};

/// Pools befriend this to let the coroutine support reach what it needs.
struct coro_access {
  template <typename Pool>
  static auto target(Pool& pool) noexcept -> decltype(pool.coroutine_target()) {
    return pool.coroutine_target();
  }
  template <typename Pool, typename Type>
  static auto target(Pool& pool, Type type) noexcept -> decltype(pool.coroutine_target(type)) {
    return pool.coroutine_target(type);
  }
  template <typename Pool>
  static auto spawn_key(Pool& pool) noexcept -> decltype(pool.spawn_key()) {
    return pool.spawn_key();
  }
};

/// The steady_clock time `d` from now, rounded up, saturated ~100 years out
/// (a negative or NaN `d`: now).
template <typename Rep, typename Period>
[[nodiscard]] std::chrono::steady_clock::time_point due_after(std::chrono::duration<Rep, Period> d) noexcept {
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  constexpr std::chrono::hours far{24 * 365 * 100};
  if (!(d > std::chrono::duration<Rep, Period>::zero())) return now;  // also NaN
  if (std::chrono::duration<double>(d) >= std::chrono::duration<double>(far)) return now + far;
  return now + std::chrono::ceil<clock::duration>(d);
}

/// `t` on steady_clock's own duration, rounded up (never early), saturated
/// ~100 years from now (NaN: now, as due_after()).
template <typename Duration>
[[nodiscard]] std::chrono::steady_clock::time_point due_at(
    std::chrono::time_point<std::chrono::steady_clock, Duration> t) noexcept {
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  constexpr std::chrono::hours far{24 * 365 * 100};
  // Placed in double seconds first: comparing `t` with `now` converts it to
  // the common duration, and a far time on a coarse duration (hours, or
  // seconds 400 years ahead) overflows nanoseconds there.
  const double ahead = std::chrono::duration<double>(t.time_since_epoch()).count() -
                       std::chrono::duration<double>(now.time_since_epoch()).count();
  const double far_seconds = std::chrono::duration<double>(far).count();
  if (ahead >= far_seconds) return now + far;  // also +infinity
  if (!(ahead > -far_seconds)) return now;     // long past, -infinity, or NaN (as due_after())
  // Within a century of now: exact on the clock's duration, rounded up.
  const clock::time_point exact{std::chrono::ceil<clock::duration>(t.time_since_epoch())};
  return exact <= now ? now : exact;
}

}  // namespace thread_system::detail
