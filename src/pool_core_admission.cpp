// What a job passes before it enters the pool's queue: backpressure (room,
// blocking, caller_runs, drop_oldest). The pushes into the queues are in
// pool_core_push.cpp, the worker loop in pool_core.cpp.
#include "pool_core.hpp"

#include <algorithm>
#include <chrono>

#include "thread_system/detail/duration.hpp"

namespace thread_system::detail {

bool pool_core::try_reserve(std::size_t n) noexcept {
  // relaxed: the count orders nothing else; room is a number, not a hand-over.
  std::size_t cur = queued_external_.load(std::memory_order_relaxed);
  do {
    if (cur + n > bounds_.capacity) return false;
  } while (!queued_external_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
  return true;
}

void pool_core::release_room(std::size_t n) noexcept {
  // seq_cst: Dekker with a blocked producer, whose prepare_wait() fence is
  // followed by its own try_reserve(): either it sees the room, or the
  // notify below sees it waiting.
  queued_external_.fetch_sub(n, std::memory_order_seq_cst);
  const auto p = bounds_.on_full;
  if (p == backpressure::policy::drop_oldest) {
    // A drop_oldest producer waits only while every unit of room is held
    // by jobs workers have in hand (see acquire_room()): each start wakes
    // them all to look again (the fence and a load when none waits).
    room_available_.notify_all();
    return;
  }
  if (p == backpressure::policy::block || p == backpressure::policy::block_for) {
    if (n != 1) {
      room_available_.notify_all();
      return;
    }
    room_available_.notify_one();
    // The one woken may be a batch's producer that needs more than this
    // slot and sleeps again, while a single job's producer could have used
    // it: with batches waiting, every waiter looks. seq_cst fence: a batch
    // producer's increment (seq_cst, in acquire_room()) that this load
    // misses comes after the fence, so its prepare_wait() reads the epoch
    // notify_one() advanced, and it was not the one that notify_one() woke.
    detail::seq_cst_fence();
    if (multi_slot_waiters_.load(std::memory_order_relaxed) != 0) room_available_.notify_all();
  }
}

pool_core::dropped pool_core::drop_oldest_queued() {
  const failure_sink_scope sink(as_failure_sink());
  // Counted before the victim leaves the queue, so that a stop() whose
  // workers have drained everything else still finds it under way and
  // waits (settle_stop()): its report then counts it. seq_cst: before the
  // pop's own ordering; acq_rel at the end: the decrement publishes dropped_.
  struct in_flight {
    std::atomic<std::uint32_t>& count;
    explicit in_flight(std::atomic<std::uint32_t>& c) noexcept : count(c) {
      count.fetch_add(1, std::memory_order_seq_cst);
    }
    in_flight(const in_flight&) = delete;
    in_flight& operator=(const in_flight&) = delete;
    ~in_flight() {
      if (count.fetch_sub(1, std::memory_order_acq_rel) == 1) count.notify_all();  // pairs with settle_stop()'s wait
    }
  } counted(drops_in_flight_);
  std::array<job_function, 1> oldest;
  if (queue_->pop_victim(oldest) == 0 && !take_from_a_deque(oldest[0])) return dropped::none;
  const std::uint8_t tag = oldest[0].tag();
  // Its room is free as it leaves the queue - before its own code runs, so
  // that code may submit to this pool (it finds the room) without waiting
  // for itself.
  const bool held_room = (tag & bounded_tag) != 0;
  if (held_room) release_room(1);
  queue_->note_cancelled(tag);
  {
    // Its cancel hook and destructor: wait_idle() and stop() are refused
    // there (it is not finished yet; see discard_scope).
    const discard_scope discarding(this);
    oldest[0].cancel("job dropped by backpressure::drop_oldest to make room");
    oldest[0].reset();
  }
  // release: pairs with the acquire in idle_now(); the victim counts as
  // finished once its own code has run.
  dropped_.fetch_add(1, std::memory_order_release);
  return held_room ? dropped::room : dropped::no_room;
}

bool pool_core::take_from_a_deque(job_function& out) noexcept {
  // The deques are Chase-Lev deques: any thread may take from their FIFO
  // end as a thief does - here only a job the worker took from the pool's
  // queue (the rest of a batch; its newest), never one a job spawned there
  // (a worker's submissions are not bounded, and so never dropped; they sit
  // below the batch, which the worker took while its deque was empty).
  // Workers stay in the steal table for the core's life.
  auto take_from = [&](pool_worker& w) -> steal_status {
    auto r = w.deque_.steal_from_queue();
    if (!r) return r.status;
    out = std::move(r.value->fn);
    node_pool_.give_back(r.value);  // this thread has no node cache
    return steal_status::success;
  };
  const std::size_t n = published_.load(std::memory_order_acquire);  // pairs with start_worker()
  if (!local_deques_) {
    // Typed pools: the deque of the lowest-priority kind (highest rank)
    // first, as pop_victim() picks in the queue - by each worker's hint,
    // so a deque refilled meanwhile may be passed over once.
    pool_worker* lowest = nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      pool_worker* w = steal_table_[i].load(std::memory_order_relaxed);  // fixed once published
      if (w->deque_.empty_approx()) continue;
      // relaxed: a hint (pool_worker::deque_rank_).
      if (lowest == nullptr ||
          w->deque_rank_.load(std::memory_order_relaxed) > lowest->deque_rank_.load(std::memory_order_relaxed)) {
        lowest = w;
      }
    }
    if (lowest != nullptr && take_from(*lowest) == steal_status::success) return true;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool lost_any = false;
    for (std::size_t i = 0; i < n; ++i) {
      const steal_status taken = take_from(*steal_table_[i].load(std::memory_order_relaxed));  // fixed once published
      if (taken == steal_status::success) return true;
      lost_any |= taken == steal_status::lost_race;
    }
    if (!lost_any) break;  // nothing left to take
  }
  return false;
}

void pool_core::run_on_caller(job_function& fn) {
  const auto tag = static_cast<std::uint8_t>(fn.tag() & ~bounded_tag);  // read before the run resets the job
  const job_outcome outcome = run_guarded(fn);
  if (tag != 0) queue_->note_ran_on_caller(tag, outcome);  // a typed injector counts it per kind
  if (outcome == job_outcome::cancelled) {
    caller_cancelled_.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return;
  }
  if (outcome == job_outcome::failed_reported) caller_failed_.fetch_add(1, std::memory_order_relaxed);  // statistics
  caller_ran_.fetch_add(1, std::memory_order_relaxed);  // statistics only
}

result<void> pool_core::acquire_room(std::span<job_function> fns, bool& ran_inline, std::size_t& without_room,
                                     admission how) {
  const std::size_t n = fns.size();
  if (n > bounds_.capacity) {
    return make_error_nothrow(error_code::invalid_argument, [&] {
      return named() + ": a batch of " + std::to_string(n) + " jobs can never fit the capacity of " +
             std::to_string(bounds_.capacity);
    });
  }
  // (Never a worker of this pool: its submissions are not bounded, see push_external().)
  // A fork-join piece (admission::try_only) is refused rather than waited
  // for, evicted for or run here: its caller runs it itself (see admission).
  const auto policy = how == admission::try_only ? backpressure::policy::reject : bounds_.on_full;
  // Saturating: block_for(n, nanoseconds::max()) waits without a deadline.
  const auto deadline = detail::saturating_add(std::chrono::steady_clock::now(), bounds_.timeout);
  auto stopped = [this] {
    // seq_cst: Dekker with begin_stop() (store, then notify), as with the
    // state below; the check follows prepare_wait() on the blocking path.
    return stop_requested_.load(std::memory_order_seq_cst) || stop_begun();
  };
  // drop_oldest: jobs of `fns` that take the places of dropped jobs that
  // held no room (a worker's submissions) - one job dropped per job queued.
  std::size_t in_dropped_places = 0;
  // drop_oldest's waits with nothing to drop (see there): how long before
  // looking for a victim again, doubling up to a bound.
  constexpr std::chrono::microseconds max_relook{10'000};
  std::chrono::microseconds relook{100};
  for (;;) {
    if (in_dropped_places == n || try_reserve(n - in_dropped_places)) {
      without_room = in_dropped_places;
      return {};
    }
    if (stopped()) return stopped_error();
    switch (policy) {
      case backpressure::policy::reject:
        return make_error_nothrow(error_code::queue_full, [&] {
          return named() + ": queue is full (capacity " + std::to_string(bounds_.capacity) + ")";
        });
      case backpressure::policy::caller_runs:
        // A typed injector counts these runs per kind: a kind used for the
        // first time gets its counters first (or nothing runs).
        try {
          for (const auto& fn : fns) {
            const auto tag = static_cast<std::uint8_t>(fn.tag() & ~bounded_tag);
            if (tag != 0 && !queue_->prepare_caller_run(tag)) return stopped_error();
          }
        } catch (const std::bad_alloc&) {
          return detail::out_of_memory_error();
        }
        if (!run_on_caller_counted(fns)) return stopped_error();
        ran_inline = true;
        return {};
      case backpressure::policy::drop_oldest:
        switch (drop_oldest_queued()) {
          case dropped::none: {
            // Nothing queued and nothing a worker took from the queue on its
            // deque: every unit of room is held by a job a worker has in
            // hand - on its way to starting, or held while the pool is
            // paused (at most one per worker) - or by a job in transit (a
            // producer between its room and its push; a worker between its
            // pop and its deque). Wait for a start (release_room() wakes
            // this thread) or for stop(), and look again now and then for a
            // victim that appeared meanwhile: such a job, or one that holds
            // no room (a typed pool's worker's submission). (Room may also
            // have freed between the look above and prepare_wait(): checked
            // before sleeping.)
            const auto key = room_available_.prepare_wait();
            if (try_reserve(n - in_dropped_places)) {
              room_available_.cancel_wait();
              without_room = in_dropped_places;
              return {};
            }
            if (stopped()) {
              room_available_.cancel_wait();
              return stopped_error();
            }
            (void)room_available_.commit_wait_until(key, std::chrono::steady_clock::now() + relook);
            relook = std::min(2 * relook, max_relook);
            break;
          }
          case dropped::no_room:
            ++in_dropped_places;  // one of `fns` takes its place, without room
            break;
          case dropped::room:
            break;
        }
        continue;
      case backpressure::policy::block:
      case backpressure::policy::block_for: {
        // A batch's producer counts itself while it may sleep (see
        // release_room()); seq_cst: ordered against release_room()'s fence.
        struct counted_while_waiting {
          std::atomic<std::size_t>* count;
          explicit counted_while_waiting(std::atomic<std::size_t>* c) noexcept : count(c) {
            if (count != nullptr) count->fetch_add(1, std::memory_order_seq_cst);
          }
          counted_while_waiting(const counted_while_waiting&) = delete;
          counted_while_waiting& operator=(const counted_while_waiting&) = delete;
          ~counted_while_waiting() {
            if (count != nullptr) count->fetch_sub(1, std::memory_order_relaxed);  // a stale count only wakes more
          }
        } counted(n > 1 ? &multi_slot_waiters_ : nullptr);
        const auto key = room_available_.prepare_wait();
        if (try_reserve(n)) {
          room_available_.cancel_wait();
          return {};
        }
        if (stopped()) {
          room_available_.cancel_wait();
          return stopped_error();
        }
        if (policy == backpressure::policy::block) {
          room_available_.commit_wait(key);
        } else if (!room_available_.commit_wait_until(key, deadline)) {
          if (try_reserve(n)) return {};
          return make_error_nothrow(error_code::timeout,
                                    [&] { return named() + ": no room within the block_for timeout"; });
        }
        break;
      }
    }
  }
}

void pool_core::begin_stop(stop_mode mode) noexcept {
  stop_requested_.store(true, std::memory_order_seq_cst);  // pairs with acquire_room()'s stopped()
  room_available_.notify_all();
  // A paused pool resumes now rather than in close_for_stop() (see the
  // declaration). acquire: pairs with pause()/resume(), as is_paused(); a
  // pause() after this look is undone by close_for_stop() as before.
  if (!paused_.load(std::memory_order_acquire)) return;
  if (mode == stop_mode::cancel_pending) {
    // release: pairs with the acquire in execute(), as in close_for_stop():
    // before the resume, so a worker holding a job for the paused pool
    // cancels it rather than runs it.
    cancel_requested_.store(true, std::memory_order_release);
  }
  resume();
}

unexpected_error pool_core::refusal(const error& queue_error) const {
  if (queue_error.code() == error_code::pool_stopped) {
    return stopped_error();
  }
  return make_error_nothrow(queue_error.code(), [&] { return named() + ": " + queue_error.message(); });
}

}  // namespace thread_system::detail
