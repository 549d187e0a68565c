// The awaitable of thread_pool::sleep_for() / sleep_until() (and the typed
// pool's sleep_for(type, d) / sleep_until(type, t)): the pool's timer queue
// resumes the coroutine on a worker at the due time; no thread blocks
// meanwhile.
//
// Contract (see also coro/coro_base.hpp):
//   * Resumes no earlier than the due time, on one of the pool's workers.
//     A zero, negative or NaN sleep_for() duration, or a sleep_until() time
//     not after now, is due at once: the coroutine still resumes on a worker
//     (as std::this_thread::sleep_for returns at once, and as every wait of
//     the library with a timeout treats such a timeout as "only a check").
//     schedule_after(), by contrast, refuses a negative or NaN delay
//     (timer_queue.hpp): a timer's delay is the caller's data, a sleep's is
//     often a deadline minus now that has already passed.
//   * The chain's token (this_job::token() of a task) cancelled during the
//     sleep: the coroutine resumes at once on a worker and the co_await
//     throws error_exception{cancelled}. Cancelled before it: the sleep does
//     not start - no suspension, the co_await throws the same on the
//     awaiting thread.
//   * The pool refuses the timer (stopped): no suspension, the co_await
//     throws the refusal (pool_stopped). The pool stopping while it sleeps
//     (stop() cancels pending timers): the coroutine is abandoned.
//   * The wake-up is a job of the pool like any other, so a bounded pool's
//     backpressure applies to it (see docs/COROUTINES.md): caller_runs runs
//     it on the timer thread; a run the pool refuses at capacity (reject,
//     block_for) or evicts (drop_oldest) is discarded, and the sleeping
//     task is abandoned as at stop(). So is a wake-up that a full
//     pool_queue::bounded injector refuses.
//   * Cutting a sleep short needs one allocation (the token's callback
//     node); without memory the sleep is simply not cut short.
//   * A token cancelled while the sleep is being set up (a race with
//     cancel() on another thread) also resumes on a worker with
//     `cancelled`; a timer discarded during setup (the pool stopping at that
//     moment) makes the co_await throw `cancelled` on the awaiting thread.
//   * A sleep awaitable is awaited once: a second co_await of it throws
//     error_exception{invalid_argument} at once (no timer is armed).
//
// Protocol: three parties race to finish one sleep - the timer's run, the
// timer's discard (its function destroyed unrun) and the token's callback.
// One atomic state decides: the first to move it from `armed` to `claimed`
// acts, the others do nothing. Any of them may come while await_suspend()
// is still setting up; it then records what happened in the state and
// await_suspend() acts on it itself, instead of suspending.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "thread_system/coro/coro_base.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/scheduler/timer_handle.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace thread_system::detail {

// How a sleep arms its timer on a thread_pool: schedule_at(due, f).
template <typename Pool>
struct pool_timer_arm {
  Pool* pool;
  template <typename F>
  result<timer_handle> operator()(std::chrono::steady_clock::time_point due, F&& f) const {
    return pool->schedule_at(due, std::forward<F>(f));
  }
};

// On a typed pool: a timer of the sleep's job type (the wake-up is a job of that type).
template <typename Pool, typename Type>
struct typed_timer_arm {
  Pool* pool;
  Type type;
  template <typename F>
  result<timer_handle> operator()(std::chrono::steady_clock::time_point due, F&& f) const {
    return pool->schedule_at(type, due, std::forward<F>(f));
  }
};

// `Arm` arms the timer: arm(due, f) -> result<timer_handle> (above).
template <typename Arm>
class sleep_awaiter {
 public:
  sleep_awaiter(Arm arm, std::chrono::steady_clock::time_point due, resume_target target) noexcept
      : arm_(arm), due_(due), target_(target) {}
  sleep_awaiter(const sleep_awaiter&) = delete;
  sleep_awaiter& operator=(const sleep_awaiter&) = delete;
  sleep_awaiter(sleep_awaiter&&) = delete;
  sleep_awaiter& operator=(sleep_awaiter&&) = delete;
  ~sleep_awaiter() = default;

  [[nodiscard]] static bool await_ready() noexcept { return false; }

  // Every refusal here throws before the coroutine is suspended (an
  // exception from await_suspend() resumes it and is rethrown from the
  // co_await, [expr.await]), so the awaiter - which lives in the frame of
  // every sleeping task - keeps no error of its own.
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) {
    // One sleep per awaitable: awaited again, it is refused (its timer and
    // state belong to the first co_await). relaxed: the same coroutine
    // finished the first co_await, after every claim of it.
    if (state_.load(std::memory_order_relaxed) != setup) {
      throw error_exception(
          make_error(error_code::invalid_argument, "a sleep awaitable co_awaited a second time").value);
    }
    handle_ = h;
    if constexpr (library_promise<P>) {
      promise_ = &h.promise();
      token_ = promise_->token();
    }
    if (token_ != nullptr && token_->is_cancelled()) throw cancelled_by_token();
    result<timer_handle> armed = arm_(due_, fire{this});
    if (!armed) throw error_exception(std::move(armed).error());
    timer_ = std::move(*armed);
    if (token_ != nullptr && token_->can_be_cancelled()) {
      try {
        registration_ = token_->register_callback([this]() noexcept { on_token(); });
      } catch (const error_exception&) {  // NOLINT(bugprone-empty-catch): see the header
        // No memory for the callback node: this sleep is not cut short.
      }
    }
    std::uint8_t expected = setup;
    // acq_rel: publishes timer_ to whoever claims later (they acquire the
    // state) and sees what a party did during setup.
    if (state_.compare_exchange_strong(expected, armed_state, std::memory_order_acq_rel)) return true;
    if (expected == token_early) {
      // The token fired during setup: hand over as on_token() does. The
      // timer's run or discard resumes us once the state says
      // token_claimed - maybe on another thread before the CAS below
      // returns here, and the coroutine may then finish and free this
      // frame - so the timer is copied first, while nothing can resume us
      // (on_token() is protected the other way: registration_'s
      // destructor waits for it).
      timer_handle timer = timer_;
      // acq_rel: pairs with claim().
      if (state_.compare_exchange_strong(expected, token_claimed, std::memory_order_acq_rel)) {
        (void)timer.cancel();  // `this` may be gone
        return true;
      }
      // The timer's side came meanwhile and left (token_seen).
    }
    if (expected == fired_early) {
      // Due during setup: resume on a worker, as a timer run would.
      const resume_target target = target_;
      result<void> pushed = target.push_job(
          job_function(resume_job{handle_, promise_, promise_ != nullptr ? nullptr : &discard_slot_, target}));
      if (pushed) return true;  // `this` may be gone
      throw error_exception(std::move(pushed).error());
    }
    // discarded_early or token_seen: that party's last touch of `this` was
    // its state change; the co_await throws here.
    if (expected == token_seen) throw cancelled_by_token();
    throw error_exception(make_error(error_code::cancelled, "sleep discarded by the pool (stopping)").value);
  }

  void await_resume() const {
    if (discard_slot_.error) {  // a foreign coroutine's sleep or resumption, discarded by the pool
      throw error_exception(
          make_error(*discard_slot_.error, "sleep discarded by the pool (stopping, or its wake-up evicted)").value);
    }
    // acquire: the resumption that brought us here was ordered after the
    // state change (a job hand-off or this thread).
    if (state_.load(std::memory_order_acquire) == token_done) throw cancelled_by_token();
  }

 private:
  // setup -> armed_state (await_suspend) -> claimed (the timer's run or
  // discard) or token_claimed (the token) -> token_done (the timer's run or
  // discard, which then resumes). During setup a party records itself
  // instead: fired_early, discarded_early, token_early (-> token_seen when
  // the timer's side comes before await_suspend takes it over).
  enum : std::uint8_t {
    setup,
    armed_state,
    claimed,
    fired_early,
    token_early,
    token_seen,
    discarded_early,
    token_claimed,
    token_done
  };

  // The timer's function: runs the sleep's end, or (destroyed unrun) its discard.
  struct fire {
    sleep_awaiter* owner;
    explicit fire(sleep_awaiter* a) noexcept : owner(a) {}
    fire(fire&& o) noexcept : owner(std::exchange(o.owner, nullptr)) {}
    fire& operator=(fire&&) = delete;
    fire(const fire&) = delete;
    fire& operator=(const fire&) = delete;
    ~fire() {
      if (owner != nullptr) owner->on_discard();
    }
    void operator()() { std::exchange(owner, nullptr)->on_fire(); }
  };

  // The messages are literals: without memory for them the code alone (make_error()).
  static error_exception cancelled_by_token() {
    return error_exception(make_error(error_code::cancelled, "sleep cancelled by the task's token").value);
  }

  enum class claim_result : std::uint8_t { won, early, token_handoff, lost };

  // The timer's side (run or discard) claims the sleep: `armed` -> claimed
  // (won), `setup` -> `early` (await_suspend acts), `token_claimed` ->
  // token_done (the token won and left the resumption to us),
  // `token_early` -> token_seen (await_suspend acts), else lost.
  claim_result claim(std::uint8_t early) noexcept {
    std::uint8_t s = armed_state;
    for (;;) {
      std::uint8_t next = 0;
      claim_result r = claim_result::lost;
      if (s == armed_state) {
        next = claimed;
        r = claim_result::won;
      } else if (s == setup) {
        next = early;
        r = claim_result::early;
      } else if (s == token_claimed) {
        next = token_done;
        r = claim_result::token_handoff;
      } else if (s == token_early) {
        next = token_seen;
        r = claim_result::lost;  // await_suspend continues, cancelled
      } else {
        return claim_result::lost;
      }
      // acq_rel: acquire pairs with await_suspend's publishing CAS and with
      // on_token()'s claim; release orders our writes before the resumed
      // coroutine's reads.
      if (state_.compare_exchange_weak(s, next, std::memory_order_acq_rel)) return r;
    }
  }

  void on_fire() {
    const claim_result r = claim(fired_early);
    if (r != claim_result::won && r != claim_result::token_handoff) return;
    // Copies: the awaiter (and its target_) is gone once the coroutine
    // moves on, while the resumption lasts.
    const resume_target target = target_;
    run_in_resumption(token_, target, handle_);  // `this` may be gone from here
  }

  void on_discard() noexcept {
    const claim_result r = claim(discarded_early);
    if (r == claim_result::won) {
      const resume_target discarding = target_;   // `this` may go with the coroutine
      const failure_sink_scope sink(discarding);  // not a resumption: see resume_job::cancel()
      if (promise_ != nullptr) {
        abandon(promise_);
      } else {
        // The code alone (noexcept here, and nothing to allocate): await_resume() throws it.
        discard_slot_.error = error_code::cancelled;
        resume_loop_reporting(handle_, &discarding);
      }
    } else if (r == claim_result::token_handoff) {
      resume_on_worker();
    }
  }

  // Claims the sleep for the token; the timer's run or discard (which
  // cancel() may cause right here) then resumes the coroutine.
  void on_token() noexcept {
    std::uint8_t s = armed_state;
    for (;;) {
      const std::uint8_t next = s == armed_state ? token_claimed : token_early;
      if (s != armed_state && s != setup) return;  // the timer's side won
      // acq_rel: pairs with claim() and await_suspend's CAS.
      if (state_.compare_exchange_weak(s, next, std::memory_order_acq_rel)) break;
    }
    if (s == armed_state) {
      // A copy: cancel() may end in resume_on_worker() and the coroutine's
      // frame (with timer_) may be freed before it returns.
      timer_handle timer = timer_;
      (void)timer.cancel();  // from here `this` may be gone
    }
  }

  // The token won: resume on a worker, where the co_await throws `cancelled`.
  void resume_on_worker() noexcept {
    resume_job job{handle_, promise_, promise_ != nullptr ? nullptr : &discard_slot_, target_};
    result<void> pushed = [&]() noexcept -> result<void> {
      try {
        return target_.push_job(job_function(job));
      } catch (...) {
        return make_error_nothrow(error_code::resource_exhausted, [] { return "no memory to resume"; });
      }
    }();
    if (pushed) return;
    const resume_target refusing = target_;  // `this` may go with the coroutine
    const failure_sink_scope sink(refusing);
    if (promise_ != nullptr) {
      abandon(promise_);  // the pool will not run it: nothing else can
    } else {
      resume_loop_reporting(handle_, &refusing);
    }
  }

  Arm arm_;
  std::chrono::steady_clock::time_point due_;
  resume_target target_;
  std::coroutine_handle<> handle_;
  promise_base* promise_ = nullptr;
  const cancellation_token* token_ = nullptr;
  std::atomic<std::uint8_t> state_{setup};
  timer_handle timer_;
  foreign_slot discard_slot_;  // a foreign coroutine's discard: the code await_resume() throws
  // Last: destroyed first, so destroying the awaiter on another thread waits
  // for a running on_token() before the rest goes.
  cancellation_registration registration_;
};

}  // namespace thread_system::detail
