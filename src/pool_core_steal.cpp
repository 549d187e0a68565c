// Taking work from others in the scheduler core (detail::pool_core,
// pool_core.hpp): what an idle worker can see to take (work_visible), a
// worker's steal from another's deque and LIFO slot (try_steal,
// owner_stalled), the slots in which task_group owners outside the pool
// keep their jobs within workers' reach - leasing one (lease_owner_slot),
// the holder's side of its protocol (owner_slot's members) and the
// workers' side (run_owner_slot_job) - and parallel_for's questions to the
// pool (nothing_left_to_steal, taken_back_of). The worker loop that calls
// these is in pool_core.cpp.
#include "pool_core.hpp"
#include "thread_system/detail/chaos.hpp"

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <thread>

#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/spin.hpp"

// The concrete injectors, so that their final overrides are visible here.
#include "injectors.hpp"

namespace thread_system::detail {

namespace {

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

}  // namespace

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

bool pool_core::nothing_left_to_steal_from_caller() const noexcept {
  if (const worker_context* c = context_of(this)) {
    const pool_worker& w = *c->worker;
    // relaxed: a hint; the slot is stealable too.
    return w.deque_.empty_approx() && w.lifo_slot_.load(std::memory_order_relaxed) == 0;
  }
  return queue_->empty_approx();
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
