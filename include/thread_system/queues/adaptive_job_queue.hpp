// adaptive_job_queue: a job queue that holds a mutex-strategy queue
// (spin-locked segments) and a lock-free queue (lockfree_queue,
// fetch-and-add segments) and routes every operation to one of them,
// switching between the two according to what it measures.
//
// Two mutex sides, one template (basic_adaptive_job_queue<MutexQueue>):
//   * adaptive_job_queue: over job_queue, one lock for both ends. The
//     stand-alone queue: where producers and consumers move one job at a
//     time with nothing between, one lock moves the most jobs.
//   * two_lock_adaptive_job_queue: over two_lock_job_queue, a lock for each
//     end, so a producer never waits for a consumer. The pools' adaptive
//     injector (pool_queue::adaptive) and the typed pool's adaptive
//     per-type queue, whose workers take jobs in shares. Since producers
//     and consumers never meet at a lock, its contention ratio counts only
//     producers meeting producers and consumers meeting consumers, and it
//     switches to the lock-free queue later than the one-lock queue would.
//
// Strategies (fixed at construction):
//   * FORCE_MUTEX / FORCE_LOCKFREE: always that queue; never switches.
//   * ADAPTIVE: starts on the mutex queue and measures, per window of
//     `policy.window` jobs moved (pushed or popped), the contention of the
//     queue in use - the mutex queue's lock found held at the first attempt,
//     the lock-free queue's contention events (lockfree_queue::cas_retries())
//     - and the wall time per job moved.
//       - On the mutex queue, a contention ratio (events / jobs) at or above
//         `to_lockfree_threshold` switches to the lock-free queue.
//       - On the lock-free queue, a ratio at or below `to_mutex_threshold`
//         switches back.
//       - With `keep_faster` (the default), the lock-free queue is on
//         probation after a switch: it is measured over a quarter window,
//         and unless it moved jobs at least 10% faster than the mutex queue
//         did in its best window since the last switch, the queue switches
//         back and waits 8, 16, 32 ... (at most 4096) windows before it
//         tries again. Contention alone does not
//         prove the lock-free queue faster: on a machine with few cores a
//         spin lock held for a few nanoseconds often wins, and this keeps
//         ADAPTIVE close to the better of the two instead of the worse.
//     Throughput, not the latency of single operations, is compared: with
//     more threads than cores a spin lock's rare long waits (a preempted
//     holder) dominate a mean latency, while the lock still moves far more
//     jobs per second. The measurements add no shared read-modify-write to
//     an operation: the mutex queue counts contended operations itself (on
//     its lock's cache line; on a two-lock side on a line of their own,
//     which only contended operations write), the lock-free queue counts
//     contention in per-record counters it keeps anyway, and a window is
//     evaluated by one thread (steady_clock once).
//     Who looks at the window: on the mutex queue, every 64th operation
//     that found its lock held (out of line, holding that lock); an
//     uncontended operation never looks, since a window without contention
//     has a ratio of 0 and asks for no switch. (So a threshold of 0 means
//     "at the first contention", not "always".) On the lock-free queue,
//     every 256th job a thread moves.
//
// Switching without losing jobs or reordering a producer. The state word
// holds a generation whose parity names the *active* queue (pushes go
// there); the other one is the *previous* queue, with a `drained` bit. Pops
// take from the previous queue until it is drained, then from the active
// one. Nothing on the fast path is a shared read-modify-write:
//   * Mutex queue: every push and pop re-reads the state inside the queue's
//     critical section (the fast paths read its copy in the mutex queue's
//     refusals, on the line of the lock they hold, refreshed under the
//     locks concerned after every change of the state) and goes elsewhere
//     if it may not use it (a push needs it active; a pop needs it active
//     with the other queue drained, or previous and not drained). A switch
//     holds every lock of the mutex queue (its one lock, or the tail lock
//     then the head lock), so no mutex-queue operation acts on an outdated
//     state. A pop that finds the previous mutex queue empty marks it
//     drained holding its pop lock: no push can enter it any more (pushes
//     need it active, and making it previous took the push lock too).
//     With two locks an empty poll on the fast path takes no lock: it reads
//     the count (acquire) and then the state again, and reports empty only
//     if the state is still the one it started from (states only move
//     forward), a moment at which both queues were empty.
//   * Lock-free queue: a switch away from it *seals* it (a flag on its last
//     segment and a sentinel after it; every index handed out before is
//     resolved, see lockfree_queue.hpp), so a late push fails and retries on
//     the new active queue, and a pop that finds it empty and sealed knows it is
//     empty until it is unsealed. A pop announces itself by holding its
//     hazard record (a seq_cst exchange it performs anyway) and only then
//     reads the state; a switch *to* the lock-free queue (which unseals it,
//     letting pops take new jobs from it while older ones may still wait in
//     the mutex queue) is made only when no operation holds a record after
//     the switch read the state (seq_cst on both sides: either the switch
//     sees the pop, or the pop sees the new state). The first switch to it
//     makes it, open: no operation can have read a state naming it before.
//     So a pop that decided under an older state never takes a newer job from the lock-free queue
//     while older ones of the same producer wait in the mutex queue. A pop
//     that ends at the seal of the previous lock-free queue marks it drained
//     while it still holds its record, which keeps the queue sealed.
//   * Switches are made by one thread at a time, holding every lock of the
//     mutex queue. A contended operation that looks at the window holds its
//     own end's lock; with two locks it only tries the other one (never
//     waits: no lock-order cycle), and if that is held the switch waits for
//     a later window.
//
// Cost on the mutex queue: a push or pop runs the mutex queue's own code
// (push_admitted / pop_admitted), inlined into try_push / try_pop, plus one
// read of the state word before taking the lock (so that in lock-free mode
// no operation touches the lock). Inside the critical section the state is
// read from the mutex queue's refusals byte, a copy kept on the lock's
// cache line (see refresh_refusals_locked()): a push checks it exactly as
// the queue checks its closed flag, a pop tests one more bit. An
// uncontended operation does no measuring. Everything else (a window to
// evaluate, a switch, the lock-free queue, errors) is out of line.
//
// Contract:
//   * Any number of threads may call any member concurrently.
//   * FIFO per producer, also across switches: jobs pushed by one thread
//     are popped in the order that thread pushed them. Jobs of different
//     producers have no mutual order.
//   * A successful push happens-before the pop that returns its job (the
//     underlying queue orders them).
//   * try_push(job, was_empty) is exact on both mutex sides (see there).
//   * push_batch goes into one queue: all or none.
//   * Out of memory: a pop (try_pop, pop_batch, pop_share) whose thread
//     needs a hazard record for the lock-free queue and cannot allocate one
//     throws std::bad_alloc having taken nothing, as lockfree_queue's pops
//     do; one that already took jobs from the drained mutex queue returns
//     those instead. Pushes refuse with `resource_exhausted` (see push_*).
//   * A pop returns false only after finding the queue it may take from
//     empty. Once is_closed() has returned true no switch happens any more,
//     and a pop that returns false proves the queue is empty for good.
//   * close() closes both queues (the lock-free one if it was ever made),
//     then sets the closed flag: after it returns every push fails with
//     `pool_stopped`; pops drain both queues.
//   * size_approx() adds the two queues' approximate sizes.
//   * The lock-free queue is allocated at the first switch to it (with
//     FORCE_LOCKFREE, at construction): a queue that never switches
//     allocates its mutex queue only (no lock-free segment of 5312 bytes, no
//     hazard record). A switch that cannot allocate it is not made; the
//     queue stays where it is and loses nothing.
//   * accepted_pushes() adds the two queues' acceptance counts (each counted
//     before its job can be popped); final after close() and
//     wait_for_pushes().
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"
#include "thread_system/queues/queue_concept.hpp"
#include "thread_system/queues/queue_kind.hpp"
#include "thread_system/queues/two_lock_job_queue.hpp"

namespace thread_system {

/// When ADAPTIVE switches (see the header comment).
struct adaptive_policy {
  /// Jobs moved (pushed or popped) per measurement window (at least 1).
  /// On the mutex queue a window is looked at only by an operation that
  /// found its lock held, so a window may span more jobs than this.
  std::size_t window = 4096;
  /// Switch from the mutex queue to the lock-free one at or above this
  /// contention ratio (contention events per job moved). Only windows with
  /// contention are looked at: a queue that never meets its lock held never
  /// switches, even with a threshold of 0. On a two-lock mutex side
  /// (two_lock_adaptive_job_queue) only producers meeting producers and
  /// consumers meeting consumers count, so the ratio is far lower than on a
  /// one-lock side for the same load (see the header comment).
  double to_lockfree_threshold = 0.25;
  /// Switch from the lock-free queue back to the mutex one at or below this ratio.
  double to_mutex_threshold = 0.02;
  /// Keep the lock-free queue only if it proves faster than the mutex queue
  /// (jobs moved per second over a window); otherwise switch back
  /// and wait an exponentially growing number of windows before trying again.
  bool keep_faster = true;
};

/// A snapshot of an adaptive_job_queue's counters (relaxed reads, so the
/// fields may be from slightly different moments).
struct adaptive_queue_statistics {
  queue_strategy current_strategy = queue_strategy::FORCE_MUTEX;  ///< FORCE_MUTEX or FORCE_LOCKFREE: the queue in use.
  std::uint64_t switches = 0;                                     ///< Completed switches.
  std::uint64_t operations = 0;  ///< Jobs moved: jobs pushed plus jobs popped, over both queues.
  std::uint64_t contention_events =
      0;                              ///< Mutex queue: lock found held; lock-free queue: lockfree_queue::cas_retries().
  std::uint64_t probes_rejected = 0;  ///< Switches to the lock-free queue undone because it was slower.
};

/// A job queue that routes every operation to a mutex queue (`MutexQueue`: job_queue or two_lock_job_queue) or a
/// lock-free queue, switching between them by measured contention and throughput; FIFO per producer (see the header
/// comment). Use the aliases adaptive_job_queue and two_lock_adaptive_job_queue.
template <typename MutexQueue>
class basic_adaptive_job_queue {
  using push_outcome = typename MutexQueue::push_outcome;
  using queue_end = typename MutexQueue::queue_end;
  friend struct adaptive_job_queue_test_access;  // white-box tests: a window's decision with chosen measurements

 public:
  /// The seed's name for thread_system::queue_strategy (= pool_queue).
  using queue_strategy = thread_system::queue_strategy;

  /// A queue using `strategy`: ADAPTIVE (adaptive), FORCE_MUTEX (mutex) or
  /// FORCE_LOCKFREE (lockfree); `policy` says when ADAPTIVE switches (a
  /// window of 0 counts as 1). Any other pool_queue (sharded) throws
  /// error_exception{invalid_argument}.
  explicit basic_adaptive_job_queue(queue_strategy strategy = queue_strategy::ADAPTIVE, adaptive_policy policy = {})
      : strategy_(checked_strategy(strategy)), policy_(policy) {
    if (policy_.window == 0) policy_.window = 1;
    window_start_ns_ = detail::steady_now_ns();
    // Generation parity names the active queue: even = mutex, odd = lock-free.
    // The previous queue starts drained (nothing was ever pushed into it).
    // The lock-free queue is made here only for FORCE_LOCKFREE; ADAPTIVE
    // makes it at its first switch to it (see lockfree_).
    const std::uint64_t generation = strategy == queue_strategy::FORCE_LOCKFREE ? 1 : 0;
    if (generation == 1)
      lockfree_.store(new lockfree_queue(), std::memory_order_relaxed);  // before the queue is shared
    state_.store(generation << generation_shift | drained_bit,
                 std::memory_order_relaxed);  // before the queue is shared
    refresh_refusals_locked();                // (no lock needed yet: nothing else sees the queue)
  }

  /// Destroys the jobs still queued and frees both queues. Requires that no other member is running.
  ~basic_adaptive_job_queue() {
    delete lockfree_.load(std::memory_order_relaxed);  // quiescent: no concurrent member call
  }

  /// Not copyable.
  basic_adaptive_job_queue(const basic_adaptive_job_queue&) = delete;
  /// Not copyable.
  basic_adaptive_job_queue& operator=(const basic_adaptive_job_queue&) = delete;

  /// Appends `job` to the active queue. Fails with `invalid_argument` (empty
  /// job), `pool_stopped` (closed) or `resource_exhausted` (out of memory);
  /// on failure `job` is not moved from.
  [[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "adaptive_job_queue: empty job");
    return push_valid(std::span<job_function>(&job, 1));
  }

  /// try_push() that also reports, on success, whether the queue the job
  /// went into held no earlier job still to be taken: the mutex queue reads
  /// it inside its critical section (exact), the lock-free queue after
  /// publishing (lockfree_queue::try_push(job, was_empty)). False only when
  /// an earlier job waits in the same queue (on a two-lock side, or one a
  /// pop has taken and not yet subtracted from the count: that pop's
  /// consumer is awake), so a pool that skips its wake-up then leaves no
  /// job unserved (see scheduler/injector.hpp).
  /// Unchanged on failure.
  [[nodiscard]] result<void> try_push(job_function&& job, bool& was_empty) {
    if (!job) return make_error(error_code::invalid_argument, "adaptive_job_queue: empty job");
    return push_valid(std::span<job_function>(&job, 1), &was_empty);
  }

  /// Appends every job of `jobs` to the active queue, all or none.
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& job : jobs) {
      if (!job) return make_error(error_code::invalid_argument, "adaptive_job_queue: empty job in batch");
    }
    if (jobs.empty()) {  // nothing to route; refused after close() as every other push
      if (is_closed()) return make_error(error_code::pool_stopped, "adaptive_job_queue: queue is closed");
      return {};
    }
    return push_valid(jobs);
  }

  /// Moves the oldest available job into `out`; false when empty.
  [[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE bool try_pop(job_function& out) {
    const std::span<job_function> destination(&out, 1);
    const std::size_t fast = pop_mutex_only(destination);
    if (fast != not_mutex_only) return fast == 1;
    return pop_routed(destination) == 1;
  }

  /// Moves up to `out.size()` jobs into `out` (the previous queue's first);
  /// returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) {
    if (out.empty()) return 0;
    const std::size_t fast = pop_mutex_only(out);
    return fast != not_mutex_only ? fast : pop_routed(out);
  }

  /// Moves up to `min(out.size(), max(1, size / consumers))` jobs into
  /// `out`, like pop_batch(): a consumer that is one of `consumers` takes its
  /// fair part of the backlog (the mutex queue's pop_share, lockfree_queue::pop_share).
  [[nodiscard]] std::size_t pop_share(std::span<job_function> out, std::size_t consumers) {
    if (out.empty()) return 0;
    const std::size_t fast = pop_mutex_only(out, typename MutexQueue::fair_share{consumers});
    return fast != not_mutex_only ? fast : pop_routed(out, std::max<std::size_t>(consumers, 1));
  }

  /// Refuses further pushes. Idempotent; queued jobs stay poppable.
  void close() {
    mutex_queue_.close();  // under its (push) lock, which every switch holds too: no switch after this
    // (So a lock-free queue made by a switch is seen here: made under that lock.)
    if (lockfree_queue* lockfree = lockfree_queue_if_made(); lockfree != nullptr) lockfree->close();
    // release: a thread that sees the flag (acquire in is_closed()) sees both
    // queues closed; pairs with is_closed().
    closed_.store(true, std::memory_order_release);
  }

  /// True once close() has closed both queues: every push fails, and a pop that returns false proves the queue
  /// empty for good.
  [[nodiscard]] bool is_closed() const noexcept {
    return closed_.load(std::memory_order_acquire);  // pairs with the release in close()
  }

  /// Number of queued jobs in both queues; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    return mutex_queue_.size_approx() + from_lockfree_queue(&lockfree_queue::size_approx);
  }
  /// True when neither queue holds a job, by each queue's own
  /// empty_approx() (the lock-free queue's reads its head segment, not the
  /// per-record counters size_approx() sums); the lock-free queue is asked
  /// only while it may hold jobs (active, or previous and not drained).
  /// Approximate under concurrency.
  [[nodiscard]] bool empty_approx() const noexcept {
    if (!mutex_queue_.empty_approx()) return false;
    // seq_cst: as every access to the state (see push_routed()).
    const std::uint64_t state = state_.load(std::memory_order_seq_cst);
    if (active_index(state) == mutex_index && is_drained(state)) return true;
    return active_lockfree_queue().empty_approx();  // (made before a state that names it)
  }

  /// Jobs accepted so far by either queue, each counted before it can be
  /// popped (the mutex queue inside its critical section, the lock-free
  /// queue in its operation's hazard record): a thread that saw a popped
  /// job's completion through a release/acquire chain reads a total that
  /// includes it. A lock-free push still in progress may be counted and
  /// taken back if it fails (a push that a switch turns away is counted
  /// again only where it lands). After close() and then wait_for_pushes(),
  /// the total is final.
  [[nodiscard]] std::uint64_t accepted_pushes() const noexcept {
    return mutex_queue_.accepted_pushes() + from_lockfree_queue(&lockfree_queue::accepted_pushes);
  }

  /// After close(): returns once no push that could still be accepted is
  /// running. The mutex queue accepts under its (push) lock, which close() took;
  /// the lock-free queue's pushes in flight are waited for (its
  /// wait_for_pushes()); a push they turn away finds the mutex queue closed.
  void wait_for_pushes() const noexcept {
    if (const lockfree_queue* lockfree = lockfree_queue_if_made(); lockfree != nullptr) lockfree->wait_for_pushes();
  }

  /// The strategy chosen at construction.
  [[nodiscard]] queue_strategy requested_strategy() const noexcept { return strategy_; }

  /// The queue new pushes go to: FORCE_MUTEX or FORCE_LOCKFREE.
  [[nodiscard]] queue_strategy current_strategy() const noexcept {
    // relaxed: a snapshot for reporting; nothing is read through it.
    return strategy_of(active_index(state_.load(std::memory_order_relaxed)));
  }

  /// A snapshot of the counters (relaxed reads; see adaptive_queue_statistics).
  [[nodiscard]] adaptive_queue_statistics get_statistics() const noexcept {
    adaptive_queue_statistics statistics;
    statistics.current_strategy = current_strategy();
    // relaxed: statistics only.
    statistics.switches = switches_.load(std::memory_order_relaxed);
    statistics.operations = jobs_moved();
    statistics.contention_events = contention_events();
    statistics.probes_rejected = probes_rejected_.load(std::memory_order_relaxed);
    return statistics;
  }

  /// Test hook (ADAPTIVE only): switches to the other queue now if the
  /// switch protocol allows it (the previous queue is drained, and for a
  /// switch to the lock-free queue no lock-free operation is running).
  /// Returns whether it switched.
  bool force_switch_for_testing() {
    if (strategy_ != queue_strategy::ADAPTIVE) return false;
    // relaxed: a guess; try_switch() re-reads the state under the lock.
    return try_switch(1 - active_index(state_.load(std::memory_order_relaxed)));
  }

 private:
  static constexpr std::uint64_t drained_bit = 1;
  static constexpr unsigned generation_shift = 1;
  static constexpr std::size_t mutex_index = 0;
  static constexpr std::size_t lockfree_index = 1;
  static constexpr std::uint64_t first_backoff_windows = 8;
  static constexpr std::uint64_t max_backoff_windows = 4096;
  static constexpr double keep_margin = 0.9;
  static constexpr unsigned lockfree_check_every = 256;  // lock-free jobs per thread between window checks
  // Contended mutex-queue operations between window checks (a power of two).
  static constexpr std::uint64_t contended_check_every = 64;

  static std::size_t active_index(std::uint64_t state) noexcept {
    return static_cast<std::size_t>((state >> generation_shift) & 1U);
  }
  static bool is_drained(std::uint64_t state) noexcept { return (state & drained_bit) != 0; }
  // The queue pops take from in `state`.
  static std::size_t source_index(std::uint64_t state) noexcept {
    return is_drained(state) ? active_index(state) : 1 - active_index(state);
  }
  // The mutex queue is active and the lock-free one drained (one test).
  static bool mutex_is_the_only_source_in(std::uint64_t state) noexcept {
    static_assert(mutex_index == 0);
    return (state & (std::uint64_t{1} << generation_shift | drained_bit)) == drained_bit;
  }
  static queue_strategy checked_strategy(queue_strategy s) {
    if (s != queue_strategy::ADAPTIVE && s != queue_strategy::FORCE_MUTEX && s != queue_strategy::FORCE_LOCKFREE)
      throw error_exception(error{
          error_code::invalid_argument,
          std::string("adaptive_job_queue: '") + to_string(s) + "' is not a strategy (adaptive, mutex or lockfree)"});
    return s;
  }
  // The lock-free queue once made, else null. acquire: pairs with the
  // release store in switch_locked(), so a made queue is seen whole.
  [[nodiscard]] lockfree_queue* lockfree_queue_if_made() const noexcept {
    return lockfree_.load(std::memory_order_acquire);
  }
  // A count of the lock-free queue's (`count` one of its const noexcept
  // members), 0 while it has not been made.
  template <typename Count>
  [[nodiscard]] Count from_lockfree_queue(Count (lockfree_queue::*count)() const noexcept) const noexcept {
    const lockfree_queue* lockfree = lockfree_queue_if_made();
    return lockfree != nullptr ? (lockfree->*count)() : Count{0};
  }
  // The lock-free queue, for a caller that read a state naming it (active,
  // or previous and not drained): made before that state was stored, so
  // never null here.
  [[nodiscard]] lockfree_queue& active_lockfree_queue() const noexcept {
    // relaxed: ordered by the caller's seq_cst load of that state, which
    // read the seq_cst store made after the pointer's.
    return *lockfree_.load(std::memory_order_relaxed);
  }
  static queue_strategy strategy_of(std::size_t index) noexcept {
    return index == mutex_index ? queue_strategy::FORCE_MUTEX : queue_strategy::FORCE_LOCKFREE;
  }

  // Pushes `jobs` (all valid, at least one). The common case is inline (the
  // mutex queue is active and no window closes): the mutex queue's own push plus
  // one load of the state. Anything else goes out of line.
  // `was_empty`, when given, is set on success (see try_push()).
  THREAD_SYSTEM_ALWAYS_INLINE result<void> push_valid(std::span<job_function> jobs, bool* was_empty = nullptr) {
    // seq_cst: see push_routed().
    if (active_index(state_.load(std::memory_order_seq_cst)) == mutex_index) {
      const auto outcome = push_mutex(jobs, was_empty);
      if (outcome == push_outcome::pushed) return {};
      return finish_mutex_push(outcome, jobs, was_empty);
    }
    return push_routed(jobs, was_empty);
  }

  // The fast path's hooks into the mutex queue's critical sections (named
  // types with forced-inline calls: see job_queue::admit_all).
  struct mutex_is_the_only_source {  // the mutex queue is active and the lock-free one drained
    const basic_adaptive_job_queue* queue;
    THREAD_SYSTEM_ALWAYS_INLINE bool operator()() const noexcept {
      // The copy of the state on the pop lock's line (see refresh_refusals_locked()).
      return !queue->mutex_queue_.fast_pops_refused_locked();
    }
  };
  struct lock_was_held {  // a mutex-queue operation found its lock held (runs under it, before admit)
    basic_adaptive_job_queue* queue;
    queue_end end;  // the end whose lock the operation holds
    THREAD_SYSTEM_ALWAYS_INLINE void operator()(std::uint64_t contended_total) const noexcept {
      // Every contended_check_every-th contended operation looks at the
      // window; the others pay one test.
      if ((contended_total & (contended_check_every - 1)) == 0) queue->evaluate_locked(end);
    }
  };

  // The mutex queue's own push, with the state re-checked under its lock.
  THREAD_SYSTEM_ALWAYS_INLINE push_outcome push_mutex(std::span<job_function> jobs, bool* was_empty) {
    // (The mutex queue refuses the push itself when it is not active:
    // refuse_pushes, see refresh_refusals_locked().)
    return mutex_queue_.push_admitted(jobs, was_empty, lock_was_held{this, queue_end::push});
  }

  // The rest of a mutex-queue push that did not simply succeed: a switch
  // that came first (pushed again, through push_routed()), or an error.
  THREAD_SYSTEM_NOINLINE result<void> finish_mutex_push(push_outcome outcome, std::span<job_function> jobs,
                                                        bool* was_empty) {
    if (outcome == push_outcome::not_admitted) return push_routed(jobs, was_empty);
    return detail::mutex_queue_hooks::to_result(outcome, "adaptive_job_queue");
  }

  THREAD_SYSTEM_NOINLINE result<void> push_routed(std::span<job_function> jobs, bool* was_empty) {
    for (unsigned attempt = 0;; ++attempt) {
      // seq_cst (every load and store of state_): the switch protocol's
      // orderings are all read-after-write between state_ and a lock or a
      // hazard record (see the header comment).
      const std::uint64_t state = state_.load(std::memory_order_seq_cst);
      if (active_index(state) == mutex_index) {
        const auto outcome = push_mutex(jobs, was_empty);
        if (outcome == push_outcome::not_admitted) continue;  // switched meanwhile
        return finish_mutex_push(outcome, jobs, was_empty);
      }
      lockfree_queue& lockfree = active_lockfree_queue();
      const auto status =
          jobs.size() == 1 ? lockfree.push_one(std::move(jobs[0]), was_empty) : lockfree.push_chain(jobs);
      switch (status) {
        case lockfree_queue::link_status::linked:
          note_lockfree_jobs();
          return {};
        case lockfree_queue::link_status::sealed:
          // A switch away from the lock-free queue is publishing its state.
          if (attempt >= 16) std::this_thread::yield();
          continue;
        case lockfree_queue::link_status::closed:
          return make_error(error_code::pool_stopped, "adaptive_job_queue: queue is closed");
        case lockfree_queue::link_status::out_of_memory:
          break;
      }
      return detail::mutex_queue_hooks::to_result(push_outcome::out_of_memory, "adaptive_job_queue");
    }
  }

  static constexpr std::size_t not_mutex_only = ~std::size_t{0};

  // The common case, in one critical section: the mutex queue is active and
  // the lock-free one drained, so the mutex queue is the only place a pop
  // may take from, and finding it empty is a definite answer (no second
  // lock for an empty poll; with two locks, no lock at all). Returns
  // not_mutex_only in any other state.
  // `limit` as the mutex queue's pop_admitted's (all, or a consumer's share).
  template <typename Limit = typename MutexQueue::take_all>
  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_mutex_only(std::span<job_function> out, Limit limit = {}) {
    // seq_cst: see push_routed(); a hint, re-validated under the lock.
    const std::uint64_t hint = state_.load(std::memory_order_seq_cst);
    if (!mutex_is_the_only_source_in(hint)) return not_mutex_only;
    if constexpr (MutexQueue::lock_per_end) {
      // An empty poll takes no lock (as two_lock_job_queue's own): no job
      // counted (acquire, so the state is read again after it) while the
      // state is still the hint's is a moment when both queues were empty.
      // (The state only moves forward: the same value means no change.)
      if (mutex_queue_.looks_empty()) {
        return state_.load(std::memory_order_seq_cst) == hint ? 0 : not_mutex_only;  // seq_cst: see push_routed()
      }
    }
    const std::size_t taken =
        mutex_queue_.pop_admitted(out, limit, mutex_is_the_only_source{this}, typename MutexQueue::no_action{},
                                  lock_was_held{this, queue_end::pop});
    return taken == MutexQueue::not_admitted ? not_mutex_only : taken;
  }

  // How many jobs a routed pop may take from a queue holding `queued`: all
  // (consumers == 0: pop_batch) or one consumer's fair share (pop_share).
  struct share_of {
    std::size_t consumers;
    THREAD_SYSTEM_ALWAYS_INLINE std::size_t operator()(std::size_t queued) const noexcept {
      return consumers == 0 ? ~std::size_t{0} : typename MutexQueue::fair_share{consumers}(queued);
    }
  };

  // Pops from the previous queue until it is drained, then from the active
  // one; `consumers` as in share_of.
  THREAD_SYSTEM_NOINLINE std::size_t pop_routed(std::span<job_function> out, std::size_t consumers = 0) {
    std::size_t taken = 0;
    for (;;) {
      // seq_cst: see push_routed(). A hint here; each queue re-validates.
      const std::uint64_t state = state_.load(std::memory_order_seq_cst);
      if (source_index(state) == mutex_index) {
        bool go_on = false;  // the previous mutex queue was found drained: go on with the lock-free one
        std::uint64_t current = 0;
        const std::span<job_function> rest = out.subspan(taken);
        const std::size_t n = mutex_queue_.pop_admitted(
            rest, share_of{consumers},
            [this, &current]() noexcept {
              current = state_.load(std::memory_order_seq_cst);
              return source_index(current) == mutex_index;
            },
            [this, &current, &go_on](std::size_t /*popped*/) noexcept {
              // (Empty, not "took fewer than asked": a pop_share() takes only
              // a share of what is there.)
              if (mutex_queue_.empty_locked() && active_index(current) != mutex_index) {
                // Previous, empty, and no push can enter it (pushes need it
                // active, checked under the push lock, and the switch that
                // made it previous held both locks): empty for good. Nothing
                // else changes the state while we hold the pop lock in this
                // state (a switch needs both locks).
                state_.store(current | drained_bit, std::memory_order_seq_cst);
                refresh_pop_refusals_locked();
                go_on = true;
              }
            },
            lock_was_held{this, queue_end::pop});
        if (n == MutexQueue::not_admitted) continue;  // the state changed after our hint
        taken += n;
        if (go_on && taken < out.size()) continue;
        return taken;
      }
      bool go_on = false;
      std::optional<std::size_t> popped;
      try {
        popped = pop_lockfree(out.subspan(taken), consumers, go_on);
      } catch (const std::bad_alloc&) {
        // No hazard record for this thread (lockfree_queue's contract:
        // nothing was taken there). Jobs already taken from the drained
        // mutex queue are in `out`: return them; with none, the pop
        // throws having taken nothing, as the lock-free queue's does.
        if (taken > 0) return taken;
        throw;
      }
      if (!popped) continue;  // the state changed after our hint
      taken += *popped;
      if (go_on) {
        // The previous lock-free queue was found drained (by this pop or
        // another): the mutex queue's copy of the state may now let fast
        // pops in. (Until this refresh they take this path: safe, slower.)
        std::lock_guard lock(mutex_queue_.pop_lock());
        refresh_pop_refusals_locked();
      }
      if (*popped > 0) note_lockfree_jobs();
      if (taken < out.size() && go_on) continue;
      return taken;
    }
  }

  // The lock-free side of pop_routed(): pops into `out` unless the state
  // changed after our hint (nullopt); sets `go_on` when the queue popped is
  // the previous one and was found drained. Throws std::bad_alloc having
  // taken nothing (a first use on this thread that cannot get a hazard
  // record).
  std::optional<std::size_t> pop_lockfree(std::span<job_function> out, std::size_t consumers, bool& go_on) {
    return active_lockfree_queue().pop_checked(
        out, consumers,
        [this] {
          // Read while holding the hazard record (see the header comment).
          return source_index(state_.load(std::memory_order_seq_cst)) == lockfree_index;
        },
        [this, &go_on] {
          // Ended (empty and sealed or closed), still holding the record,
          // so no switch can unseal it now. If it is the previous queue,
          // it is empty for good: mark it drained.
          std::uint64_t current = state_.load(std::memory_order_seq_cst);
          if (active_index(current) != lockfree_index && !is_drained(current)) {
            // Fails only if another pop set the bit first.
            (void)state_.compare_exchange_strong(current, current | drained_bit, std::memory_order_seq_cst,
                                                 std::memory_order_seq_cst);
            go_on = true;
          }
        });
  }

  // Every contended_check_every-th mutex-queue operation that found its
  // lock held (counted by the mutex queue itself) looks at the window,
  // holding the lock of its end (`end`). Only contended operations look: a
  // window with no contention has a contention ratio of 0, which asks for
  // no switch (see adaptive_policy), so the common, uncontended operation
  // measures nothing. Runs before the operation's own state check, so a
  // switch made here is seen by the operation that made it.
  THREAD_SYSTEM_NOINLINE void evaluate_locked(queue_end end) noexcept {
    if (strategy_ == queue_strategy::ADAPTIVE)
      evaluate(end == queue_end::push ? lock_held::push_end : lock_held::pop_end);
  }

  // After lock-free jobs moved: every few of this thread's jobs, look at the window.
  void note_lockfree_jobs() {
    if (strategy_ != queue_strategy::ADAPTIVE) return;
    thread_local unsigned countdown = 0;  // shared by every adaptive queue: a sampling rate only
    if (countdown > 0) {
      --countdown;
      return;
    }
    countdown = static_cast<unsigned>(std::min<std::size_t>(policy_.window, lockfree_check_every)) - 1;
    evaluate(lock_held::none);
  }

  [[nodiscard]] std::uint64_t jobs_moved() const noexcept {
    // Mutex queue: every job pushed, and every job pushed that is no longer
    // queued was popped. Two reads at slightly different moments: approximate.
    const std::uint64_t pushed = mutex_queue_.accepted_pushes();
    const std::uint64_t queued = mutex_queue_.size_approx();
    return 2 * pushed - std::min<std::uint64_t>(queued, pushed) + from_lockfree_queue(&lockfree_queue::jobs_moved);
  }
  [[nodiscard]] std::uint64_t contention_events() const noexcept {
    return mutex_queue_.contended_operations() + from_lockfree_queue(&lockfree_queue::cas_retries);
  }

  // Which of the mutex queue's locks the caller holds (with job_queue the
  // one lock is both ends').
  enum class lock_held : std::uint8_t { none, push_end, pop_end };

  // Closes a measurement window if one is complete and decides (see the
  // header comment). One thread at a time; others skip.
  void evaluate(lock_held held) noexcept {
    // acquire/release: the window fields below are owned by the holder of
    // this flag; pairs with the release store at the end.
    if (evaluating_.exchange(true, std::memory_order_acquire)) return;
    const std::uint64_t moved = jobs_moved();
    // A probe of the lock-free queue is measured over a quarter window: it
    // is likely the slower queue, so the probe should be short.
    const std::uint64_t needed =
        probation_left_ > 0 ? std::max<std::uint64_t>(policy_.window / 4, 1) : std::uint64_t{policy_.window};
    if (moved - window_start_moved_ >= needed) {
      const std::uint64_t events = contention_events();
      const auto jobs = static_cast<double>(moved - window_start_moved_);
      const double ratio = static_cast<double>(events - window_start_events_) / jobs;
      window_start_moved_ = moved;
      window_start_events_ = events;
      // relaxed: a snapshot; try_switch() re-reads the state under the lock.
      const std::size_t active = active_index(state_.load(std::memory_order_relaxed));
      const std::uint64_t now = detail::steady_now_ns();
      const double ns_per_job = static_cast<double>(now - window_start_ns_) / jobs;
      window_start_ns_ = now;
      if (active == mutex_index) {
        // The best mutex window since the last switch: a window that spans
        // an idle gap (nobody pushing) looks slow and must not make the
        // lock-free queue look better than it is.
        mutex_ns_per_job_ = mutex_windows_ == 0 ? ns_per_job : std::min(mutex_ns_per_job_, ns_per_job);
        ++mutex_windows_;
        if (backoff_left_ > 0) {
          --backoff_left_;
        } else if (ratio >= policy_.to_lockfree_threshold && (!policy_.keep_faster || mutex_windows_ >= 2) &&
                   switch_to(lockfree_index, held)) {
          // (With keep_faster, only once two mutex windows give a reference:
          // the first one after a start or a switch is often cold.)
          probation_left_ = policy_.keep_faster ? 1 : 0;
          mutex_windows_ = 0;
        }
      } else if (probation_left_ == 0) {
        // A lock-free queue that proved itself (or ADAPTIVE without
        // keep_faster): back to the mutex queue once contention is low.
        if (ratio <= policy_.to_mutex_threshold && switch_to(mutex_index, held)) mutex_windows_ = 0;
      } else if (--probation_left_ == 0) {
        // End of probation. (Its low contention is no reason to leave during
        // probation: failed CASes and a held lock are not comparable.)
        // Kept only if clearly faster (by `keep_margin`): on a tie the mutex
        // queue, which spins less, is the better choice.
        if (ns_per_job > mutex_ns_per_job_ * keep_margin) {
          if (switch_to(mutex_index, held)) {
            mutex_windows_ = 0;
            backoff_length_ =
                std::min(backoff_length_ == 0 ? first_backoff_windows : 2 * backoff_length_, max_backoff_windows);
            backoff_left_ = backoff_length_;
            probes_rejected_.fetch_add(1, std::memory_order_relaxed);  // statistics only
          } else {
            // Not now (the mutex queue still holds jobs from before the
            // probe, or its other lock was held): still on probation,
            // decided again at the next window.
            probation_left_ = 1;
          }
        } else {
          backoff_length_ = 0;  // the lock-free queue won: later probes start afresh
        }
      }
    }
    evaluating_.store(false, std::memory_order_release);  // pairs with the exchange above
  }

  // A switch needs both of the mutex queue's locks. A caller that holds one
  // only tries the other (never waits for it: another thread may hold it
  // and be waiting for the first); if it is taken, the switch waits for a
  // later window.
  bool switch_to(std::size_t target, lock_held held) noexcept {
    if (held == lock_held::none) return try_switch(target);
    const queue_end end = held == lock_held::push_end ? queue_end::push : queue_end::pop;
    if (!mutex_queue_.try_lock_other_end(end)) return false;
    const bool switched = switch_locked(target);
    mutex_queue_.unlock_other_end(end);
    return switched;
  }

  // Switches the active queue to `target`; see the header comment.
  bool try_switch(std::size_t target) noexcept {
    mutex_queue_.lock_both();
    const bool switched = switch_locked(target);
    mutex_queue_.unlock_both();
    return switched;
  }

  // Copies what the state allows the mutex queue into its refusals (on
  // its locks' lines, read inside its critical sections): pushes need it
  // active; fast pops need it active with the lock-free queue drained.
  // Called, holding both of its locks, after a switch (the only change of
  // what pushes may do); refresh_pop_refusals_locked(), holding its pop
  // lock, after a change of a `drained` bit. A change that takes a
  // permission away from the mutex queue (a switch, or its own `drained`
  // bit) is made under the lock of every end it concerns, so no
  // mutex-queue operation acts on an outdated copy; the one change made
  // without a lock (the lock-free queue found drained, in pop_routed())
  // only grants a permission, and until its refresh the copy is merely
  // stricter.
  static std::uint8_t pop_refusals_for(std::uint64_t state) noexcept {
    // Older jobs may wait in the lock-free queue unless it is drained.
    return active_index(state) != mutex_index || !is_drained(state) ? MutexQueue::refuse_fast_pops : std::uint8_t{0};
  }
  void refresh_refusals_locked() noexcept {
    // seq_cst: see push_routed().
    const std::uint64_t state = state_.load(std::memory_order_seq_cst);
    const std::uint8_t push_refusals = active_index(state) != mutex_index ? MutexQueue::refuse_pushes : std::uint8_t{0};
    mutex_queue_.set_refusals_locked(push_refusals, pop_refusals_for(state));
  }
  void refresh_pop_refusals_locked() noexcept {
    // seq_cst: see push_routed().
    mutex_queue_.set_pop_refusals_locked(pop_refusals_for(state_.load(std::memory_order_seq_cst)));
  }

  // Seals (`seal`) or unseals the lock-free queue for a switch; true when
  // done. Either takes a hazard record, which allocates when every record
  // of the queue is held: out of memory there throws before anything
  // changed, and the switch is then not made (switches are noexcept).
  static bool set_sealed(lockfree_queue& queue, bool seal) noexcept {
    try {
      return seal ? queue.seal() : queue.unseal();
    } catch (const std::bad_alloc&) {
      return false;
    }
  }

  // try_switch() for a caller holding both of the mutex queue's locks.
  bool switch_locked(std::size_t target) noexcept {
    if (mutex_queue_.closed_locked()) return false;  // no switch once closing began
    const std::uint64_t state = state_.load(std::memory_order_seq_cst);
    if (active_index(state) == target || !is_drained(state)) return false;
    if (target == lockfree_index) {
      lockfree_queue* lockfree = lockfree_queue_if_made();
      if (lockfree == nullptr) {
        // The first switch to it: made now, open (no operation can have
        // read a state naming it). Out of memory: no switch.
        try {
          lockfree = new lockfree_queue();
        } catch (const std::bad_alloc&) {
          return false;
        }
        // release (and the state's seq_cst store below): whoever reads a
        // state naming the lock-free queue, or acquires this pointer, sees
        // it made; pairs with lockfree_queue_if_made() and the state loads.
        lockfree_.store(lockfree, std::memory_order_release);
      } else {
        // A lock-free operation running now may be a pop that read an
        // older state allowing it to pop (see the header comment): try later.
        if (lockfree->operation_in_progress()) return false;
        if (!set_sealed(*lockfree, false)) return false;  // closed, or no memory
      }
    } else if (!set_sealed(active_lockfree_queue(), true)) {
      return false;  // closed, or no memory
    }
    // The old active queue becomes the previous one, not drained.
    state_.store(((state >> generation_shift) + 1) << generation_shift, std::memory_order_seq_cst);
    refresh_refusals_locked();
    switches_.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return true;
  }

  // First, so that its address is the object's (one register fewer in a
  // caller's loop); its line is otherwise read-only (strategy_, policy_),
  // and it changes only at a switch.
  alignas(64) std::atomic<std::uint64_t> state_{0};
  const queue_strategy strategy_;
  adaptive_policy policy_;
  alignas(64) MutexQueue mutex_queue_;
  // The lock-free queue: made at the first switch to it (at construction
  // for FORCE_LOCKFREE), so that an adaptive queue that never switches never
  // allocates it (a segment of 5312 bytes and a hazard record). Set once,
  // holding every lock of the mutex queue, before the state store that
  // names it; owned, freed by the destructor.
  alignas(64) std::atomic<lockfree_queue*> lockfree_{nullptr};
  alignas(64) std::atomic<bool> evaluating_{false};
  std::atomic<std::uint64_t> switches_{0};
  std::atomic<std::uint64_t> probes_rejected_{0};
  // Owned by the thread holding evaluating_.
  std::uint64_t window_start_moved_ = 0;
  std::uint64_t window_start_events_ = 0;
  std::uint64_t window_start_ns_ = 0;
  double mutex_ns_per_job_ = 0;
  std::uint64_t mutex_windows_ = 0;
  unsigned probation_left_ = 0;
  std::uint64_t backoff_length_ = 0;
  std::uint64_t backoff_left_ = 0;
  alignas(64) std::atomic<bool> closed_{false};
};

/// The adaptive queue over job_queue (one lock for both ends): the stand-alone queue, where producers and consumers
/// move one job at a time.
using adaptive_job_queue = basic_adaptive_job_queue<job_queue>;
/// The adaptive queue over two_lock_job_queue (a lock for each end): the pools' adaptive injector and the typed
/// pool's adaptive per-type queue, whose workers take jobs in shares.
using two_lock_adaptive_job_queue = basic_adaptive_job_queue<two_lock_job_queue>;

static_assert(job_queue_model<adaptive_job_queue>);
static_assert(job_queue_model<two_lock_adaptive_job_queue>);

}  // namespace thread_system
