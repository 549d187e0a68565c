// Where a pool's core goes when it is destroyed or stopped inside its own
// code (detail::pool_core, pool_core.hpp): the frames a thread keeps of the
// cores whose user code it runs (frame_scope: a job, a helping wait, a
// caller_runs batch), the discard scope of a job's cancel path, the
// refusals that follow from them (a stop() or wait_idle() on the pool's
// own worker or inside a discarded job), and orphan(): a core whose front
// is gone while one of its workers still runs, finished by the last worker
// out. The ordinary stop() and its report are in pool_core_stop.cpp.

#include "pool_core.hpp"

#include <cstdint>
#include <string>

namespace thread_system::detail {

namespace {
// The pool whose discarded job's user code runs on this thread (see
// pool_core::discard_scope), or null.
thread_local const pool_core* tl_discarding = nullptr;
// This thread's frames of pools' cores, innermost first (see
// pool_core::frame_scope).
thread_local pool_core::frame* tl_frames = nullptr;
}  // namespace

pool_core::discard_scope::discard_scope(const pool_core* core) noexcept : outer_(tl_discarding) {
  tl_discarding = core;
}

pool_core::discard_scope::~discard_scope() { tl_discarding = outer_; }

bool pool_core::discarding_on_this_thread() const noexcept { return tl_discarding == this; }

pool_core::frame_scope::frame_scope(pool_core* core) noexcept : frame_{core, tl_frames, false, false} {
  // relaxed: a frame begins while its caller owns the pool (nobody calls
  // into an orphaned core but its own frames), so the owner's release of
  // its last reference, which leads to orphan(), happens after this; and
  // RMWs of one atomic are in one order. The exit's acq_rel publishes.
  core->live_workers_.fetch_add(2, std::memory_order_relaxed);
  tl_frames = &frame_;
}

pool_core::frame_scope::~frame_scope() {
  tl_frames = frame_.outer;
  // The frames below on this thread are gone: the core may be orphaned
  // (it is freed by whoever leaves last - this frame included).
  if (frame_.finish) frame_.core->orphan();
  frame_.core->leave_frame();
}

void pool_core::leave_frame() noexcept {
  // acq_rel: as leave_as_worker(); the last one out sees every other exit.
  const std::uint64_t before = live_workers_.fetch_sub(2, std::memory_order_acq_rel);
  if (before == (2 | orphan_bit)) finish_orphaned(nullptr);
}

bool pool_core::run_on_caller_counted(std::span<job_function> fns) {
  // The innermost frame on this thread is the bounded push's (see
  // push_external_bounded()): it carries the mark that stop() from inside
  // one of these jobs clears (uncount_own_caller_runs()).
  frame* const f = tl_frames;
  // seq_cst: Dekker with stop (begin_stop()'s seq_cst store, then
  // settle_stop()'s seq_cst load of this count): either stop() waits for
  // this run, or this thread sees the stop below and runs nothing.
  caller_runs_in_flight_.fetch_add(1, std::memory_order_seq_cst);
  f->counted_run = true;
  struct uncount {
    pool_core* core;
    frame* f;
    uncount(pool_core* c, frame* fr) noexcept : core(c), f(fr) {}
    uncount(const uncount&) = delete;
    uncount& operator=(const uncount&) = delete;
    ~uncount() {
      if (!f->counted_run) return;  // a stop() inside a run uncounted it
      f->counted_run = false;
      // release: the run's counters (caller_ran_ ...) are in the report of
      // the settle_stop() that acquires this decrement.
      if (core->caller_runs_in_flight_.fetch_sub(1, std::memory_order_release) == 1) {
        core->caller_runs_in_flight_.notify_all();
      }
    }
  } counted{this, f};
  if (stop_requested_.load(std::memory_order_seq_cst) || stop_begun()) return false;
  for (auto& fn : fns) run_on_caller(fn);
  return true;
}

void pool_core::uncount_own_caller_runs() noexcept {
  for (frame* f = tl_frames; f != nullptr; f = f->outer) {
    if (f->core != this || !f->counted_run) continue;
    f->counted_run = false;
    // release: as in run_on_caller_counted()'s end.
    if (caller_runs_in_flight_.fetch_sub(1, std::memory_order_release) == 1) caller_runs_in_flight_.notify_all();
  }
}

bool pool_core::inside_own_frame() const noexcept {
  for (const frame* f = tl_frames; f != nullptr; f = f->outer) {
    if (f->core == this) return true;
  }
  return false;
}

void pool_core::orphan_to_outermost_frame() noexcept {
  frame* outermost = nullptr;
  for (frame* f = tl_frames; f != nullptr; f = f->outer) {
    if (f->core == this) outermost = f;
  }
  if (outermost != nullptr) outermost->finish = true;
}

const char* pool_core::refusal_on_this_thread(bool stop) const noexcept {
  if (on_own_worker()) {
    return stop ? "stop() called from one of the pool's own workers"
                : "wait_idle() called from one of the pool's own workers";
  }
  if (discarding_on_this_thread()) {
    return stop ? "stop() called from a job the pool is discarding on this thread"
                : "wait_idle() called from a job the pool is discarding on this thread";
  }
  return nullptr;
}

void pool_core::throw_refusal(const char* refusal) const {
  throw error_exception(
      make_error_nothrow(error_code::invalid_argument, [&] { return named() + ": " + refusal; }).value);
}

void pool_core::orphan() noexcept {
  {
    std::lock_guard stop_lock(stop_mutex_);
    (void)close_for_stop(stop_mode::drain);
  }
  // acq_rel: pairs with leave_as_worker(); one of the two sides sees the
  // other's change and finishes.
  const std::uint64_t before = live_workers_.fetch_or(orphan_bit, std::memory_order_acq_rel);
  if ((before >> 1) == 0) finish_orphaned(nullptr);  // no worker left to do it
}

void pool_core::leave_as_worker(pool_worker& w) noexcept {
  // acq_rel: the last one out sees every other worker's exit and the
  // orphan bit (and everything done before them).
  const std::uint64_t before = live_workers_.fetch_sub(2, std::memory_order_acq_rel);
  if (before == (2 | orphan_bit)) finish_orphaned(&w);
}

void pool_core::finish_orphaned(pool_worker* self) noexcept {
  (void)settle_stop(self);
  delete this;  // (as the front's deleter does)
}

}  // namespace thread_system::detail
