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
//     a full pool's job runs on the calling thread (backpressure.hpp). The
//     jobs the group's creating thread keeps within reach (below) hold no
//     room and are never refused, evicted or discarded.
//   * wait() returns when every job run() so far has finished; on a worker
//     it helps run other jobs meanwhile (with the locks the waiting code
//     holds held: hold none that another job of the pool may take, see
//     sync/helping_wait.hpp, *Locks*). Off the pool's workers, the group's
//     creating thread keeps the first 16 jobs it run()s after each wait
//     within reach: in a slot of the pool's (8 per pool) that idle workers
//     take them from, oldest first, and that its wait() takes back from:
//     one at a time, newest first, it runs each job no worker has taken
//     yet, as parallel_for's caller does, while idle workers go on taking
//     the oldest; it runs no other job. So its wait does not sleep while
//     those jobs wait for a worker (all busy, or the pool paused). Idle
//     workers look at the slots last, after their deques, the queue and
//     stealing: while the pool always has other work, kept jobs wait for
//     the group's wait (do not block on one of them before calling wait()).
//     pause() holds them as it holds any job not yet started: one run()
//     after pause() returned is started only by a wait. Workers take from
//     the slots until stop() begins; stop() neither runs nor cancels what
//     is left there (the pool never counted those jobs: its statistics,
//     wait_idle() and stop()'s report do not include them), the group's
//     wait runs it - on whichever thread waits: another thread's wait takes
//     and runs them as a worker would, also those the owner run()s while
//     that wait sleeps (the owner then wakes it). Such a wait leaves the
//     slot to the group until the owner's next wait or the group's
//     destruction (the owner may be publishing into it); once all 16 jobs
//     in it were taken, the owner's next jobs start again at its first
//     place. When all 8 slots are held, the owner's jobs go to the pool's
//     queue as another thread's do. Everything the jobs did is visible
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
//     error_exception{invalid_argument} when the owner calls it inside its
//     own wait of the same group, at any depth (a job it took back or
//     helped run, or a job run inside another group's wait within that
//     one); on another thread such a wait hangs. The destructor waits too
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
// costs one small node more (recycled: the workers free the nodes and the
// creating thread gets them back in batches, so a steady state of such
// groups calls no malloc - detail/recycling_allocator.hpp; a node larger
// than the recycler's largest class, a capture over about 1 KiB, comes from
// operator new), and handing it over costs the creating thread no
// read-modify-write (a worker that takes it, one CAS on the slot; the
// creating thread one to lease the slot, one per job it takes back, one to
// close it); with no memory for the node, the job goes to the pool as any
// other thread's does. A waiting creating thread
// that sleeps is woken once, by the last job to finish; a wait on another
// thread is woken by each finish while it sleeps, to look again.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/detail/asymmetric_fence.hpp"
#include "thread_system/detail/chaos.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/config.hpp"

#include "thread_system/detail/futex.hpp"
#include "thread_system/detail/recycling_allocator.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/sync/helping_wait.hpp"
#include "thread_system/sync/this_job.hpp"

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
    // Still held only when a thread other than the owner waited: every
    // job was taken and has finished; give the slot back to the pool.
    if (detail::owner_slot* slot = slot_.load(std::memory_order_acquire)) {  // as in wait()
      slot->give_back();
    }
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
    // The owner off the pool keeps its first jobs since its last wait
    // within reach, to take back in wait() what no worker took (see "Jobs
    // kept within reach" below).
    const bool owner = this_thread_tag() == owner_;
    if (owner && has_room_within_reach() && !pool_.is_worker_thread() &&
        keep_within_reach<std::decay_t<F>>(std::forward<F>(f)))
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
      run_without_token(job);
      return;
    }
    count_spawn(owner);
    // A refused job_function is left untouched (see thread_pool::enqueue),
    // so the group runs it here instead of losing it.
    // From one of the pool's workers the job goes onto that worker's deque,
    // past its LIFO slot (detail::fork_access): this thread's wait() pops it
    // back, and a thief takes the oldest job first.
    if (auto r = detail::fork_access::push(pool_, std::move(wrapped)); !r) run_without_token(wrapped);
  }

  /// Waits for every job run() so far; rethrows the first exception.
  void wait() {
    // The owner inside its own wait, at any depth (a job it runs there
    // may wait for other groups, whose waits run more jobs): a job of this
    // group waiting for it. Only the owner reads or writes the flag.
    if (this_thread_tag() == owner_ && owner_waiting_) [[unlikely]]
      refuse_waiting_for_itself();
    // acquire: pairs with keep_within_reach()'s release store (a waiter on
    // another thread, concurrent with the owner's run(), reaches the slot
    // through it).
    if (detail::owner_slot* slot = slot_.load(std::memory_order_acquire)) {
      if (this_thread_tag() == owner_) {
        // Workers took some of the jobs while this thread ran the others:
        // they are running them now, likely short. Look for their finish
        // for a few microseconds before sleeping - a sleep and its wake-up
        // cost more than a short job (docs/PERFORMANCE.md).
        if (take_back(*slot) && !all_finished()) poll_for_finish();
      } else {
        run_as_thief(*slot);
      }
    }
    if (!all_finished()) {
      wait_for_jobs();
      // A job this thread helped run while it waited may have run() jobs of
      // this group into a slot leased after the look above (taken and
      // finished since: the count says so). Give it back, as every wait of
      // the owner does. relaxed: the owner's own word.
      if (this_thread_tag() == owner_) {
        if (detail::owner_slot* slot = slot_.load(std::memory_order_relaxed)) (void)take_back(*slot);
      }
    }
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
      (void)take_cancelled_mark();  // reported by the exception
      std::rethrow_exception(e);
    }
    if (take_cancelled_mark()) {
      throw error_exception(error{error_code::cancelled, "task_group: a job was discarded by the pool before it ran"});
    }
  }

 private:
  // Runs a job of a group on this thread outside the pool's worker loop (no
  // memory to hand it over, a refused push, a job taken from the owner's
  // slot): like every job without a token, it must not see the token of a
  // job this thread is running (sync/this_job.hpp; pool_core::run_guarded()
  // does the same for jobs the workers take from the queue). Out of line:
  // run()'s fork-join path is inlined into its callers, and these are its
  // rare branches.
  template <typename J>
  THREAD_SYSTEM_NOINLINE static void run_without_token(J& job) {
    const this_job::detail::token_scope no_token(nullptr);
    job();
  }

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

  // ---- Jobs kept within reach ----------------------------------------------
  //
  // The first owner_slot::depth jobs the owner run()s since its last wait,
  // while it is not one of the pool's workers, go into a slot of the
  // pool's that the group leases for that time (detail::owner_slot,
  // pools/pool_front.hpp), not into the pool's queue: each a node from the
  // recycling allocator (detail/recycling_allocator.hpp), published with a
  // store. Idle workers look there last, after the deques and the queue,
  // and take the oldest job first, one at a time; in wait() the owner
  // takes back, newest first and one at a time, every job no worker took
  // and runs it (take_back(): workers go on taking the oldest meanwhile,
  // and the owner does not sleep while its jobs wait behind other jobs or
  // in a paused pool), then closes the slot and gives it back. A job taken runs on the taker, which
  // frees its node; the owner frees those it runs. Handing a job over this
  // way costs the owner a store and a look at whether a worker is awake,
  // and a worker one CAS; through the pool's queue it cost two full-barrier
  // read-modify-writes on lines every producer and worker shares (about
  // 0.5 µs of the 1.0 µs a group of 8 empty jobs took, docs/PERFORMANCE.md).
  // A waiter on another thread takes the jobs as a worker does (they must
  // not wait for a stopped or paused pool), and the destructor gives back a
  // slot that such a waiter left held. Why only the first few: a slot is
  // a fixed array, the pool has owner_slot_count of them, and the rest of
  // a large group reaches the workers through the queue in batches (with a
  // node per job a large group had run up to 1.6x slower per job,
  // docs/PERFORMANCE.md).
  //
  // slot_: written only by the owner (release: the slot's array, made by
  // the pool on the first lease, is reached through it; what the slot
  // holds is published through its own words), read by a waiter on
  // another thread (acquire), whose wait begins after the owner's run()s it
  // must see (the contract) - or runs beside them.

  template <typename D>
  struct kept_job final : detail::owner_job {
    template <typename F>
    kept_job(task_group* g, F&& f) : detail::owner_job{&run_and_free}, job{g, D(std::forward<F>(f))} {}
    group_job<D> job;
    // The job records what its body throws; after its finish() it touches
    // only the node, which is its taker's to free. It runs without the
    // token of a job it runs inside (a helping wait in a job submitted with
    // one takes it from the slot).
    static void run_and_free(detail::owner_job* j) noexcept {
      auto* self = static_cast<kept_job*>(j);
      {
        const this_job::detail::token_scope no_token(nullptr);  // (already out of line: a function pointer's target)
        self->job();
      }
      detail::recycled_delete(self);
    }
  };

  // A slot whose 16 jobs were all taken (by workers, or by a wait on
  // another thread, which leaves the slot held) starts again at 0.
  [[nodiscard]] bool has_room_within_reach() noexcept {
    detail::owner_slot* slot = slot_.load(std::memory_order_relaxed);  // the owner's own word
    return slot == nullptr || slot->published.load(std::memory_order_relaxed) < detail::owner_slot::depth ||
           slot->make_room();
  }

  // run() by the owner off the pool, with room. False, with `f` untouched,
  // when no slot is free (or the pool is stopping) or there is no memory
  // for the node: run() then goes on as for any other thread.
  template <typename D, typename F>
  THREAD_SYSTEM_NOINLINE bool keep_within_reach(F&& f) {  // off the fork-join path's code
    detail::owner_slot* slot = slot_.load(std::memory_order_relaxed);
    const bool leased = slot == nullptr;
    if (leased) {
      slot = detail::lease_owner_slot(pool_);
      if (slot == nullptr) return false;
    }
    // A throw from D's construction leaves here with the node freed and
    // nothing counted, as run() promises (and a slot leased here given back).
    kept_job<D>* node = nullptr;
    try {
      node = detail::recycled_new<kept_job<D>>(this, std::forward<F>(f));
    } catch (...) {
      if (leased) slot->give_back();
      throw;
    }
    if (node == nullptr) {
      if (leased) slot->give_back();
      return false;
    }
    if (leased) slot_.store(slot, std::memory_order_release);  // pairs with wait()'s acquire
    count_spawn(true);                                         // before a worker can take the job and finish it
    slot->publish(node);
    detail::wake_for_owner_slot(pool_);
    // Dekker with a wait on another thread (wait_for_jobs()): that waiter
    // sets waiter_elsewhere_, runs the heavy side of the asymmetric fence
    // once, and looks at the slot before each sleep; here the job is
    // published, wake_for_owner_slot() ran the light side, and the flag is
    // read. Either each of its later looks sees this job, or this sees the
    // flag and wakes it to look again. relaxed: ordered by the fence.
    if (waiter_elsewhere_.load(std::memory_order_relaxed)) [[unlikely]]
      nudge_waiter_elsewhere();
    return true;
  }

  // The owner's wait: takes back, newest first and one at a time, every
  // job no worker has taken and runs it, counting it in local_ (as a job it
  // runs inside its own wait); workers go on taking the oldest meanwhile,
  // so the group's jobs still run in parallel. Then it closes the slot and
  // gives it back. A job run here may run() more: they go into the slot
  // while it has room (workers may take them) and are taken back here too.
  // Returns whether workers took any of the jobs.
  bool take_back(detail::owner_slot& slot) noexcept {
    const void* outer = detail::tl_task_group_in_wait;
    const bool outer_waiting = owner_waiting_;
    detail::tl_task_group_in_wait = this;
    owner_waiting_ = true;
    while (detail::owner_job* job = slot.take_newest()) job->run(job);
    slot.close();
    const bool taken_elsewhere = slot.taken.load(std::memory_order_relaxed) != 0;  // final: closed (acquire)
    slot_.store(nullptr, std::memory_order_relaxed);
    slot.give_back();
    owner_waiting_ = outer_waiting;
    detail::tl_task_group_in_wait = outer;
    return taken_elsewhere;
  }

  // Polls the count for up to owner_poll_ns (the clock read every few polls).
  THREAD_SYSTEM_NOINLINE void poll_for_finish() const noexcept {
    const std::uint64_t until = detail::steady_now_ns() + owner_poll_ns;
    do {
      for (int i = 0; i < 16; ++i) {
        detail::cpu_relax();
        if (all_finished()) return;
      }
    } while (detail::steady_now_ns() < until);
  }

  // Inside wait_for_jobs(), before each sleep: the jobs of a slot leased
  // after this wait looked (a job this thread ran while helping another
  // pool run() them here; or, on another thread, the owner run() them
  // concurrently). They must not wait for the pool (stopped, or paused).
  // False when there is nothing to run.
  bool run_kept_jobs_while_waiting(bool owner) noexcept {
    detail::owner_slot* slot = slot_.load(std::memory_order_acquire);  // as in wait()
    if (slot == nullptr) return false;
    if (owner) {
      take_back(*slot);
      return true;
    }
    if (!slot->has_work()) return false;
    run_as_thief(*slot);
    return true;
  }

  // The owner published a job while a wait on another thread goes on (see
  // keep_within_reach()). Clearing the waiter's sleeper bit changes the
  // futex word, so a futex wait it is about to begin on the value with the
  // bit returns at once, and one in progress is woken here. release: a
  // waiter whose CAS (acquire) then sets the bit again reads this RMW or a
  // later one, and its look at the slot that follows sees the job.
  THREAD_SYSTEM_NOINLINE void nudge_waiter_elsewhere() noexcept {
    if ((remote_.fetch_and(~every_finish_bit, std::memory_order_release) & every_finish_bit) != 0) {
      detail::futex_wake(remote_, detail::futex_wake_all);
    }
  }

  // A waiter that is not the owner: takes every job left in the slot and
  // runs it, as a worker would (the slot stays the owner's).
  static void run_as_thief(detail::owner_slot& slot) noexcept {
    int misses = 0;
    while (slot.has_work()) {
      if (detail::owner_job* job = slot.steal([]() noexcept { return false; })) {
        job->run(job);
      } else if (++misses < 64) {
        detail::cpu_relax();  // a worker inside the lease: it only takes a pointer there
      } else {
        std::this_thread::yield();  // one preempted there (as owner_slot::change_from_held())
      }
    }
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
  static constexpr std::int64_t heavy_fence_lost_sleep_ns = 1'000'000;
  static constexpr std::uint64_t owner_poll_ns = 4'000;

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
    if (bit == every_finish_bit) {
      // A wait on another thread: a job the owner published since this
      // wait last looked (see keep_within_reach() and
      // nudge_waiter_elsewhere()). acquire: as in wait().
      const detail::owner_slot* slot = slot_.load(std::memory_order_acquire);
      if (slot != nullptr && slot->has_work()) return;
    }
    if (limit_ns < 0) {
      detail::futex_wait(remote_, v | bit);
    } else {
      detail::futex_wait_for(remote_, v | bit, limit_ns);
    }
  }

  // The waiter's slow path: the one helping wait (sync/helping_wait.hpp).
  void wait_for_jobs() {
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
      bool outer_waiting;
      ~scope() {
        if (owner) {
          detail::tl_task_group_in_wait = outer;
          group->owner_waiting_ = outer_waiting;
        } else {
          // relaxed: a hint for the owner's later run()s (one wait at a time).
          group->waiter_elsewhere_.store(false, std::memory_order_relaxed);
        }
        group->clear_sleeper_bits();
      }
    } mark{this, detail::tl_task_group_in_wait, this_thread_tag() == owner_, false};
    // A wait on another thread: the Dekker pair with keep_within_reach()
    // (see there), whose heavy side runs once per wait. Where it no longer
    // pairs (membarrier refused after registration), the owner may miss the
    // flag: such a wait sleeps at most 1 ms at a time, then looks again.
    std::int64_t longest_sleep = -1;
    if (mark.owner) {
      mark.outer_waiting = owner_waiting_;  // only the owner reads it
      detail::tl_task_group_in_wait = this;
      owner_waiting_ = true;
    } else {
      waiter_elsewhere_.store(true, std::memory_order_relaxed);  // ordered by the heavy fence
      if (!detail::asymmetric_fence_heavy()) longest_sleep = heavy_fence_lost_sleep_ns;
    }
    (void)detail::helping_wait([this] { return all_finished(); },
                               [this, owner = mark.owner, longest_sleep](std::int64_t limit) {
                                 if (run_kept_jobs_while_waiting(owner)) return;
                                 if (longest_sleep >= 0 && (limit < 0 || limit > longest_sleep)) limit = longest_sleep;
                                 park(limit);
                               },
                               0);
  }

  // Whether a job was discarded unrun since the mark was last taken;
  // clears it. A job run() concurrently with this wait may be discarded
  // right now: the clearing is an exchange, so that its mark is either
  // taken here or left for the next wait, never overwritten (a load first:
  // no read-modify-write on a fork-join wait). relaxed: ordered by the
  // acquire in wait() on the count (finish()'s release).
  bool take_cancelled_mark() noexcept {
    return cancelled_.load(std::memory_order_relaxed) && cancelled_.exchange(false, std::memory_order_relaxed);
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
  std::atomic<bool> cancelled_{false};              // a job of the group was discarded unrun (see group_job::cancel())
  std::atomic<detail::owner_slot*> slot_{nullptr};  // held since the owner's first run() after a wait, or null
  bool owner_waiting_ = false;                 // the owner is inside wait() on its thread (read and written only there)
  std::atomic<bool> waiter_elsewhere_{false};  // a wait on another thread is in wait_for_jobs()
  std::exception_ptr error_;
};

}  // namespace thread_system
