// adaptive_job_queue: a job queue that holds a mutex-strategy queue
// (job_queue, a spin-locked growable ring) and a lock-free queue
// (lockfree_queue, Michael-Scott) and routes every operation to one of them,
// switching between the two according to the contention it measures.
//
// Strategies (fixed at construction):
//   * FORCE_MUTEX / FORCE_LOCKFREE: always that queue; never switches.
//   * ADAPTIVE: starts on the mutex queue. Every operation counts itself in
//     `in_flight_`; an operation that starts while another operation of this
//     queue is still in flight is a *contention event* (the situation in
//     which a lock would be found held or a CAS would be retried). The
//     measure is taken here rather than inside job_queue / lockfree_queue so
//     that both sides are measured the same way and neither queue needs a
//     hook. Every `policy.window` operations, the thread whose operation
//     closes the window computes events / window: at or above
//     `to_lockfree_threshold` it switches to the lock-free queue; at or
//     below `to_mutex_threshold` it switches back to the mutex queue.
//
// Switching without losing jobs or reordering a producer (the state word
// holds a generation whose parity names the *active* queue; the other queue
// is the *previous* one, plus a `drained` bit and a `pending` bit):
//   * A push counts itself in `pushers_[i]` of the active queue i, re-reads
//     the state and retries if i is no longer active, then pushes into i.
//     So once the active queue has changed and `pushers_[previous]` has been
//     seen at zero, no push can land in the previous queue any more.
//   * A pop takes from the previous queue while it is not `drained`. When it
//     finds the previous queue empty after having seen `pushers_[previous]`
//     at zero, the previous queue is empty for good and the pop sets
//     `drained`. Only then do pops take from the active queue. A producer's
//     jobs in the previous queue were all pushed before its jobs in the
//     active queue, so each producer's jobs are popped in push order.
//   * A pop counts itself in `poppers_[i]` of the queue it takes from and
//     re-validates the state before taking. A switch is allowed only when
//     the previous queue is drained; it first sets `pending` (which fails
//     every such re-validation that started earlier), then checks that
//     `poppers_[target]` is zero - no pop that decided under an older state
//     is still taking from the queue about to become active - and only then
//     publishes the next generation (otherwise it clears `pending` and gives
//     up until a later window). So a stale pop never takes a new job from
//     the newly active queue while the old one still holds older jobs.
//   * All of these counters and the state word use seq_cst operations: the
//     arguments above are store-then-load (Dekker) patterns between a
//     counter and the state word, which acquire/release alone do not order.
//
// Contract:
//   * Any number of threads may call any member concurrently.
//   * FIFO per producer, also across switches: jobs pushed by one thread
//     are popped in the order that thread pushed them. Jobs of different
//     producers have no mutual order.
//   * A successful push happens-before the pop that returns its job (the
//     underlying queue orders them).
//   * push_batch goes into one queue: all or none.
//   * While the previous queue has not been declared drained and a push
//     into it is still in flight (a producer that read the state just before
//     a switch), a pop on an open queue may return false although the active
//     queue holds jobs, exactly as bounded_queue may while a producer writes
//     its cell. On a closed queue the pop instead waits (yielding) for that
//     push to finish, so once is_closed() has returned true, a pop that
//     returns false proves the queue is empty for good.
//   * close() closes both queues, then sets the closed flag: after it
//     returns every push fails with `pool_stopped`; pops drain both queues.
//   * size_approx() adds the two queues' approximate sizes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"
#include "thread_system/queues/queue_concept.hpp"

namespace thread_system {

/// How an adaptive_job_queue chooses its queue (seed names).
/// current_strategy() reports the queue in use as FORCE_MUTEX or
/// FORCE_LOCKFREE.
enum class queue_strategy { ADAPTIVE, FORCE_MUTEX, FORCE_LOCKFREE };

/// When ADAPTIVE switches. Contention ratio = contention events / window.
struct adaptive_policy {
  /// Operations per measurement window (at least 1).
  std::size_t window = 4096;
  /// Switch from the mutex queue to the lock-free one at or above this ratio.
  double to_lockfree_threshold = 0.25;
  /// Switch from the lock-free queue back to the mutex one at or below this ratio.
  double to_mutex_threshold = 0.02;
};

/// A snapshot of an adaptive_job_queue's counters (relaxed reads, so the
/// fields may be from slightly different moments).
struct adaptive_queue_statistics {
  queue_strategy current_strategy = queue_strategy::FORCE_MUTEX;  ///< FORCE_MUTEX or FORCE_LOCKFREE: the queue in use.
  std::uint64_t switches = 0;                                     ///< Completed switches.
  std::uint64_t operations = 0;         ///< Pushes and pops (batches count once), including failed ones.
  std::uint64_t contention_events = 0;  ///< Operations that started while another was in flight.
};

class adaptive_job_queue {
 public:
  using queue_strategy = thread_system::queue_strategy;

  explicit adaptive_job_queue(queue_strategy strategy = queue_strategy::ADAPTIVE, adaptive_policy policy = {})
      : strategy_(strategy), policy_(policy) {
    if (policy_.window == 0) policy_.window = 1;
    // Generation parity names the active queue: even = mutex, odd = lock-free.
    // The previous queue starts drained (nothing was ever pushed into it).
    const std::uint64_t generation = strategy == queue_strategy::FORCE_LOCKFREE ? 1 : 0;
    state_.store(generation << generation_shift | drained_bit,
                 std::memory_order_relaxed);  // before the queue is shared
  }

  adaptive_job_queue(const adaptive_job_queue&) = delete;
  adaptive_job_queue& operator=(const adaptive_job_queue&) = delete;

  /// Appends `job` to the active queue. Fails with `invalid_argument` (empty
  /// job), `pool_stopped` (closed) or `resource_exhausted` (the lock-free
  /// queue could not allocate); on failure `job` is not moved from.
  [[nodiscard]] result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "adaptive_job_queue: empty job");
    const bool contended = begin_operation();
    auto pushed = push_routed([&job](auto& queue) { return queue.try_push(std::move(job)); });
    end_operation(contended);
    return pushed;
  }

  /// Appends every job of `jobs` to the active queue, all or none.
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& job : jobs) {
      if (!job) return make_error(error_code::invalid_argument, "adaptive_job_queue: empty job in batch");
    }
    const bool contended = begin_operation();
    auto pushed = push_routed([jobs](auto& queue) { return queue.push_batch(jobs); });
    end_operation(contended);
    return pushed;
  }

  /// Moves the oldest available job into `out`; false when empty (see the
  /// contract for the one case of a spurious false).
  [[nodiscard]] bool try_pop(job_function& out) {
    job_function* destination = &out;
    return pop_batch(std::span<job_function>(destination, 1)) == 1;
  }

  /// Moves up to `out.size()` jobs into `out` (the previous queue's first);
  /// returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) {
    if (out.empty()) return 0;
    const bool contended = begin_operation();
    const std::size_t taken = pop_routed(out);
    end_operation(contended);
    return taken;
  }

  /// Refuses further pushes on both queues. Idempotent; queued jobs stay poppable.
  void close() {
    mutex_queue_.close();
    lockfree_queue_.close();
    // release: a thread that sees the flag (acquire in is_closed()) sees both
    // queues closed; pairs with is_closed() and the load in pop_routed().
    closed_.store(true, std::memory_order_release);
  }

  [[nodiscard]] bool is_closed() const noexcept {
    return closed_.load(std::memory_order_acquire);  // pairs with the release in close()
  }

  /// Number of queued jobs in both queues; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    return mutex_queue_.size_approx() + lockfree_queue_.size_approx();
  }
  [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }

  /// The strategy chosen at construction.
  [[nodiscard]] queue_strategy requested_strategy() const noexcept { return strategy_; }

  /// The queue new pushes go to: FORCE_MUTEX or FORCE_LOCKFREE.
  [[nodiscard]] queue_strategy current_strategy() const noexcept {
    // relaxed: a snapshot for reporting; nothing is read through it.
    return strategy_of(active_index(state_.load(std::memory_order_relaxed)));
  }

  [[nodiscard]] adaptive_queue_statistics get_statistics() const noexcept {
    adaptive_queue_statistics statistics;
    statistics.current_strategy = current_strategy();
    // relaxed: statistics only.
    statistics.switches = switches_.load(std::memory_order_relaxed);
    statistics.operations = operations_.load(std::memory_order_relaxed);
    statistics.contention_events = contention_events_.load(std::memory_order_relaxed);
    return statistics;
  }

  /// Test hook (ADAPTIVE only): switches to the other queue now if the
  /// switch protocol allows it (the previous queue is drained and no stale
  /// pop is taking from the target). Returns whether it switched.
  bool force_switch_for_testing() {
    if (strategy_ != queue_strategy::ADAPTIVE) return false;
    // seq_cst: see try_switch().
    const std::uint64_t state = state_.load(std::memory_order_seq_cst);
    return try_switch(1 - active_index(state));
  }

 private:
  static constexpr std::uint64_t drained_bit = 1;
  static constexpr std::uint64_t pending_bit = 2;
  static constexpr unsigned generation_shift = 2;
  static constexpr std::size_t mutex_index = 0;
  static constexpr std::size_t lockfree_index = 1;

  static std::size_t active_index(std::uint64_t state) noexcept {
    return static_cast<std::size_t>((state >> generation_shift) & 1U);
  }
  static std::size_t previous_index(std::uint64_t state) noexcept { return 1 - active_index(state); }
  static bool is_drained(std::uint64_t state) noexcept { return (state & drained_bit) != 0; }
  static queue_strategy strategy_of(std::size_t index) noexcept {
    return index == mutex_index ? queue_strategy::FORCE_MUTEX : queue_strategy::FORCE_LOCKFREE;
  }

  template <typename Operation>
  auto on_queue(std::size_t index, Operation&& operation) {
    if (index == mutex_index) return operation(mutex_queue_);
    return operation(lockfree_queue_);
  }

  template <typename Operation>
  result<void> push_routed(Operation&& operation) {
    for (;;) {
      // seq_cst (this load, the increment and the re-read): the pusher's
      // half of the Dekker pattern with a pop's seq_cst load of pushers_
      // after a switch (see the header comment).
      const std::size_t index = active_index(state_.load(std::memory_order_seq_cst));
      pushers_[index].value.fetch_add(1, std::memory_order_seq_cst);
      if (active_index(state_.load(std::memory_order_seq_cst)) != index) {
        // release: pairs with the seq_cst load in pop_routed(); we pushed nothing.
        pushers_[index].value.fetch_sub(1, std::memory_order_release);
        continue;
      }
      result<void> pushed = on_queue(index, operation);
      // release: our push happens-before a pop that reads the decremented
      // count (seq_cst load in pop_routed()) and then finds the queue empty.
      pushers_[index].value.fetch_sub(1, std::memory_order_release);
      return pushed;
    }
  }

  std::size_t pop_routed(std::span<job_function> out) {
    std::size_t taken = 0;
    for (;;) {
      // seq_cst: ordered with switches (try_switch) and with the pushers_
      // counters (Dekker pattern, see the header comment).
      std::uint64_t state = state_.load(std::memory_order_seq_cst);
      const bool drained = is_drained(state);
      const std::size_t index = drained ? active_index(state) : previous_index(state);
      // seq_cst: a switch that later checks poppers_[index] sees us (pairs
      // with the seq_cst load in try_switch()).
      poppers_[index].value.fetch_add(1, std::memory_order_seq_cst);
      if (state_.load(std::memory_order_seq_cst) != state) {  // re-validate after announcing ourselves
        // release: pairs with the seq_cst load in try_switch(); we took nothing.
        poppers_[index].value.fetch_sub(1, std::memory_order_release);
        continue;
      }
      if (drained) {
        taken += on_queue(index, [rest = out.subspan(taken)](auto& queue) { return queue.pop_batch(rest); });
        // release: our pop happens-before a switch that reads the decremented
        // count (seq_cst load in try_switch()).
        poppers_[index].value.fetch_sub(1, std::memory_order_release);
        return taken;
      }
      // Previous queue, not yet drained. Read its pushers before trying it:
      // zero here (after the switch, see above) means nothing more can land
      // in it, so finding it empty afterwards means empty for good.
      const bool quiet = pushers_[index].value.load(std::memory_order_seq_cst) == 0;  // pairs with push_routed()
      taken += on_queue(index, [rest = out.subspan(taken)](auto& queue) { return queue.pop_batch(rest); });
      const bool found_empty = taken < out.size();
      if (found_empty && quiet) {
        // seq_cst: ordered with the state loads of pushes, pops and switches.
        // Failure means another pop set the bit first (nothing else can
        // change the state while the previous queue is not drained).
        (void)state_.compare_exchange_strong(state, state | drained_bit, std::memory_order_seq_cst,
                                             std::memory_order_seq_cst);
      }
      poppers_[index].value.fetch_sub(1, std::memory_order_release);  // pairs with try_switch()
      if (!found_empty) return taken;
      if (quiet) continue;  // drained now: go on with the active queue
      if (taken > 0) return taken;
      // A push into the previous queue is in flight: report empty on an open
      // queue; wait for it on a closed one (see the contract).
      if (!closed_.load(std::memory_order_acquire)) return 0;  // pairs with close()
      std::this_thread::yield();
    }
  }

  // Switches the active queue to `target`; see the header comment.
  bool try_switch(std::size_t target) {
    // seq_cst throughout: the switch's half of the Dekker patterns with the
    // poppers_ counters and the pushes' state loads.
    std::uint64_t state = state_.load(std::memory_order_seq_cst);
    if (active_index(state) == target || !is_drained(state) || (state & pending_bit) != 0) return false;
    if (!state_.compare_exchange_strong(state, state | pending_bit, std::memory_order_seq_cst,
                                        std::memory_order_seq_cst)) {
      return false;
    }
    // pending is set: every pop that re-validates from now on retries, so a
    // pop still counted here decided under an older state.
    if (poppers_[target].value.load(std::memory_order_seq_cst) != 0) {  // pairs with pop_routed()
      state_.store(state, std::memory_order_seq_cst);                   // give up: clear pending
      return false;
    }
    const std::uint64_t next_generation = (state >> generation_shift) + 1;
    // The old active queue becomes the previous one, not drained.
    state_.store(next_generation << generation_shift, std::memory_order_seq_cst);
    switches_.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return true;
  }

  bool begin_operation() noexcept {
    if (strategy_ != queue_strategy::ADAPTIVE) {
      operations_.fetch_add(1, std::memory_order_relaxed);  // statistics only
      return false;
    }
    // relaxed: a heuristic count; no data is published through it.
    return in_flight_.fetch_add(1, std::memory_order_relaxed) != 0;
  }

  void end_operation(bool contended) {
    if (strategy_ != queue_strategy::ADAPTIVE) return;
    // relaxed (all counters below): heuristics and statistics; the switch
    // itself is ordered by try_switch().
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    if (contended) contention_events_.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t operations = operations_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (operations % policy_.window != 0) return;
    const std::uint64_t events = contention_events_.load(std::memory_order_relaxed);
    const std::uint64_t window_start = window_start_events_.exchange(events, std::memory_order_relaxed);
    const double ratio =
        static_cast<double>(events > window_start ? events - window_start : 0) / static_cast<double>(policy_.window);
    // relaxed: a snapshot; try_switch() re-reads the state with seq_cst.
    const std::size_t active = active_index(state_.load(std::memory_order_relaxed));
    if (active == mutex_index && ratio >= policy_.to_lockfree_threshold) {
      (void)try_switch(lockfree_index);
    } else if (active == lockfree_index && ratio <= policy_.to_mutex_threshold) {
      (void)try_switch(mutex_index);
    }
  }

  struct alignas(64) padded_counter {
    std::atomic<std::size_t> value{0};
  };

  const queue_strategy strategy_;
  adaptive_policy policy_;
  job_queue mutex_queue_;
  lockfree_queue lockfree_queue_;
  alignas(64) std::atomic<std::uint64_t> state_{0};
  padded_counter pushers_[2];
  padded_counter poppers_[2];
  alignas(64) std::atomic<std::size_t> in_flight_{0};
  std::atomic<std::uint64_t> operations_{0};
  std::atomic<std::uint64_t> contention_events_{0};
  std::atomic<std::uint64_t> window_start_events_{0};
  std::atomic<std::uint64_t> switches_{0};
  alignas(64) std::atomic<bool> closed_{false};
};

static_assert(job_queue_model<adaptive_job_queue>);

}  // namespace thread_system
