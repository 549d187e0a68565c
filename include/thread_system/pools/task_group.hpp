// task_group: spawn jobs on a pool and wait for all of them, without a
// future (and without an allocation) per job — the primitive for fork-join
// code such as recursive divide and conquer.
//
//   std::uint64_t fib(thread_pool& pool, int n) {
//     if (n < 2) return n;
//     std::uint64_t a = 0;
//     task_group g(pool);
//     g.run([&] { a = fib(pool, n - 1); });
//     const std::uint64_t b = fib(pool, n - 2);
//     g.wait();
//     return a + b;
//   }
//
// Contract:
//   * run() may be called from any thread, including from jobs of the group.
//     From one of the pool's workers the job goes onto that worker's deque
//     (idle workers steal it). If the pool refuses it (stopping, full, out
//     of memory), run() executes it on the calling thread, so a group never
//     loses a job and run() itself never fails - except by throwing what
//     copying or moving f into the job throws, and then the group does not
//     count it, or error_exception{invalid_argument} for an empty callable
//     (a null function pointer, an empty std::function), as enqueue()
//     refuses it. From outside the pool's workers, a pool with
//     backpressure takes the job only if it has room: run() never waits
//     for room, evicts a job (drop_oldest) or goes through caller_runs -
//     a full pool's job runs on the calling thread (backpressure.hpp).
//   * wait() returns when every job run() so far has finished; on a worker
//     it helps run other jobs meanwhile (with the locks the waiting code
//     holds held: hold none that another job of the pool may take, see
//     sync/helping_wait.hpp, *Locks*). Off the pool's workers, the group's
//     creating thread first takes back, newest first, the jobs it run()
//     there that no worker has started - of the first 16 it run() since
//     its previous wait - and runs them itself, as parallel_for's caller does;
//     it runs no other job. So its wait does not sleep while those jobs sit
//     in the queue (behind other jobs, or in a paused pool); a job taken
//     back stays in the queue until a worker pops it and finds it taken,
//     which then does nothing (the pool's statistics count it as a job
//     executed, or cancelled by stop(cancel_pending)). Such entries are
//     bounded per pool - 1024, and at most a quarter of the capacity of a
//     pool with backpressure, where they hold room: while that many wait for a
//     worker (a busy or paused pool), the owner's jobs go to the pool as
//     another thread's do, and its wait waits for the workers. Everything the jobs did is visible
//     after wait() returns. The first exception thrown by a job (or error
//     a job returned, as error_exception: core/job_function.hpp) is rethrown
//     by wait() (later ones are dropped). A job the pool accepted and then
//     discarded unrun (stop(stop_mode::cancel_pending), or
//     backpressure::drop_oldest) counts as finished, and wait() throws
//     error_exception{cancelled} when no job threw.
//   * wait() is called by one thread at a time (usually the thread that
//     created the group; any thread may): a wait on another thread must
//     begin after the previous wait returned (a join, a future, a mutex).
//     Two waits at once may hang or return early. A job must not wait for
//     its own group (it would wait for itself): wait() refuses with
//     error_exception{invalid_argument} inside a wait of the same group on
//     the same thread (the owner running a job it took back or helped
//     run); on another thread such a wait hangs. The destructor waits too
//     (and swallows the exception if wait() was not called). The group must
//     outlive its jobs, which the waiting ensures.
//
// Cost: a job that its group's creating thread runs and then runs itself,
// inside that thread's wait() (the common fork-join case on a pool worker:
// the child was not stolen, and the wait helps), is counted without a
// single read-modify-write: the creating thread keeps that count in a word
// only it writes; so is a job it takes back off the pool. Jobs run or
// finished anywhere else count on a shared word with one atomic add or
// subtract each (see the count's comment in the class). Each of the first
// 16 jobs the creating thread run()s off the pool's workers after a wait
// costs one small node more (the job itself, which it can take back from
// there; recycled: the workers free the nodes and the creating thread gets
// them back in batches, so a steady state of such groups calls no malloc -
// detail/recycling_allocator.hpp) and three atomic read-modify-writes on
// that node (and a wait that took some back, one on the pool's count of
// them); with no memory for the node, the job goes to the pool as any
// other thread's does. A waiting creating thread
// that sleeps is woken once, by the last job to finish; a wait on another
// thread is woken by each finish while it sleeps, to look again.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/detail/chaos.hpp"
#include "thread_system/detail/config.hpp"

#include "thread_system/detail/futex.hpp"
#include "thread_system/detail/recycling_allocator.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/sync/helping_wait.hpp"

namespace thread_system {

namespace detail {
/// The task_group whose creating thread is inside that group's wait() on
/// this thread (the innermost such wait), or null: a job of that group
/// finishing here counts in the group's owner-only word.
inline thread_local const void* tl_task_group_in_wait = nullptr;
}  // namespace detail

/// Runs jobs on a pool and waits for all of them (fork-join), with no future per job; see the header comment.
class task_group {
 public:
  /// A group whose jobs run on `pool`, which must outlive the group.
  explicit task_group(thread_pool& pool) noexcept : pool_(pool) {}
  /// Not copyable.
  task_group(const task_group&) = delete;
  /// Not copyable.
  task_group& operator=(const task_group&) = delete;
  /// Waits for every job run() so far; an exception of a job is dropped if wait() was not called.
  ~task_group() {
    try {
      wait();
    } catch (...) {  // the caller did not ask for it: nowhere to report it
    }
    // Left only when a thread other than the owner waited: every job has
    // finished, so a worker or the pool's discard claimed each of them.
    while (reclaim_size_ != 0) pop_reclaimable()->release();
  }

  /// Runs `f` as a job of the group on the pool (on this worker's deque when called from one of its workers);
  /// if the pool refuses it, or there is no memory to hand it over, runs it on the calling thread instead. Throws
  /// only what copying or moving `f` throws (and then adds nothing to the group), and
  /// error_exception{invalid_argument} for an empty callable.
  template <runnable F>
  void run(F&& f) {
    if (detail::is_empty_callable(f)) {
      throw error_exception(error{error_code::invalid_argument, "task_group::run: empty function"});
    }
    // The job first: if copying or moving f throws, the exception leaves
    // run() and nothing was counted (a count taken first would never be
    // given back, and wait() would wait forever).
    // The owner off the pool keeps its first reclaim_depth jobs since its
    // last wait within reach, to take them back in wait() (see "Taking jobs
    // back" below).
    const bool owner = this_thread_tag() == owner_;
    if (owner && reclaim_size_ < reclaim_depth && !pool_.is_worker_thread() &&
        run_reclaimable<std::decay_t<F>>(std::forward<F>(f)))
      return;
    group_job<std::decay_t<F>> job{this, std::decay_t<F>(std::forward<F>(f))};
    // Moves the body once more. Whatever that move throws (a std::bad_alloc
    // of the body's own included) leaves run(), counted nowhere.
    job_function wrapped(std::nothrow, std::move(job));
    if (!wrapped) {
      // No memory to wrap the job (a capture too large to store inline):
      // run it here, now, which needs none. The job's body is intact: the
      // allocation failed before the body was moved. job() destroys the
      // body before it counts the job finished, as on a worker.
      count_spawn(owner);
      job();
      return;
    }
    count_spawn(owner);
    // A refused job_function is left untouched (see thread_pool::enqueue),
    // so the group runs it here instead of losing it.
    // From one of the pool's workers the job goes onto that worker's deque,
    // past its LIFO slot (detail::fork_access): this thread's wait() pops it
    // back, and a thief takes the oldest job first.
    if (auto r = detail::fork_access::push(pool_, std::move(wrapped)); !r) wrapped();
  }

  /// Waits for every job run() so far; rethrows the first exception.
  void wait() {
    if (this_thread_tag() == owner_ && reclaim_size_ != 0) take_back();  // the stack is the owner's alone
    if (!all_finished()) wait_for_jobs();
    // acquire: pairs with record()'s release store of `published`. A job
    // run() concurrently with this wait may be storing the first exception
    // right now (`claimed`: a move of one exception_ptr, never blocked) - a
    // job this wait waited for may then have lost the race to it, so that
    // exception is the one to rethrow: wait until it is published.
    std::uint8_t state = failed_.load(std::memory_order_acquire);
    while (state == claimed) {
      detail::cpu_relax();
      state = failed_.load(std::memory_order_acquire);
    }
    if (state == published) {
      std::exception_ptr e = std::move(error_);
      // release: the move above happens before the next record()'s write
      // (its CAS from `none` acquires this).
      failed_.store(none, std::memory_order_release);
      cancelled_.store(false, std::memory_order_relaxed);  // only the waiter touches it now
      std::rethrow_exception(e);
    }
    // relaxed: ordered by the acquire in wait() on the count (finish()'s release).
    if (cancelled_.load(std::memory_order_relaxed)) {
      cancelled_.store(false, std::memory_order_relaxed);  // only the waiter touches it now
      throw error_exception(error{error_code::cancelled, "task_group: a job was discarded by the pool before it ran"});
    }
  }

 private:
  // The pool job: runs the body, destroys it, and only then counts it as
  // finished, so the body's captures never outlive wait().
  template <typename D>
  struct group_job {
    task_group* group;
    std::optional<D> body;
    void operator()() {
      try {
        detail::invoke_job(*body);  // a returned error is thrown (job_function.hpp)
      } catch (...) {
        group->record(std::current_exception());
      }
      body.reset();
      group->finish();  // last access to the group
    }
    // The pool discarded the job (stop(stop_mode::cancel_pending), or
    // backpressure::drop_oldest): it never runs, but it still counts as
    // finished, and wait() reports it.
    void cancel() noexcept {
      // relaxed: published to the waiter by finish()'s release RMW.
      group->cancelled_.store(true, std::memory_order_relaxed);
      body.reset();
      group->finish();  // last access to the group
    }
  };

  // ---- Taking jobs back ------------------------------------------------------
  //
  // The first reclaim_depth jobs the owner run()s since its last wait,
  // while it is not one of the pool's workers, each live in a heap node
  // that two parties hold: the job in the pool's queue (a pointer) and the
  // owner's stack of such nodes. In wait() the owner takes back, newest
  // first, each node no worker has started, and runs it itself: it does not
  // sleep while those jobs wait in the queue, behind other jobs or in a
  // paused pool. The node's one word says who has it: claimed_bit, set by
  // the first party to run it (the worker that pops it, the pool's discard,
  // or the owner), and a count of the parties still holding it, in units
  // of holder; the last to let go deletes it. A job taken back stays in the
  // queue until a worker pops it, finds it claimed and lets go of the node;
  // the pool counts such entries and bounds them (detail::taken_back_account,
  // pool_front.hpp): at the bound, run() keeps nothing within reach.
  // The nodes come from the recycling allocator
  // (detail/recycling_allocator.hpp): the workers free most of them, and
  // the owner gets them back in batches, with no malloc in a steady state
  // (glibc's malloc and free, handed blocks that other threads freed, took
  // about two fifths of the owner's samples: docs/PERFORMANCE.md).
  // Why only the first reclaim_depth: the node moves a cache line between
  // the owner and the worker twice more per job. On a small group (a
  // request's fan-out) that buys the owner's help; a large one from outside
  // ran up to 1.6x slower per job with a node for each (docs/PERFORMANCE.md),
  // so its later jobs go to the pool as anyone else's do.

  struct reclaimable {
    static constexpr std::uint32_t claimed_bit = 1U;
    static constexpr std::uint32_t holder = 2U;
    enum class act : std::uint8_t { run, discard, destroy };

    reclaimable(void (*f)(reclaimable*, act) noexcept, detail::taken_back_account& a) noexcept
        : apply(f), account(&a) {}
    std::atomic<std::uint32_t> state{2 * holder};  // the queue's job and the owner's stack
    void (*apply)(reclaimable*, act) noexcept;
    detail::taken_back_account* account;  // the pool's count of jobs taken back and still queued

    // True for the one party that gets to run or discard the job; a party
    // that comes second sees the bit with a plain load and writes nothing.
    // relaxed: the body reached every party through the pool's queue
    // (release and acquire) or was written by the party itself; the claim
    // publishes nothing.
    bool claim() noexcept {
      return (state.load(std::memory_order_relaxed) & claimed_bit) == 0 &&
             (state.fetch_or(claimed_bit, std::memory_order_relaxed) & claimed_bit) == 0;
    }
    // The owner's claim (relaxed, as claim()): -1 when another party has
    // the job; else 1 when the queue's job still holds the node (the job
    // taken back is left behind in the queue: the pool's account counts
    // it until that job lets go), 0 when it has let go already.
    int claim_for_owner() noexcept {
      if ((state.load(std::memory_order_relaxed) & claimed_bit) != 0) return -1;
      const std::uint32_t old = state.fetch_or(claimed_bit, std::memory_order_relaxed);
      if ((old & claimed_bit) != 0) return -1;
      return old == 2 * holder ? 1 : 0;
    }
    // acq_rel: what a party did with the node (ran and destroyed the body)
    // happens-before the delete by whichever party lets go last. Returns
    // the state before: the node may be gone.
    std::uint32_t release() noexcept {
      const std::uint32_t old = state.fetch_sub(holder, std::memory_order_acq_rel);
      if ((old & ~claimed_bit) == holder) apply(this, act::destroy);
      return old;
    }
  };

  template <typename D>
  struct reclaimable_job final : reclaimable {
    template <typename F>
    reclaimable_job(task_group* g, detail::taken_back_account& a, F&& f)
        : reclaimable(&apply_to, a), job{g, D(std::forward<F>(f))} {}
    group_job<D> job;
    static void apply_to(reclaimable* r, act a) noexcept {
      auto* self = static_cast<reclaimable_job*>(r);
      if (a == act::run) {
        self->job();  // records what the body throws; then the job's last access to the group
      } else if (a == act::discard) {
        self->job.cancel();
      } else {
        detail::recycled_delete(self);
      }
    }
  };

  // What the pool's queue holds for a reclaimable job: one pointer.
  struct reclaim_ticket {
    reclaimable* node;
    explicit reclaim_ticket(reclaimable* n) noexcept : node(n) {}
    reclaim_ticket(reclaim_ticket&& other) noexcept : node(std::exchange(other.node, nullptr)) {}
    reclaim_ticket(const reclaim_ticket&) = delete;
    reclaim_ticket& operator=(const reclaim_ticket&) = delete;
    reclaim_ticket& operator=(reclaim_ticket&&) = delete;
    // Dropped unrun and not discarded (no pool does): the owner's take-back still runs it.
    ~reclaim_ticket() {
      if (node != nullptr) let_go(std::exchange(node, nullptr), false);
    }
    void operator()() noexcept { settle(reclaimable::act::run); }
    void cancel() noexcept { settle(reclaimable::act::discard); }
    void settle(reclaimable::act a) noexcept {
      reclaimable* n = std::exchange(node, nullptr);
      const bool claimed_here = n->claim();
      if (claimed_here) n->apply(n, a);
      let_go(n, claimed_here);
    }
    // A node the owner claimed while this job held it was counted by the
    // owner (claim_for_owner() returned 1): this job leaves the account.
    static void let_go(reclaimable* n, bool claimed_here) noexcept {
      detail::taken_back_account* account = n->account;  // the release may delete n
      if ((n->release() & reclaimable::claimed_bit) != 0 && !claimed_here) account->left_queue();
    }
  };

  static constexpr std::uint8_t reclaim_depth = 16;

  // run() by the owner off the pool. False, with `f` untouched, when there
  // is no memory for the node (run() then goes on as for any other thread).
  template <typename D, typename F>
  THREAD_SYSTEM_NOINLINE bool run_reclaimable(F&& f) {  // off the fork-join path's code
    // Not while the pool's queue holds its bound of jobs taken back and not
    // yet popped (a busy or paused pool: their entries wait for a worker).
    // Looked at by the first such run() after a wait (the stack is empty),
    // not by each: the count's line is the workers' too.
    if (reclaim_size_ == 0) {
      account_ = &detail::taken_back_of(pool_);
      if (account_->full()) return false;
    }
    // A throw from D's construction leaves here with the node freed and
    // nothing counted, as run() promises.
    auto* node = detail::recycled_new<reclaimable_job<D>>(this, *account_, std::forward<F>(f));
    if (node == nullptr) return false;
    job_function wrapped(reclaim_ticket{node});  // one pointer: stored inline, never throws
    count_spawn(true);
    push_reclaimable(node);  // before the queue's job may run and let go
    if (auto r = detail::fork_access::push(pool_, std::move(wrapped)); !r) wrapped();  // refused: run it here
    return true;
  }

  // The owner's stack (run() checked that it has room).
  void push_reclaimable(reclaimable* node) noexcept { reclaim_[reclaim_size_++] = node; }
  reclaimable* pop_reclaimable() noexcept { return reclaim_[--reclaim_size_]; }

  // The owner's wait, off the pool: runs every job it handed out that no
  // worker has started, newest first, counting them in local_ (as a job it
  // runs inside its own wait). A job run here may run() more: they go on
  // the stack (while it has room) and are taken back too.
  void take_back() noexcept {
    const void* outer = detail::tl_task_group_in_wait;
    detail::tl_task_group_in_wait = this;
    std::int64_t left_queued = 0;  // jobs taken back whose queue entries still hold them
    while (reclaim_size_ != 0) {
      reclaimable* n = pop_reclaimable();
      if (const int got = n->claim_for_owner(); got >= 0) {
        left_queued += got;
        n->apply(n, reclaimable::act::run);
      }
      n->release();
    }
    // account_ was set by the run() that filled the stack's first slot.
    if (left_queued != 0) account_->left_in_queue(left_queued);
    detail::tl_task_group_in_wait = outer;
  }

  // ---- the count of jobs run() and not finished ----------------------------
  //
  // Two words. local_ is written only by the thread that created the group
  // (owner_): +1 for each job it run()s, -1 for each job of the group it
  // finishes *inside its own wait()* - then it is the only thread that
  // waits, and it reads its own word. remote_ counts everything else, in
  // its bits 2-31: -4 for each run() on another thread, +4 for each job
  // finished anywhere but inside the owner's wait(). Bits 0 and 1 say that
  // a waiter sleeps on the word (below); steps of 4 never change them, so
  // the count may wrap (it is compared modulo 2^30). Pending jobs = local_ -
  // remote_ / 4.
  //
  // Who a finish wakes. A waiter that is not the owner cannot tell from
  // remote_ alone whether a finish was the last (local_ is the owner's), so
  // it sleeps with every_finish_bit and each finish wakes it to look. The
  // owner first moves its own count into remote_ (local_ to 0, remote_ less
  // 4 * local_: the same number pending), so that remote_ reaching 0 means
  // every job finished, and sleeps with last_finish_bit: only the finish
  // that brings the count to 0 wakes it. (With every finish waking it, an
  // owner off the pool waiting for 8 jobs was woken and parked again up to
  // 8 times: 12.6 futex calls per group, docs/PERFORMANCE.md.)
  //
  // Why a waiter that reads remote_ first (acquire) and local_ second sees
  // no job finished that it does not also see run(): a job counted in
  // local_ and finished elsewhere was run() (the store to local_) before it
  // was enqueued, so its finish() RMW, which the acquire load reads, comes
  // after that store, and the load of local_ that follows sees it. A job
  // counted only in remote_ has its run() before its finish() in the one
  // modification order of remote_. And a job counted only in local_
  // changes local_ only on the waiting thread itself. So each job adds 1
  // (seen run, not seen finished) or 0, never -1, and the difference is 0
  // only when every job run() before wait() began has finished.

  static constexpr std::uint32_t every_finish_bit = 1U;  // a waiter that is not the owner sleeps
  static constexpr std::uint32_t last_finish_bit = 2U;   // the owner sleeps, its count moved into remote_
  static constexpr std::uint32_t sleeper_bits = every_finish_bit | last_finish_bit;
  static constexpr std::uint32_t remote_step = 4U;

  // The address of a thread_local names the calling thread (owner_).
  static const void* this_thread_tag() noexcept { return &detail::tl_task_group_in_wait; }

  // `owner`: run() is on the owner's thread.
  void count_spawn(bool owner) noexcept {
    if (owner) {
      // Only the owner writes local_. relaxed: the enqueue that follows
      // publishes the job, and a waiter orders this store before the job's
      // finish() through it (see above).
      local_.store(local_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      // relaxed: as above; the job's finish() comes after this RMW in
      // remote_'s modification order.
      remote_.fetch_sub(remote_step, std::memory_order_relaxed);
    }
  }

  void finish() noexcept {
    THREAD_SYSTEM_CHAOS_POINT();
    if (detail::tl_task_group_in_wait == this) {
      // The owner runs the job inside its own wait(): the waiter is this
      // thread. release: for a later waiter on another thread that acquires
      // local_ (its own synchronisation with this thread orders it anyway).
      local_.store(local_.load(std::memory_order_relaxed) - 1, std::memory_order_release);
      return;
    }
    // acq_rel: the job's writes happen-before the waiter's acquire load
    // that sees the count reach zero (chains of finish() carry every
    // earlier job's writes through the RMW order). This RMW is the last
    // access to *this: the futex wake only names the address, so the
    // waiter may already have destroyed the group.
    const std::uint32_t old = remote_.fetch_add(remote_step, std::memory_order_acq_rel);
    if ((old & sleeper_bits) != 0 && ((old & every_finish_bit) != 0 || ((old + remote_step) & ~sleeper_bits) == 0)) {
      detail::futex_wake(remote_, detail::futex_wake_all);
    }
  }

  // `remote`: remote_ as the caller loaded it, with acquire - which keeps
  // the load of local_ below after it (see above).
  [[nodiscard]] bool finished_at(std::uint32_t remote) const noexcept {
    // acquire: pairs with finish()'s release store (a job the owner ran).
    const std::uint32_t local = local_.load(std::memory_order_acquire);
    return static_cast<std::uint32_t>(local * remote_step) == (remote & ~sleeper_bits);
  }

  [[nodiscard]] bool all_finished() const noexcept {
    return finished_at(remote_.load(std::memory_order_acquire));  // pairs with finish()'s release RMW
  }

  // Sleeps until a finish wakes it (or limit_ns passes; -1: until woken),
  // announcing itself in a sleeper bit first (see "Who a finish wakes").
  // Only remote finishes can bring the count to zero while the waiter
  // sleeps: local_ falls only on the waiting thread itself.
  void park(std::int64_t limit_ns) noexcept {
    std::uint32_t v = remote_.load(std::memory_order_acquire);  // pairs with finish()
    if (finished_at(v)) return;
    std::uint32_t bit = every_finish_bit;
    if (this_thread_tag() == owner_) {
      bit = last_finish_bit;
      // The owner is the only writer of local_ and the only waiter (one at
      // a time), so nothing reads local_ meanwhile. relaxed load and store:
      // this thread's own word. acq_rel: as any RMW of remote_, it joins
      // the finishes' release sequence and reads the latest count.
      const std::uint32_t local = local_.load(std::memory_order_relaxed);
      if (local != 0) {
        local_.store(0, std::memory_order_relaxed);
        v = remote_.fetch_sub(local * remote_step, std::memory_order_acq_rel) - local * remote_step;
        if ((v & ~sleeper_bits) == 0) return;  // every job finished meanwhile
      }
    }
    // acq_rel: as above; the futex compares the word with v | bit
    // atomically, so a finish after this CAS that should wake the waiter
    // makes the wait return at once. acquire on failure: the caller
    // re-reads and re-checks.
    if ((v & bit) == 0 &&
        !remote_.compare_exchange_strong(v, v | bit, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return;
    }
    if (limit_ns < 0) {
      detail::futex_wait(remote_, v | bit);
    } else {
      detail::futex_wait_for(remote_, v | bit, limit_ns);
    }
  }

  // The waiter's slow path: the one helping wait (sync/helping_wait.hpp).
  void wait_for_jobs() {
    // Only the owner marks a group, so this is the owner inside its own
    // wait: a job of this group (run there) waiting for it.
    if (detail::tl_task_group_in_wait == this) [[unlikely]]
      refuse_waiting_for_itself();
    // Marks this group as waited for by its owner on this thread (jobs of
    // the group it runs meanwhile count in local_), and on the way out,
    // exception or not, restores the outer mark and clears the sleeper bits
    // (left set, they would only cost later finishes a futex wake each).
    // The helping wait runs jobs through the pool's guarded path, which
    // lets no exception out; the scope makes that no precondition here.
    struct scope {
      task_group* group;
      const void* outer;
      bool owner;
      ~scope() {
        if (owner) detail::tl_task_group_in_wait = outer;
        group->clear_sleeper_bits();
      }
    } mark{this, detail::tl_task_group_in_wait, this_thread_tag() == owner_};
    if (mark.owner) detail::tl_task_group_in_wait = this;
    (void)detail::helping_wait([this] { return all_finished(); }, [this](std::int64_t limit) { park(limit); }, 0);
  }

  // Out of line: inside wait_for_jobs(), the throw's code kept GCC from
  // inlining it into wait() (fib 0.88-0.94x, docs/PERFORMANCE.md).
  [[noreturn]] THREAD_SYSTEM_NOINLINE static void refuse_waiting_for_itself() {
    throw error_exception(error{error_code::invalid_argument,
                                "task_group::wait: called inside a wait of the same group on this thread "
                                "(from one of its jobs, it would wait for itself)"});
  }

  // Only the waiter sets the bits, and there is one waiter at a time.
  // relaxed: nothing is published with them.
  void clear_sleeper_bits() noexcept {
    if ((remote_.load(std::memory_order_relaxed) & sleeper_bits) != 0) {
      remote_.fetch_and(~sleeper_bits, std::memory_order_relaxed);
    }
  }

  // The first failure: claimed by one job (CAS), written, then published;
  // wait() takes error_ only once it is published.
  enum : std::uint8_t { none, claimed, published };
  void record(std::exception_ptr e) noexcept {
    std::uint8_t expected = none;
    // acquire: pairs with wait()'s release store of `none` (its read of
    // error_ is over); exactly one job then writes error_.
    if (failed_.compare_exchange_strong(expected, claimed, std::memory_order_acquire, std::memory_order_relaxed)) {
      error_ = std::move(e);
      failed_.store(published, std::memory_order_release);  // pairs with the acquire in wait()
    }
  }

  thread_pool& pool_;
  const void* const owner_ = this_thread_tag();  // the creating thread (the only writer of local_)
  std::atomic<std::uint32_t> local_{0};          // see "the count" above
  std::atomic<std::uint32_t> remote_{0};         // likewise
  std::atomic<std::uint8_t> failed_{none};
  std::atomic<bool> cancelled_{false};             // a job of the group was discarded unrun (see group_job::cancel())
  std::uint8_t reclaim_size_ = 0;                  // the owner's stack (see "Taking jobs back")
  detail::taken_back_account* account_ = nullptr;  // the pool's, once the owner kept a job off the pool
  std::exception_ptr error_;
  std::array<reclaimable*, reclaim_depth> reclaim_;  // the first reclaim_size_ are set
};

}  // namespace thread_system
