// The scheduler core of both pools (detail::pool_core, pool_core.hpp): the
// one worker loop (find, steal, run, spin, yield, park), the paths by which a
// job enters it (a worker's LIFO slot and deque, or the injector), waking,
// and the helping-wait hook; and the fronts' pushes into it. The rest of the
// core is in pool_core_lifecycle.cpp (construction, starting workers,
// resize, stop), pool_core_workers.cpp (the worker list and the workers' OS
// threads), pool_core_admission.cpp (backpressure) and
// pool_core_accounting.cpp (idle detection, statistics, failure reports).
// docs/ARCHITECTURE.md walks one job through them. The loop and the pushes
// stay together: one hot path (a job spawned on a worker is the next one its
// loop takes), sharing this file's thread-local current worker, with the
// pushes' small helpers inlined into both.
#include "pool_core.hpp"
#include "thread_system/detail/chaos.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <thread>
#include <type_traits>

#include "thread_system/detail/asymmetric_fence.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/os_thread.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/detail/thread_attributes.hpp"
#include "thread_system/sync/cancellation.hpp"
#include "thread_system/sync/helping_wait.hpp"
#include "thread_system/sync/this_job.hpp"

// The concrete injectors, so that their final overrides are visible here.
#include "injectors.hpp"

namespace thread_system::detail {

namespace {

// Every this many jobs a worker looks at the injector before its own deque,
// so external submissions are never starved by a worker that keeps
// spawning locally (a prime, so it does not resonate with spawn patterns).
constexpr unsigned injector_check_interval = 61;

// Polls of the queue before parking (each poll is a pause instruction and a
// load, a few microseconds in all). Only a bounded number of workers spin at
// a time (`max_spinners_`), so on an oversubscribed machine spinning workers
// do not steal the CPU from the threads that produce work.
constexpr int spin_polls = 256;

// After spinning (or instead of it, past the spinner cap), a worker keeps
// polling for this long, yielding its CPU between polls, before it parks.
// Yielding costs nothing to a thread that wants the CPU (a producer on an
// oversubscribed machine runs instead), and it keeps workers awake across
// the short gaps between back-to-back parallel work - a caller that waits
// for one parallel_for and starts the next. Parking there costs a futex
// wake-up per worker per round (tens of microseconds on a VM), and woken
// threads often land on another CPU, away from the data they had cached.
// oneTBB and rayon likewise yield for a while before they sleep. The length
// is pool_options::idle_wait (idle_wait_ns_; by default detail::idle_yield_ns,
// 100 us, the same as helping waits).

// A continuation in another worker's LIFO slot is taken by a thief only
// when that worker has finished no job for this long: normally its owner
// runs it within a microsecond, as soon as the job that pushed it returns,
// and a thief taking it would only move the coroutine (and its cache lines)
// to another core and back. The exception is an owner stuck in that job - a
// job that resumed a coroutine by hand and then blocks - or descheduled;
// then an awake worker (one helping a wait, say) takes it. Go's scheduler
// likewise lets a thief take a running P's `runnext` only after a short
// pause (runtime/proc.go, runqgrab).
constexpr std::uint64_t continuation_grace_ns = 50'000;

using detail::steady_now_ns;

// Per submitting thread: jobs left until the next one is stamped for the
// latency histograms (shared by all pools; sampling is statistical anyway).
thread_local std::uint32_t tl_sample_countdown = 1;

}  // namespace

pool_worker* pool_core::own_worker() const noexcept { return tl_context.pool == this ? tl_context.worker : nullptr; }

result<void> pool_core::push_local(pool_worker& w, job_function&& fn, local_push where) {
  // Only this worker's thread pushes to its deque, so the check below and
  // the push cannot interleave with this worker's own exit decision.
  if (stop_begun()) return stopped_error();
  // A node, and room on the deque for the job the slot may displace (and a
  // fork's own). Out of memory, the job goes through the injector instead
  // (which reports its own failure to the caller).
  detail::job_node* node = w.node_cache_.try_allocate();
  if (node == nullptr || !w.deque_.reserve(where == local_push::fork ? 2 : 1)) {
    if (node != nullptr) w.node_cache_.release(node);
    note_allocation_failure(w);
    return push_to_injector(std::move(fn));
  }
  w.degraded_ = false;
  stamp_if_sampled(fn);
  fn.set_tag(static_cast<std::uint8_t>(fn.tag() & ~bounded_tag));  // local jobs hold no room
  node->fn = std::move(fn);
  // release: the accepted count is published before the job can be stolen
  // and finished (see idle_now()).
  single_writer_add(w.spawned_, 1, std::memory_order_release);
  THREAD_SYSTEM_CHAOS_POINT();
  // Only this thread makes the slot non-null (thieves only empty it), so a
  // slot read as empty stays empty until this thread fills it. relaxed
  // load: the owner's own last write, or a thief's emptying.
  const bool slot_empty = w.lifo_slot_.load(std::memory_order_relaxed) == 0;
  if (where == local_push::fork) {
    // A fork goes onto the deque, past the slot. A job in the slot (an
    // enqueue() of the job running now, or a continuation) goes onto the
    // deque first, as the newest job displaces it below: the deque stays
    // in push order, and a helping wait, which looks at the slot before the
    // deque, still takes the newest job - this child - first. relaxed: the
    // exchange only decides against a thief (the deque's push publishes the
    // job again); a continuation moved onto the deque is an ordinary job
    // from then on, covered by the wake-up below.
    if (!slot_empty) {
      if (const pool_worker::slot_word displaced = w.lifo_slot_.exchange(0, std::memory_order_relaxed)) {
        w.deque_.push(pool_worker::slot_node(displaced));  // room reserved above: no allocation
      }
    }
    w.deque_.push(node);  // its release store publishes the job to thieves; room reserved above
  } else if (slot_empty) {
    // The new job goes into the LIFO slot. release: publishes the job to a
    // thief; pairs with the acquire exchange in try_steal().
    const bool continuation = where == local_push::continuation;
    w.lifo_slot_.store(pool_worker::slot_word_of(node, continuation), std::memory_order_release);
    // A continuation runs on this worker as soon as the job pushing it
    // returns: waking another worker for it would only make the two race
    // for it, and marked as one it keeps no idle worker awake either (see
    // local_push::continuation and work_visible()).
    if (continuation) return {};
  } else {
    // The new job goes into the slot and the one it displaces onto the
    // deque. release: as above. A thief may have emptied the slot since the
    // load; then there is nothing to move to the deque. The job in the slot
    // now is an ordinary one: a continuation only ever goes into an empty
    // slot (the displaced job needs the wake-up below, and so does the new
    // one).
    if (const pool_worker::slot_word displaced =
            w.lifo_slot_.exchange(pool_worker::slot_word_of(node, false), std::memory_order_release)) {
      w.deque_.push(pool_worker::slot_node(displaced));  // room reserved above: no allocation
    }
  }
  wake_worker_if_needed();
  return {};
}

void pool_core::note_allocation_failure(pool_worker& w) noexcept {
  single_writer_add(w.alloc_failures_, 1);  // statistics only
  if (w.degraded_) return;                  // reported at the start of this run of failures
  w.degraded_ = true;
  report_failure(out_of_memory_report_);
}

bool pool_core::take_from_lifo_slot(pool_worker& w, bool helping, detail::job_node*& out) noexcept {
  // relaxed: only this thread fills the slot; a stale non-null only costs
  // the exchange below, which then returns nullptr.
  if (w.lifo_slot_.load(std::memory_order_relaxed) == 0) return false;
  // The budget (pool_front::lifo_slot_budget): a job that keeps spawning
  // a successor cannot starve the jobs spawned before it. Tokio bounds its
  // LIFO slot the same way and with the same value (MAX_LIFO_POLLS_PER_TICK).
  if (w.lifo_streak_ >= lifo_slot_budget && !helping) {
    // Budget spent: the slot's job joins the deque (as its newest) and the
    // oldest job of the deque runs instead. A helping wait skips this: it
    // wants the newest jobs, most likely the one it waits for.
    w.lifo_streak_ = 0;
    // The slot's job runs now when the deque is empty (exact for its owner:
    // thieves only take from it): no older job is there to run first, and
    // moving it through the deque would only offer it to a thief for a
    // moment - the hops of a coroutine on its own worker (a continuation)
    // would then move to another core now and then. Also when out of memory:
    // the deque cannot take it (the budget waits for the next round).
    const bool deque_empty = w.deque_.empty_approx();
    if (deque_empty || !w.deque_.reserve(1)) {
      if (!deque_empty) note_allocation_failure(w);
      out = pool_worker::slot_node(w.lifo_slot_.exchange(0, std::memory_order_relaxed));  // relaxed: as below
      return out != nullptr;
    }
    // relaxed: the owner's own job (or nullptr if a thief took it first;
    // the exchange is then the thief's only competitor).
    if (const pool_worker::slot_word newest = w.lifo_slot_.exchange(0, std::memory_order_relaxed)) {
      w.deque_.push(pool_worker::slot_node(newest));  // room reserved above: no allocation
    }
    auto oldest = w.deque_.steal();  // the FIFO end (the owner may steal like any thief)
    if (!oldest) return false;       // taken by a thief meanwhile: the normal order goes on
    out = oldest.value;
    return true;
  }
  // relaxed: the job was put there by this thread; the exchange decides
  // between the owner and a thief (one total order on the slot).
  out = pool_worker::slot_node(w.lifo_slot_.exchange(0, std::memory_order_relaxed));
  if (out == nullptr) return false;
  if (!helping) ++w.lifo_streak_;
  return true;
}

result<void> pool_core::push_one(job_function&& fn, local_push where) {
  if (!fn) return make_error_nothrow(error_code::invalid_argument, [&] { return named() + ": empty job"; });
  return detail::refuse_if_out_of_memory([&] { return push_one_unchecked(std::move(fn), where); });
}

result<void> pool_core::push_one_unchecked(job_function&& fn, local_push where) {
  if (local_deques_) {
    if (pool_worker* w = own_worker()) return push_local(*w, std::move(fn), where);
  }
  // A fork-join piece from outside the workers of a bounded pool: see
  // push_fork_bounded(). (A worker's pieces took the branch above.)
  if (where == local_push::fork && bounds_.capacity != 0) return push_fork_bounded(std::move(fn));
  return push_to_injector(std::move(fn));
}

result<void> pool_core::push_to(injector& target, job_function&& fn, std::uint64_t kind_mask, admission how) {
  stamp_if_sampled(fn);
  // The queue counts the job as accepted inside its critical section, so
  // close() in stop() makes the accepted total exact and no worker can
  // finish a job before it is counted (see idle_now()).
  // A worker is woken only when this push made the queue non-empty (for
  // the mutex, lock-free and adaptive injectors, and per kind for the
  // typed injector over those; the others always wake): see
  // injector::push_and_check(). A pool that ran the job on this thread
  // (backpressure::caller_runs) leaves `wake` true; that costs one look.
  bool wake = true;
  return push_external(
      kind_mask, std::span<job_function>(&fn, 1), [&] { return target.push_and_check(std::move(fn), wake); }, &wake,
      how);
}

result<void> pool_core::push_to(injector& target, job_function&& fn, std::uint64_t kind_mask) {
  return push_to(target, std::move(fn), kind_mask, admission::policy);
}

// A fork-join piece from outside the workers of a bounded pool: its caller
// runs it when it is refused, so the pool takes it only if it has room (no
// waiting, no eviction; see admission).
result<void> pool_core::push_fork_bounded(job_function&& fn) {
  return push_to(*queue_, std::move(fn), ~std::uint64_t{0}, admission::try_only);
}

result<void> pool_core::push_batch(std::span<job_function> fns) {
  if (fns.empty()) return empty_batch();
  // Before anything else (backpressure included): a batch with an empty job
  // is refused whole, and no policy ever sees it (caller_runs would run it).
  if (auto r = refuse_empty_jobs(fns); !r) return r;
  return detail::refuse_if_out_of_memory([&] { return push_batch_unchecked(fns); });
}

result<void> pool_core::refuse_empty_jobs(std::span<const job_function> fns) const noexcept {
  for (std::size_t i = 0; i < fns.size(); ++i) {
    if (!fns[i]) {
      return make_error_nothrow(error_code::invalid_argument,
                                [&] { return named() + ": empty job in batch (element " + std::to_string(i) + ")"; });
    }
  }
  return {};
}

bool pool_core::push_local_batch(pool_worker& w, std::span<job_function> fns, result<void>& r) {
  // As push_local(), for a whole batch: all of it or none (the state check
  // below, then every node and deque slot reserved before a job moves).
  if (stop_begun()) {
    r = stopped_error();
    return true;
  }
  // Out of memory: the injector takes the batch (push_local() does the same).
  if (!w.node_cache_.reserve(fns.size()) || !w.deque_.reserve(fns.size())) {
    note_allocation_failure(w);
    return false;
  }
  w.degraded_ = false;
  // release: the accepted count is published before any of the jobs can be
  // stolen and finished (see idle_now()).
  single_writer_add(w.spawned_, fns.size(), std::memory_order_release);
  for (auto& fn : fns) {
    stamp_if_sampled(fn);
    fn.set_tag(static_cast<std::uint8_t>(fn.tag() & ~bounded_tag));  // local jobs hold no room
    detail::job_node* node = w.node_cache_.allocate();               // reserved above: does not allocate
    node->fn = std::move(fn);
    w.deque_.push(node);  // reserved above: no allocation; thieves see it from here
  }
  wake_worker_if_needed();
  r = {};
  return true;
}

result<void> pool_core::push_batch_unchecked(std::span<job_function> fns, std::uint64_t kind_mask) {
  // From one of this pool's own workers, the batch goes to its deque, like a
  // single job (push_local()): not bounded (backpressure.hpp).
  if (local_deques_) {
    if (pool_worker* w = own_worker()) {
      if (result<void> r; push_local_batch(*w, fns, r)) return r;
    }
  }
  for (auto& fn : fns) stamp_if_sampled(fn);
  // One wake-up; the woken worker wakes the next while work remains
  // (see worker_main), so a burst wakes only as many workers as it keeps busy.
  return push_external(kind_mask, fns, [&] { return queue_->push_batch(fns); });
}

job_outcome pool_core::run_guarded(job_function& fn) noexcept {
  // A job without a token must not see the token of a job it runs inside
  // (a helping wait, caller_runs): token_job sets its own.
  const cancellation_token* outer_token = this_job::detail::current_token;
  this_job::detail::current_token = nullptr;
  job_outcome outcome = job_outcome::succeeded;
  try {
    outcome = fn.run();
  } catch (...) {
    outcome = job_outcome::failed_reported;
    report_failure(std::current_exception());
  }
  fn.reset();  // the job's captures are destroyed before it counts as done
  this_job::detail::current_token = outer_token;
  return outcome;
}

void pool_core::stamp_if_sampled(job_function& fn) const noexcept {
  if (latency_sample_every_ == 0) return;
  // The countdown is per thread, shared by all pools: never wait longer
  // than this pool's own rate.
  if (tl_sample_countdown > latency_sample_every_) tl_sample_countdown = latency_sample_every_;
  if (--tl_sample_countdown != 0) return;
  tl_sample_countdown = latency_sample_every_;
  fn.set_enqueue_stamp(steady_now_ns());
}

void pool_core::wake_worker_if_needed(std::uint64_t kind_mask) noexcept {
  // Dekker with a worker going to sleep: it decrements the spinning count
  // (seq_cst), announces itself (prepare_wait()) and looks for work once
  // more; we pushed, run the light side of the asymmetric fence (a compiler
  // barrier where membarrier is registered, else a full fence) and read the
  // spinning count and the waiters. With full fences on both sides one of
  // us sees the other. With only a compiler barrier here, its look may miss
  // our push while we read no sleeper: its first sleep is then bounded, and
  // before it sleeps for good it runs the heavy side (membarrier) and looks
  // again, so either our push is visible to that look or our reads came
  // after its barrier and saw it (sleep_until_notified(),
  // detail/asymmetric_fence.hpp). A worker read as spinning passes through
  // the same sleep path before it can sleep. So no full fence per push: the
  // fork-join spawn path runs no locked instruction when nothing is stolen.
  detail::asymmetric_fence_light();
  THREAD_SYSTEM_CHAOS_POINT();
  const std::size_t n = group_count_.load(std::memory_order_acquire);  // pairs with group_for()
  for (std::size_t i = 0; i < n; ++i) {
    detail::wake_group* g = groups_[i].load(std::memory_order_relaxed);  // fixed once published
    if ((g->mask & kind_mask) == 0) continue;
    if (g->spinning.load(std::memory_order_relaxed) != 0) continue;  // ordered by the fence above
    g->work_available.notify_one_after_fence();
  }
}

void pool_core::wake_all_groups() noexcept {
  const std::size_t n = group_count_.load(std::memory_order_acquire);  // pairs with group_for()
  for (std::size_t i = 0; i < n; ++i) {
    groups_[i].load(std::memory_order_relaxed)->work_available.notify_all();  // fixed once published
  }
}

// A worker thread's help_source (sync/helping_wait.hpp): a helping wait on
// the worker runs one job of this pool through its worker.
class pool_core::worker_help final : public detail::help_source {
 public:
  worker_help(pool_core& pool, pool_worker& worker) noexcept : pool_(pool), worker_(worker) {}
  bool help_once() override {
    std::array<job_function, 1> one;
    return pool_.find_and_run(worker_, one, /*helping=*/true);
  }

 private:
  pool_core& pool_;
  pool_worker& worker_;
};

namespace {
// The worker's buffer for one injector batch. The default batch (16 jobs,
// 1 KB) lives on the worker's stack and its slots are constructed as first
// needed; a larger batch (set_injector_batch(), up to 64) gets a buffer on
// the heap the first time it is asked for. So an idle pool's threads touch
// a page less of stack than with room for the largest batch there. Out of
// memory the batch is the default one (the size is a hint).
// NOLINTBEGIN(cppcoreguidelines-pro-type-member-init): storage_ is raw on
// purpose (slots are constructed in first(), so untouched ones stay untouched).
class batch_buffer {
 public:
  batch_buffer() = default;
  batch_buffer(const batch_buffer&) = delete;
  batch_buffer& operator=(const batch_buffer&) = delete;
  ~batch_buffer() { std::destroy_n(slots(), ready_); }
  // The first n slots (1 <= n <= max_injector_batch), or the inline ones
  // when a larger buffer cannot be allocated.
  std::span<job_function> first(std::size_t n) noexcept {
    if (n > inline_slots) {
      if (!large_) large_.reset(new (std::nothrow) job_function[pool_worker::max_injector_batch]);
      if (large_) return {large_.get(), n};
      n = inline_slots;
    }
    for (; ready_ < n; ++ready_) ::new (static_cast<void*>(slots() + ready_)) job_function();  // does not throw
    return {slots(), n};
  }

 private:
  static constexpr std::size_t inline_slots = pool_worker::default_injector_batch;
  job_function* slots() noexcept { return std::launder(reinterpret_cast<job_function*>(storage_)); }
  alignas(job_function) std::byte storage_[sizeof(job_function) * inline_slots];
  std::size_t ready_ = 0;
  std::unique_ptr<job_function[]> large_;
};
// NOLINTEND(cppcoreguidelines-pro-type-member-init)
static_assert(std::is_nothrow_default_constructible_v<job_function>);
}  // namespace

namespace {
// True when a helping wait on this thread has nested past the worker's
// help floor (see find_and_run()). The first time, finds the floor: the
// stack address halfway between the worker loop's frame and the end of
// this thread's stack (0 when unknown). From the real end, not the size
// asked for: the thread library keeps thread-local storage at the stack's
// top (ThreadSanitizer's per-thread state took half of a 256 KiB stack).
// Frame addresses, not a local's: under AddressSanitizer locals may live on
// a separate fake stack.
bool past_help_floor(pool_worker& w) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  if (w.help_floor_ == pool_worker::help_floor_unknown) [[unlikely]] {
    const std::uintptr_t low = detail::os_thread::current_stack_low();
    w.help_floor_ = low != 0 && w.help_base_ > low ? low + (w.help_base_ - low) / 2 : 0;
  }
  return w.help_floor_ != 0 && reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)) < w.help_floor_;
#else
  (void)w;
  return false;
#endif
}
}  // namespace

void pool_core::worker_main(pool_worker& w) {
  tl_context = worker_context{this, &w};
  const failure_sink_scope sink(as_failure_sink());
#if defined(__GNUC__) || defined(__clang__)
  w.help_base_ = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));  // see past_help_floor()
#endif
  w.help_floor_ = pool_worker::help_floor_unknown;
  worker_help help(*this, w);
  detail::help_source* const outer_help = detail::set_help_source(&help);
  // release: pairs with the acquire load in worker_os_tid_locked().
  w.os_tid_.store(detail::current_os_thread_id(), std::memory_order_release);
  (void)detail::set_current_thread_name(w.thread_name_);  // a convenience: failure changes nothing
  batch_buffer local;
  // The buffer for this iteration's batch (relaxed: a setting, see find_and_run()).
  auto batch = [&local, &w] {
    return local.first(
        std::clamp<std::size_t>(w.injector_batch_.load(std::memory_order_relaxed), 1, pool_worker::max_injector_batch));
  };
  std::uint64_t busy_since = 0;
  // A busy stretch runs from waking up until no work is found; its start is
  // published so statistics include a stretch in progress.
  auto start_stretch = [&w, &busy_since] {
    busy_since = steady_now_ns();
    w.busy_since_ns_.store(busy_since, std::memory_order_relaxed);  // statistics only
  };
  start_stretch();

  for (;;) {
    // acquire: pairs with the release CAS in resize().
    if (w.membership_.load(std::memory_order_acquire) == pool_worker::retiring) {
      // Leaving: run what is on this worker's own deque (only this thread
      // pushes there), then go - unless resize() took the worker back first.
      detail::job_node* node = nullptr;
      while (take_from_lifo_slot(w, /*helping=*/true, node) || w.deque_.pop(node)) run_node(w, node);
      int m = pool_worker::retiring;
      // acq_rel: pairs with the CAS retiring -> active in resize().
      if (w.membership_.compare_exchange_strong(m, pool_worker::exited, std::memory_order_acq_rel)) {
        single_writer_add(w.busy_ns_, steady_now_ns() - busy_since);  // statistics only
        w.busy_since_ns_.store(0, std::memory_order_relaxed);         // statistics only
        became_idle_.notify_all();                                    // its last jobs may have made the pool idle
        // A producer may have skipped its wake-up because this worker was
        // spinning when it was told to leave: pass the wake-up on.
        wake_worker_if_needed();
        break;
      }
      continue;
    }
    if (find_and_run(w, batch(), /*helping=*/false)) continue;

    single_writer_add(w.busy_ns_, steady_now_ns() - busy_since);
    w.busy_since_ns_.store(0, std::memory_order_relaxed);  // statistics only
    if (queue_->is_closed()) {
      // Closed was observed (acquire): every injector push that succeeded
      // did so before the close, and nothing is pushed to this worker's deque
      // after stop() (push_local refuses), so one more look decides.
      if (find_and_run(w, batch(), false)) {
        start_stretch();
        continue;
      }
      break;
    }
    // Out of work: the pool may have become idle.
    became_idle_.notify_all();

    detail::wake_group& group = *w.group_;
    bool work_seen = false;
    // relaxed: a soft cap; races may exceed it by a few.
    if (group.spinning.load(std::memory_order_relaxed) < group.max_spinners) {
      // seq_cst: producers that read spinning != 0 skip their wake-up; a
      // spinner that misses their job goes through the sleep path below
      // (heavy fence, last look) before it can sleep (see
      // wake_worker_if_needed()).
      group.spinning.fetch_add(1, std::memory_order_seq_cst);
      for (int i = 0; i < spin_polls && !work_seen; ++i) {
        detail::cpu_relax();
        work_seen = work_visible(w);
      }
      // seq_cst: from here producers wake a sleeper again; the re-check
      // after prepare_wait() below catches a push that raced with this.
      group.spinning.fetch_sub(1, std::memory_order_seq_cst);
    }
    // The yield phase (see idle_wait_ns_ above). It is not counted in `spinning`:
    // producers keep notifying, which costs them one relaxed load while no
    // worker is parked, and nothing in the wake-up protocol changes.
    if (!work_seen && idle_wait_ns_ != 0) {
      const std::uint64_t start = steady_now_ns();
      // Saturating: an idle_wait longer than the clock can count never ends.
      const std::uint64_t until = idle_wait_ns_ > ~start ? ~std::uint64_t{0} : start + idle_wait_ns_;
      do {
        std::this_thread::yield();
        work_seen = work_visible(w);
      } while (!work_seen && steady_now_ns() < until);
    }
    if (work_seen) {
      start_stretch();
      continue;
    }

    THREAD_SYSTEM_CHAOS_POINT();
    const auto key = group.work_available.prepare_wait();
    THREAD_SYSTEM_CHAOS_POINT();
    if (work_visible(w)) {
      group.work_available.cancel_wait();
      start_stretch();
      continue;
    }
    single_writer_add(w.parks_, 1);
    const std::uint64_t parked_at = steady_now_ns();
    sleep_until_notified(group, key, w);
    start_stretch();
    single_writer_add(w.idle_ns_, busy_since - parked_at);
    single_writer_add(w.wakeups_, 1);
  }
  tl_context = worker_context{};
  (void)detail::set_help_source(outer_help);
}

void pool_core::sleep_until_notified(detail::wake_group& group, event_count::key_type key, const pool_worker& w) {
  // The sleeper's side of the Dekker pair with wake_worker_if_needed() (see
  // there). Pushers run only the light side of the asymmetric fence, so the
  // look for work after prepare_wait() above may miss a push whose store was
  // still in its pusher's store buffer, while the pusher read no sleeper.
  // Sleeping in two steps keeps that from stranding the job and keeps the
  // heavy side rare:
  //  1. a sleep of at most first_sleep: a notification ends it as usual; in
  //     that race the job waits until it ends;
  //  2. if it ended by itself, announce again, run the heavy side (a
  //     membarrier: a barrier on every running thread of the process), look
  //     again, and only then sleep until notified.
  // So a worker runs the membarrier, which interrupts the CPUs running the
  // process's other threads (about 11 us each on this test VM), at most once
  // per first_sleep + its spin and yield phases, not on every sleep. Where
  // both sides are full fences (no membarrier, ThreadSanitizer) step 1's
  // look is already exact and the first sleep is not bounded.
  // relaxed: set once before any worker exists (asymmetric_fence_init()).
  if (!detail::asymmetric_fence_cheap.load(std::memory_order_relaxed)) {
    group.work_available.commit_wait(key);
    return;
  }
  // A bounded sleep first; with membarrier failing after registration (a
  // seccomp filter installed later) the pair no longer holds and every sleep
  // stays bounded (a job in that race waits at most first_sleep, never
  // forever).
  while (!group.work_available.commit_wait_until(key, std::chrono::steady_clock::now() + first_sleep)) {
    key = group.work_available.prepare_wait();
    const bool paired = detail::asymmetric_fence_heavy();
    THREAD_SYSTEM_CHAOS_POINT();
    if (work_visible(w)) {
      group.work_available.cancel_wait();
      return;
    }
    if (paired) {
      group.work_available.commit_wait(key);
      return;
    }
  }
}

bool pool_core::work_visible(const pool_worker& w) const noexcept {
  if (queue_->is_closed()) return true;
  // A worker asked to leave must wake up to do so (seq_cst: ordered like the
  // queue checks, against resize()'s wake-up).
  if (w.membership_.load(std::memory_order_seq_cst) == pool_worker::retiring) return true;
  if (paused_.load(std::memory_order_seq_cst)) return false;  // Dekker with resume(); see there
  if (queue_->has_work_for(w.responsibility_mask_)) return true;
  // Without stealing (typed pools) only this worker's own deque counts: only
  // it runs what it holds there - the rest of a batch that a job calling
  // pause() interrupted - and an idle check that skipped it missed a
  // resume() that came while the worker spun or yielded (the jobs waited for
  // the next push). Only this thread pushes there: no ordering needed.
  if (!local_deques_) return !w.deque_.empty_approx();
  const std::size_t n = published_.load(std::memory_order_acquire);  // pairs with start_worker()
  for (std::size_t i = 0; i < n; ++i) {
    const pool_worker* other = steal_table_[i].load(std::memory_order_relaxed);  // fixed once published
    if (!other->deque_.empty_approx()) return true;
    // relaxed: ordered like the deque checks (the sleeper's heavy fence
    // here, the light one in wake_worker_if_needed() after push_local()'s
    // store).
    // Another worker's continuation does not count: its owner runs it as
    // soon as its current job returns, and an idle worker polling the slot
    // would only slow the owner down (the slot's cache line moving on every
    // hop). This worker's own does: it is the owner, idle because the pool
    // was paused when that job returned, and resume()'s wake-up may have
    // come before this worker's prepare_wait().
    const pool_worker::slot_word slot = other->lifo_slot_.load(std::memory_order_relaxed);
    if (slot != 0 && (other == &w || (slot & pool_worker::continuation_bit) == 0)) return true;
  }
  // A task_group owner's jobs kept within reach (ordered like the deque
  // checks; the count of slots ever held: acquire, pairs with
  // lease_owner_slot()).
  const std::size_t used = owner_slots_.used.load(std::memory_order_acquire);
  const owner_slot* slots = owner_slots_.slots.load(std::memory_order_relaxed);  // ordered by the acquire above
  for (std::size_t i = 0; i < used; ++i) {
    if (slots[i].has_work()) return true;
  }
  return false;
}

bool pool_core::find_and_run(pool_worker& w, std::span<job_function> local, bool helping) {
  // Helping waits take one job at a time so the awaited result is not
  // delayed behind a batch.
  // A paused pool starts nothing (acquire: pairs with the store in pause()) -
  // until it is closed: stop() runs or cancels everything even if a job
  // calls pause() while the pool drains.
  if (paused_.load(std::memory_order_acquire) && !queue_->is_closed()) return false;
  // A helping wait runs any job of the pool, and that job may wait and help
  // in turn, one level deeper each time: N independent jobs that each wait
  // nested N deep and overflowed the stack. Past half the worker's stack a
  // helping wait takes only this worker's own jobs - its LIFO slot and
  // deque, which its own (nested) waits filled - and leaves the injector's
  // and other workers' jobs to the rest of the pool (oneTBB's stealing
  // threshold works the same way).
  if (helping && past_help_floor(w)) {
    detail::job_node* own = nullptr;
    if ((local_deques_ && take_from_lifo_slot(w, helping, own)) || w.deque_.pop(own)) {
      run_node(w, own);
      return true;
    }
    return false;
  }
  const std::size_t batch_limit =
      // relaxed: a setting (set_injector_batch); nothing is published with it.
      helping ? 1 : std::min<std::size_t>(local.size(), w.injector_batch_.load(std::memory_order_relaxed));
  auto run_from_injector = [&](std::size_t limit) -> bool {
    // All but the first job of a batch go onto the deque, in nodes: take
    // only as many as there is room for without allocating. Out of memory
    // that is one job, which needs neither.
    if (limit > 1) {
      const bool nodes = w.node_cache_.reserve(limit - 1);
      const bool slots = w.deque_.reserve(limit - 1);
      if (nodes && slots) {
        w.degraded_ = false;
      } else {
        note_allocation_failure(w);
        limit = 1 + std::min({limit - 1, w.node_cache_.available(), w.deque_.room()});
      }
    }
    const std::size_t share = worker_count_.load(std::memory_order_relaxed);  // a hint
    std::size_t n = 0;
    try {
      n = queue_->pop_for(w.responsibility_mask_, local.first(limit), share);
    } catch (const std::bad_alloc&) {
      // The queue could not take a job without memory (a lock-free queue's
      // hazard record): nothing was taken. Give the CPU away and look again
      // later; other workers and the deque's jobs go on meanwhile.
      note_allocation_failure(w);
      std::this_thread::yield();
      return false;
    }
    if (n == 0) return false;
    // Typed pools: the kind of the batch whose rest goes onto the deque.
    if (n > 1 && !local_deques_) {
      w.batch_rank_ = detail::job_tag::rank(local[0].tag());
      w.deque_rank_.store(w.batch_rank_, std::memory_order_relaxed);  // a hint (see pool_worker.hpp)
    }
    // All but the first job go onto this worker's deque (newest-first, so
    // the owner still takes them in FIFO order): there they can be stolen,
    // and a helping wait in the first job can reach them. Held in a private
    // array instead, a job could wait forever on one queued behind it.
    // They were counted by the injector already, so spawned_ stays as is.
    for (std::size_t i = n; i-- > 1;) {
      detail::job_node* moved = w.node_cache_.allocate();  // reserved above: no allocation
      moved->fn = std::move(local[i]);
      w.deque_.push_from_queue(moved);  // reserved above: no allocation
    }
    // More work than this worker will run now: make sure someone else is coming.
    if (n > 1) {
      wake_worker_if_needed();
    } else if (const std::uint64_t pending = queue_->pending_mask(); pending != 0) {
      wake_worker_if_needed(pending);
    }
    execute(w, local[0]);
    return true;
  };

  // The periodic look takes a single job: a batch would go onto a deque
  // that is not empty, and repeated looks could grow it without bound.
  if (!local_deques_) {
    // Typed pools. The deque holds only the rest of one batch of the
    // worker's highest kind (rank batch_rank_), taken while the deque was
    // empty: run it first unless a job of a higher kind this worker serves
    // has appeared since (a kind created after the batch was taken).
    detail::job_node* node = nullptr;
    if (!w.deque_.empty_approx()) {
      const std::uint64_t higher = w.responsibility_mask_ & ((std::uint64_t{1} << w.batch_rank_) - 1);
      if ((higher == 0 || (queue_->pending_mask() & higher) == 0) && w.deque_.pop(node)) {
        run_node(w, node);
        return true;
      }
      if (run_from_injector(1)) return true;
      if (w.deque_.pop(node)) {
        run_node(w, node);
        return true;
      }
      return false;
    }
    return run_from_injector(batch_limit);
  }
  // A job from anywhere but the LIFO slot restarts the slot's budget.
  if (++w.tick_ % injector_check_interval == 0 && run_from_injector(1)) {
    w.lifo_streak_ = 0;
    return true;
  }
  detail::job_node* node = nullptr;
  if (take_from_lifo_slot(w, helping, node)) {
    run_node(w, node);
    return true;
  }
  w.lifo_streak_ = 0;
  if (w.deque_.pop(node)) {
    run_node(w, node);
    return true;
  }
  if (run_from_injector(batch_limit)) return true;
  if (try_steal(w, node)) {
    run_node(w, node);
    return true;
  }
  // Last: a job a task_group's owner off the pool keeps within reach.
  // relaxed: a hint (0 for a pool no owner off its workers has used);
  // run_owner_slot_job() reads it again with acquire.
  return owner_slots_.used.load(std::memory_order_relaxed) != 0 && run_owner_slot_job();
}

bool pool_core::run_owner_slot_job() noexcept {
  // Until stop() begins: the jobs left then run in their group's wait (on
  // the waiting thread), neither drained nor cancelled by stop().
  if (stop_begun()) return false;
  // acquire: pairs with lease_owner_slot()'s release.
  const std::size_t used = owner_slots_.used.load(std::memory_order_acquire);
  owner_slot* slots = owner_slots_.slots.load(std::memory_order_relaxed);  // ordered by the acquire above
  // A paused pool starts no job: asked inside the lease, after the job's
  // publication was acquired, so a job run() after pause() returned (on
  // that thread, or ordered after it) is never taken here, even by a worker
  // that passed find_and_run()'s check before the pause. (acquire: pairs
  // with the store in pause(), as there.)
  const auto paused = [this]() noexcept { return paused_.load(std::memory_order_acquire); };
  THREAD_SYSTEM_CHAOS_POINT();  // widens the window between find_and_run()'s pause check and this look
  for (std::size_t i = 0; i < used; ++i) {
    if (owner_job* job = slots[i].steal(paused)) {
      // More there: another sleeping worker could take one too (chained
      // wake-up, as in try_steal()).
      if (slots[i].has_work()) wake_worker_if_needed();
      job->run(job);
      return true;
    }
  }
  return false;
}

bool pool_core::try_steal(pool_worker& w, detail::job_node*& out) {
  const std::size_t n = published_.load(std::memory_order_acquire);  // pairs with start_worker()
  if (n <= 1) return false;
  // xorshift32: a cheap random start so thieves spread over victims.
  std::uint32_t x = w.rng_state_;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  w.rng_state_ = x;
  const std::size_t start = x % n;
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool lost_any = false;
    for (std::size_t k = 0; k < n; ++k) {
      pool_worker* victim = steal_table_[(start + k) % n].load(std::memory_order_relaxed);  // fixed once published
      if (victim == &w) continue;
      auto r = victim->deque_.steal();
      if (r) {
        out = r.value;
        single_writer_add(w.steals_, 1);
        // The victim has more: another sleeping worker could steal too
        // (chained wake-up; wake_worker_if_needed() does nothing while a
        // worker of the group spins, and it will find the work).
        if (!victim->deque_.empty_approx()) wake_worker_if_needed();
        return true;
      }
      lost_any |= r.status == steal_status::lost_race;
    }
    if (!lost_any) break;  // every deque was empty: do not spin on it
  }
  // Last resort: another worker's LIFO slot (its newest job, which that
  // worker would run next; taken only when no deque had anything).
  for (std::size_t k = 0; k < n; ++k) {
    pool_worker* victim = steal_table_[(start + k) % n].load(std::memory_order_relaxed);  // fixed once published
    if (victim == &w) continue;
    // relaxed pre-check: avoids the exchange on an empty slot.
    const pool_worker::slot_word seen = victim->lifo_slot_.load(std::memory_order_relaxed);
    if (seen == 0) continue;
    if ((seen & pool_worker::continuation_bit) != 0 && !owner_stalled(w, *victim)) continue;
    // acquire: pairs with the owner's release store/exchange in push_local().
    if (const pool_worker::slot_word taken = victim->lifo_slot_.exchange(0, std::memory_order_acquire)) {
      out = pool_worker::slot_node(taken);
      single_writer_add(w.steals_, 1);
      return true;
    }
  }
  return false;
}

bool pool_core::owner_stalled(pool_worker& w, const pool_worker& victim) noexcept {
  // relaxed: statistics counters, read as a progress hint only; a stale
  // value only delays the decision or takes a continuation early, and
  // either is just a steal.
  const std::uint64_t progress =
      victim.processed_.load(std::memory_order_relaxed) + victim.cancelled_.load(std::memory_order_relaxed);
  const std::uint64_t now = steady_now_ns();
  if (w.watched_ != &victim || w.watched_progress_ != progress) {
    // A new victim, or it finished a job since: start the grace period over.
    w.watched_ = &victim;
    w.watched_progress_ = progress;
    w.watched_since_ = now;
    return false;
  }
  return now - w.watched_since_ >= continuation_grace_ns;
}

void pool_core::run_node(pool_worker& w, detail::job_node* node) {
  execute(w, node->fn);
  w.node_cache_.release(node);
}

void pool_core::execute(pool_worker& w, job_function& fn) {
  // acquire: pairs with the release store in stop(); a job not yet started
  // when cancellation is requested is cancelled rather than run.
  const std::uint8_t raw_tag = fn.tag();
  const auto tag = static_cast<std::uint8_t>(raw_tag & ~bounded_tag);
  // A job taken just before pause() became visible to this worker, but
  // pushed after pause() returned, must not start either: the push
  // happens-after the pause store, so this load sees it. Hold the job until
  // resume() or stop() - still holding its room (backpressure.hpp: room
  // frees when a job starts; a held job has not).
  if (paused_.load(std::memory_order_acquire)) wait_while_paused();  // pairs with the seq_cst store in pause()
  if ((raw_tag & bounded_tag) != 0) release_room(1);  // the job leaves the queue now: it starts or is cancelled
  if (cancel_requested_.load(std::memory_order_acquire)) {
    fn.cancel();
    fn.reset();
    queue_->note_cancelled(tag);
    single_writer_add(w.cancelled_, 1, std::memory_order_release);  // pairs with idle_now()
    return;
  }
  // A sampled job: record how long it waited and how long it runs.
  const std::uint64_t stamp = fn.enqueue_stamp();
  std::uint64_t started = 0;
  if (stamp != 0) {
    started = steady_now_ns();
    const std::uint64_t wait = started > stamp ? started - stamp : 0;
    w.wait_histogram_.record(wait);
    if (tag != 0) queue_->note_wait(tag, wait);
  }
  const job_outcome outcome = run_guarded(fn);
  if (stamp != 0) w.run_histogram_.record(steady_now_ns() - started);
  if (outcome == job_outcome::cancelled) {
    // The job saw its token cancelled and completed its own future.
    queue_->note_cancelled(tag);
    single_writer_add(w.cancelled_, 1, std::memory_order_release);  // pairs with idle_now()
    return;
  }
  const bool failed = outcome == job_outcome::failed_reported;
  if (failed) single_writer_add(w.failed_, 1);
  if (tag != 0) queue_->note_done(w.index_, tag, failed);  // a typed injector counts it per kind
  // release: pairs with the acquire loads in idle_now(); everything the job
  // did is visible to a wait_idle() that sees this count.
  single_writer_add(w.processed_, 1, std::memory_order_release);
}

void pool_core::run_batch(pool_worker& w, std::span<job_function> batch) {
  for (auto& fn : batch) execute(w, fn);
}

void pool_core::run_left_behind(std::span<job_function> batch) {
  // This thread may be a worker of another pool: its context comes back.
  struct as_caller_runner {
    worker_context outer = tl_context;
    explicit as_caller_runner(pool_core* core) noexcept { tl_context = worker_context{core, &core->caller_runner_}; }
    as_caller_runner(const as_caller_runner&) = delete;
    as_caller_runner& operator=(const as_caller_runner&) = delete;
    ~as_caller_runner() { tl_context = outer; }
  } scope(this);
  run_batch(caller_runner_, batch);
}

bool pool_core::on_own_worker() const noexcept { return tl_context.pool == this; }

bool pool_core::nothing_left_to_steal_from_caller() const noexcept {
  if (tl_context.pool == this) {
    const pool_worker& w = *tl_context.worker;
    // relaxed: a hint; the slot is stealable too.
    return w.deque_.empty_approx() && w.lifo_slot_.load(std::memory_order_relaxed) == 0;
  }
  return queue_->empty_approx();
}

void pool_core::wait_while_paused() noexcept {
  for (;;) {
    const auto key = resumed_.prepare_wait();
    // seq_cst: Dekker with resume()/stop(), which store then notify.
    if (!paused_.load(std::memory_order_seq_cst) || queue_->is_closed()) {
      resumed_.cancel_wait();
      return;
    }
    resumed_.commit_wait(key);
  }
}

// The fronts' pushes (pools/pool_front.hpp), in this file so that the
// core's push paths above inline into them.
result<void> pool_front::push_one(job_function&& fn) { return core_->push_one(std::move(fn)); }

result<void> pool_front::push_batch(std::span<job_function> fns) { return core_->push_batch(fns); }

result<void> pool_front::refuse_empty_jobs(std::span<const job_function> fns) const noexcept {
  return core_->refuse_empty_jobs(fns);
}

result<void> pool_front::push_continuation(job_function&& fn) {
  return core_->push_one(std::move(fn), pool_core::local_push::continuation);
}

result<void> pool_front::push_fork(job_function&& fn) {
  return core_->push_one(std::move(fn), pool_core::local_push::fork);
}

result<void> pool_front::push_routed(std::uint64_t kind_mask, injector& target, job_function&& fn) {
  return core_->push_to(target, std::move(fn), kind_mask);
}

result<void> pool_front::push_routed_batch(std::uint64_t kind_mask, std::span<job_function> fns) {
  if (fns.empty()) return core_->empty_batch();  // as push_batch()
  return core_->push_batch_unchecked(fns, kind_mask);
}

bool nothing_left_to_steal(const pool_front& pool) noexcept { return pool.core_->nothing_left_to_steal_from_caller(); }

taken_back_account& taken_back_of(pool_front& pool) noexcept { return pool.core_->taken_back(); }

owner_slot* lease_owner_slot(pool_front& pool) noexcept {
  pool_core& core = *pool.core_;
  if (!core.local_deques_ || core.stop_begun()) return nullptr;
  // acquire: pairs with the installing CAS below (the array's construction).
  owner_slot* slots = core.owner_slots_.slots.load(std::memory_order_acquire);
  if (slots == nullptr) {
    auto* made = new (std::nothrow) owner_slot[owner_slot_count];
    if (made == nullptr) return nullptr;  // no memory: the owner's jobs go to the queue
    // acq_rel: publishes the construction; on failure, acquires another
    // owner's array, and this one goes.
    if (core.owner_slots_.slots.compare_exchange_strong(slots, made, std::memory_order_acq_rel,
                                                        std::memory_order_acquire)) {
      slots = made;
    } else {
      delete[] made;
    }
  }
  for (std::size_t i = 0; i < owner_slot_count; ++i) {
    owner_slot& s = slots[i];
    std::uint32_t expected = owner_slot::free_slot;
    // acquire: pairs with give_back()'s release (the last holder's resets).
    if (s.state.load(std::memory_order_relaxed) != expected ||
        !s.state.compare_exchange_strong(expected, owner_slot::held, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
      continue;
    }
    // Thieves look at the first owner_slots_.used slots only: a pool whose
    // slots were never held looks at none. Raised before the holder's
    // first publish, and only ever raised. release: pairs with the
    // thieves' acquire load (the array's installation comes before); the
    // publish itself is ordered by the slot's own `published` (and, for an
    // idle worker, by the fences of wake_worker_if_needed()).
    std::size_t used = core.owner_slots_.used.load(std::memory_order_relaxed);
    while (used <= i && !core.owner_slots_.used.compare_exchange_weak(used, i + 1, std::memory_order_release,
                                                                      std::memory_order_relaxed)) {
    }
    return &s;
  }
  return nullptr;
}

void wake_for_owner_slot(pool_front& pool) noexcept { pool.core_->wake_worker_if_needed(); }

void owner_slot::change_from_held(std::uint32_t to) noexcept {
  std::uint32_t expected = held;
  // acquire: pairs with leave()'s release (the last taker's words).
  for (int tries = 0; !state.compare_exchange_weak(expected, to, std::memory_order_acquire, std::memory_order_relaxed);
       ++tries) {
    expected = held;
    if (tries < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();  // a taker preempted inside the lease (it only moves a pointer there)
    }
  }
}

owner_job* owner_slot::take_newest() noexcept {
  enter();
  owner_job* job = nullptr;
  const std::uint32_t t = taken.load(std::memory_order_relaxed);      // written only inside the lease
  const std::uint32_t p = published.load(std::memory_order_relaxed);  // the holder's own word
  if (p != t) {
    job = jobs[p - 1];
    published.store(p - 1, std::memory_order_relaxed);  // published to later takers by leave()
  }
  leave();
  return job;
}

bool owner_slot::make_room() noexcept {
  enter();
  const bool consumed = taken.load(std::memory_order_relaxed) == published.load(std::memory_order_relaxed);
  if (consumed) {
    taken.store(0, std::memory_order_relaxed);  // published to later takers by leave()
    published.store(0, std::memory_order_relaxed);
  }
  leave();
  return consumed;
}

}  // namespace thread_system::detail
