// The one helping wait: how every blocking wait of the library waits —
// future::wait/get (and parallel_for, parallel_reduce through it),
// task_group::wait and wait_group::wait.
//
// The policy, in one place (helping_wait() below):
//   * On one of a pool's worker threads the wait *helps*: while the
//     condition is false it runs jobs of that pool, one at a time (never a
//     batch, so helping allocates nothing and cannot fail for lack of
//     memory; a worker's first helping wait looks up its stack's bounds,
//     which glibc does with an allocation: pools/thread_pool.hpp). A job
//     may therefore wait for a child it submitted even in a pool with one
//     worker. Past half its stack a worker's wait runs only that worker's
//     own jobs (the children its nested waits submitted) and otherwise
//     waits without helping, as a blocking wait would: waits that need the
//     queue's jobs deeper than that (thousands of queued jobs that each wait
//     for a later one, on one worker) block as they would on a pool whose
//     waits block (pools/thread_pool.hpp, *Workers and their threads*).
//   * With nothing to help with, the awaited work runs on another thread
//     and is usually about to finish (the last piece of a parallel_for), so
//     the worker first polls (spin_rounds short spins), then yields the CPU
//     for up to idle_yield_ns, and only then parks on the waiter's word in
//     slices (park_slice_short_ns for the first park_short_slices, then
//     park_slice_long_ns): new jobs to help with may appear meanwhile, so a
//     worker never parks indefinitely. A helped job restarts the sequence.
//   * Off the pool's workers the wait parks at once, until woken (no
//     spinning, no CPU while waiting). (A task_group's creating thread
//     first takes back its own jobs no worker started: task_group.hpp.)
//   * Locks: a helped job is any job of the pool, run nested inside the
//     waiting code, on its thread - with the locks that code holds held,
//     and its thread_locals in view. So hold no lock across a helping wait
//     (future::get/wait, task_group::wait, wait_group::wait, parallel_for)
//     that another job of the same pool may take: with a std::mutex that
//     job deadlocks the thread; with a recursive mutex it enters the
//     waiter's critical section. Where a lock must stay held, wait with a
//     primitive that does not help (std::latch, a std::counting_semaphore)
//     and make sure the awaited work does not need this worker.
//   * Stack order: the waiting job resumes only when the job it is helping
//     with returns (both are on one stack). A helped job that waits for
//     something the waiting job does after its own wait returns therefore
//     never finishes, although a pool of blocking waits with enough workers
//     would finish (job A waits for X; this worker helps by running B, which
//     waits for a signal A sends after X: X runs, but A is under B). Jobs
//     that wait for each other's later steps, rather than for children they
//     submitted, should wait with a primitive that does not help (std::latch,
//     std::counting_semaphore) on a pool with a worker for each such wait;
//     the library does not isolate helping (a wait runs any job of the pool,
//     not only those submitted after it began).
//   * A deadline (steady clock in nanoseconds, detail/clock.hpp; 0 = none)
//     is checked between helped jobs, not during one: a wait may return
//     later than its deadline by the run time of the job it was helping with.
//
// The waiter supplies the condition and the parking: helping_wait() calls
// `ready()` (which must acquire what the waker published) and
// `park(limit_ns)`, which sleeps on the waiter's own word until woken or
// for at most limit_ns (-1: until woken) and may return early. The wakers
// (completion::set, wait_group::done) publish with a release and wake the
// word's sleepers.
//
// Who is a worker: the pool registers each of its worker threads with
// set_help_source() (src/helping_wait.cpp holds the thread-local pointer),
// so this layer calls into the pool through help_source without depending
// on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/futex.hpp"
#include "thread_system/detail/spin.hpp"

namespace thread_system::detail {

/// What a helping wait on a pool worker runs: the pool of that worker.
class help_source {
 public:
  /// Runs one job of the pool; false when none was found.
  virtual bool help_once() = 0;

 protected:
  help_source() = default;
  help_source(const help_source&) = default;
  help_source& operator=(const help_source&) = default;
  ~help_source() = default;
};

/// Registers `source` for the calling thread (null: none) and returns the
/// previous one. A pool's worker loop registers itself for its thread.
help_source* set_help_source(help_source* source) noexcept;
/// The calling thread's help source; null when it is not a pool worker.
[[nodiscard]] help_source* current_help_source() noexcept;

/// The idle phases of a helping wait on a worker (see the header comment).
class helping_backoff {
 public:
  static constexpr int spin_rounds = 64;      ///< polls before yielding
  static constexpr int spins_per_round = 32;  ///< pause instructions per poll
  static constexpr std::int64_t park_slice_short_ns = 20'000;
  static constexpr std::int64_t park_slice_long_ns = 200'000;
  static constexpr unsigned park_short_slices = 8;

  /// A helped job: start over.
  void reset() noexcept {
    spins_ = 0;
    yield_until_ = 0;
    parks_ = 0;
  }

  /// The next idle step: 0 when it polled or yielded (look again now),
  /// else how long to park at most.
  [[nodiscard]] std::int64_t next() noexcept {
    if (spins_ < spin_rounds) {
      ++spins_;
      for (int i = 0; i < spins_per_round; ++i) cpu_relax();
      return 0;
    }
    const std::int64_t now = steady_now_ns_signed();
    if (yield_until_ == 0) yield_until_ = now + idle_yield_ns;
    if (now < yield_until_) {
      std::this_thread::yield();
      return 0;
    }
    ++parks_;
    return parks_ <= park_short_slices ? park_slice_short_ns : park_slice_long_ns;
  }

 private:
  int spins_ = 0;
  std::int64_t yield_until_ = 0;
  unsigned parks_ = 0;
};

/// Waits until `ready()` or until `deadline_ns` passes (steady clock, 0 =
/// none), helping on a pool worker; see the header comment. Returns ready().
template <typename Ready, typename Park>
bool helping_wait(Ready&& ready, Park&& park, std::int64_t deadline_ns) {
  // Fast path first: fork-join waits often find the work already done.
  if (ready()) return true;
  helping_backoff backoff;
  help_source* const source = current_help_source();  // looked up once per wait
  while (!ready()) {
    std::int64_t limit = -1;  // -1: until woken
    if (deadline_ns != 0) {
      const std::int64_t left = deadline_ns - steady_now_ns_signed();
      if (left <= 0) return ready();
      limit = left;
    }
    if (source != nullptr) {
      if (source->help_once()) {
        backoff.reset();
        continue;
      }
      const std::int64_t slice = backoff.next();
      if (slice == 0) continue;
      if (limit < 0 || slice < limit) limit = slice;
    }
    park(limit);
  }
  return true;
}

/// A count of pending pieces with a sleeper bit in one futex word, and the
/// helping wait on it: wait_group's word (its add() and done() are its
/// own, checked against overflow and underflow, on word()); task_group
/// keeps a variant of its own, with a word only its creating thread writes
/// (pools/task_group.hpp). The low 31 bits count, the top bit says a thread
/// parks on the word.
class pending_count {
 public:
  static constexpr std::uint32_t sleeper_bit = 0x8000'0000U;
  static constexpr std::uint32_t count_mask = 0x7fff'ffffU;

  pending_count() = default;
  explicit pending_count(std::uint32_t initial) noexcept : word_(initial & count_mask) {}

  /// The word itself (the owner's add/done protocols operate on it).
  std::atomic<std::uint32_t>& word() noexcept { return word_; }

  /// Pending pieces now (acquire: pairs with the release of finish()).
  [[nodiscard]] std::uint32_t count() const noexcept { return word_.load(std::memory_order_acquire) & count_mask; }

  /// One piece finished: a single RMW. acq_rel: the piece's writes
  /// happen-before the waiter's acquire load that sees the count reach zero
  /// (chains of finish() carry every earlier piece's writes through the RMW
  /// order). This RMW is the last access to the object: the futex wake only
  /// names the address, so a waiter may already have destroyed it.
  /// Precondition: count() > 0 (unchecked: wait_group::done() is the
  /// checked form, and clears the sleeper bit at zero, which this leaves).
  void finish() noexcept {
    const std::uint32_t old = word_.fetch_sub(1, std::memory_order_acq_rel);
    if ((old & count_mask) == 1 && (old & sleeper_bit) != 0) futex_wake(word_, futex_wake_all);
  }

  /// Waits until the count is zero or the deadline passes (helping on a
  /// worker). Returns true when it reached zero.
  bool wait(std::int64_t deadline_ns) {
    return helping_wait([this] { return count() == 0; }, [this](std::int64_t limit) { park(limit); }, deadline_ns);
  }

 private:
  // Announces a sleeper in the top bit, then sleeps while the word is
  // unchanged; returns at once when the count changed meanwhile.
  void park(std::int64_t limit_ns) noexcept {
    std::uint32_t v = word_.load(std::memory_order_acquire);  // pairs with finish()
    if ((v & count_mask) == 0) return;
    // acquire on failure: the caller re-reads and re-checks.
    if ((v & sleeper_bit) == 0 &&
        !word_.compare_exchange_strong(v, v | sleeper_bit, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return;
    }
    if (limit_ns < 0) {
      futex_wait(word_, v | sleeper_bit);
    } else {
      futex_wait_for(word_, v | sleeper_bit, limit_ns);
    }
  }

  std::atomic<std::uint32_t> word_{0};
};

}  // namespace thread_system::detail
