// The paths by which a job enters the scheduler core (detail::pool_core,
// pool_core.hpp): a worker's LIFO slot and deque (push_local), the
// injector (push_to, through push_external's admission), batches, the
// latency stamp of sampled jobs, and waking a worker; and the fronts'
// pushes (pools/pool_front.hpp), in this file so that the core's push paths
// inline into them. The worker loop that takes what these push is in
// pool_core.cpp.
#include "pool_core.hpp"
#include "thread_system/detail/chaos.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

#include "thread_system/detail/asymmetric_fence.hpp"
#include "thread_system/detail/clock.hpp"

// The concrete injectors, so that their final overrides are visible here.
#include "injectors.hpp"

namespace thread_system::detail {

namespace {

using detail::steady_now_ns;

// Per submitting thread: jobs left until the next one is stamped for the
// latency histograms (shared by all pools; sampling is statistical anyway).
thread_local std::uint32_t tl_sample_countdown = 1;

}  // namespace

pool_worker* pool_core::own_worker() const noexcept {
  const worker_context* c = context_of(this);
  return c != nullptr ? c->worker : nullptr;
}

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

result<void> pool_core::push_to_injector(job_function&& fn) {
  return push_to(*queue_, std::move(fn), ~std::uint64_t{0}, admission::policy);
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

bool pool_core::on_own_worker() const noexcept { return context_of(this) != nullptr; }

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

}  // namespace thread_system::detail
