// pool_front: what thread_pool and typed_thread_pool_t<T> share - their
// lifecycle, workers' threads, observation and timers - over one scheduler
// core (src/pool_core.hpp), which this header does not show.
//
// Both pools derive from detail::pool_front, so every member below is a
// member of both with one meaning: a typed pool pauses, resizes, pins its
// workers and reports exactly as a thread_pool does (a typed pool's
// start(), resize() and get_workers() add their type checks on top; see
// typed_thread_pool.hpp). The promises of each member are those written
// here; thread_pool.hpp's header comment has the pool's whole contract.
//
// The core (one worker loop, parking, stealing, helping, admission and
// accounting) is reached only through this class's protected members: a
// front pushes jobs, adds workers and reads counters there, and nothing
// else of the core is visible to either pool.
//
// Threading: every member may be called from any thread at any time, except
// that stop(), wait_idle() and the destructor must not be called from one
// of the pool's own workers (stop() and wait_idle() throw
// `error_exception{invalid_argument}` if they are; so do they from a job
// that stop() runs on its calling thread, and from the code of a job that
// the pool discards on the calling thread - its cancel hook or destructor,
// or a coroutine its cancellation resumes, under stop(cancel_pending) or
// backpressure::drop_oldest), and stop() not from the pool's
// timer thread (a timer's function that backpressure::caller_runs ran
// there: stop() throws invalid_argument and stops nothing). The pool's
// error handler must not destroy the pool: it may run on another pool's
// thread while a spawned task's failure report holds the pool (the
// destructor waits for that report, which waits for the handler).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/core/stop_mode.hpp"
#include "thread_system/detail/native_thread.hpp"
#include "thread_system/pools/backpressure.hpp"
#include "thread_system/pools/pool_options.hpp"
#include "thread_system/scheduler/injector.hpp"
#include "thread_system/scheduler/timer_handle.hpp"
#include "thread_system/scheduler/worker_statistics.hpp"

namespace thread_system {

class thread_worker;

/// A worker thread's platform handle (native_handle()).
using native_thread_handle = detail::native_thread_handle;

namespace detail {

class pool_core;
class pool_front;
class pool_timers;
class pool_worker;

// The pool and worker running on this thread: a worker's own for its whole
// life, or a stopping pool's caller runner while the stopping thread runs
// the jobs left behind (nulls elsewhere). Set and restored in
// src/pool_core.cpp (worker_main(), run_left_behind()). A caller runner's
// context links the one it replaced (`outer`): a worker of pool B that
// stops pool A runs A's jobs as A's caller runner and is still B's worker
// for B's refusals and pushes. In the header so that is_worker_thread() -
// asked by task_group::run() on every group - is a thread-local load and a
// compare (and, off a worker, one more load).
struct worker_context {
  const pool_core* pool = nullptr;
  pool_worker* worker = nullptr;
  const worker_context* outer = nullptr;  // the context a caller runner replaced, or null
};
inline thread_local worker_context tl_context;

// This thread's context for `pool` (the innermost), or null when this thread
// is neither one of its workers nor running its jobs left behind.
[[nodiscard]] inline const worker_context* context_of(const pool_core* pool) noexcept {
  if (tl_context.pool == pool) return &tl_context;
  for (const worker_context* c = tl_context.outer; c != nullptr; c = c->outer) {
    if (c->pool == pool) return c;
  }
  return nullptr;
}

// For parallel_for's lazy splitting (src/pool_core_steal.cpp): true when work
// handed to `pool` by the calling thread has all been taken - on a worker of
// `pool`, its own deque and LIFO slot are empty; on any other thread, the
// pool's queue is empty - so an idle worker would find nothing to steal
// from us.
[[nodiscard]] bool nothing_left_to_steal(const pool_front& pool) noexcept;

// Pieces a parallel_for or parallel_reduce caller from outside took back
// (ran itself, off the pool) whose entries are still in this pool's queue,
// waiting for a worker to pop them and find them taken (parallel_split.hpp;
// a task_group's owner leaves nothing behind: owner_slot below). A caller
// hands out a piece it may take back only while these, plus its own
// `outstanding` pieces (handed out and not yet taken back or seen taken,
// and those it took back but has not counted here yet), are below
// `limit`, and runs it itself otherwise: so a caller that keeps taking
// back from a busy or paused pool leaves at most `limit` such entries
// behind, whatever the grain, not one per piece (several callers at once:
// at most `limit` plus the others' outstanding pieces).
// Kept by the core (it outlives the front while it drains). relaxed
// throughout: a bound on memory, it publishes nothing; a taker adds after
// the entry may have left, so `queued` can dip below 0 for a moment. A
// cache line of its own: takers and workers write it, and nothing read on
// every job may share it.
struct alignas(64) taken_back_account {
  std::atomic<std::int64_t> queued{0};
  std::int64_t limit = 0;  // 1024, at most a quarter of the capacity of a bounded pool (backpressure, or its ring)

  [[nodiscard]] bool full(std::int64_t outstanding = 0) const noexcept {
    return queued.load(std::memory_order_relaxed) + outstanding >= limit;
  }
  // `n` pieces taken back by their caller: their entries stay queued.
  void took_back(std::int64_t n = 1) noexcept {
    if (n != 0) queued.fetch_add(n, std::memory_order_relaxed);
  }
  // An entry found taken, leaving the queue.
  void left_queue() noexcept { queued.fetch_sub(1, std::memory_order_relaxed); }
};
[[nodiscard]] taken_back_account& taken_back_of(pool_front& pool) noexcept;

// Where a task_group's creating thread, off the pool's workers, keeps the
// first jobs it run()s after each wait (task_group.hpp, *Jobs kept within
// reach*): a slot of the pool's that the group leases until its wait. The
// owner publishes its jobs in order with a store (no read-modify-write);
// thieves - the pool's idle workers, and a waiter on another thread - take
// the oldest, and the owner in its wait the newest, one job at a time, each
// inside the slot's lease (a CAS from `held` to `inside` and a store back:
// a spin lock whose holder only moves a pointer), so workers keep taking
// jobs while the owner runs the ones it took back. The owner then closes
// the slot and gives it back. The pool has owner_slot_count of them, made
// by its first lease (a group that finds none free hands its jobs to the
// pool's queue as any other thread does). Whoever takes a job runs it and
// frees it (owner_job::run). A line of its own per slot: the owner writes
// its words on each run().
struct owner_job {
  void (*run)(owner_job*) noexcept;  // runs the job, then frees it
};
struct alignas(64) owner_slot {
  static constexpr std::uint32_t depth = 16;
  enum : std::uint32_t { free_slot = 0, held = 1, closing = 2, inside = 3 };
  std::atomic<std::uint32_t> state{free_slot};
  // jobs[taken, published) wait to be taken. `published` is written only by
  // the holder: raised by publish(), lowered inside the lease when it takes
  // a job back. `taken` is written only inside the lease.
  std::atomic<std::uint32_t> published{0};
  std::atomic<std::uint32_t> taken{0};
  std::array<owner_job*, depth> jobs{};  // written by the holder before `published` covers them

  // Jobs published and not taken, the slot not closing. relaxed: a hint
  // for thieves and idle workers; a taker re-reads inside the lease. An idle
  // worker's look is ordered against the owner's publish like a deque's:
  // the owner's light fence after it, the sleeper's heavy one before the
  // look (pool_core::wake_worker_if_needed()).
  [[nodiscard]] bool has_work() const noexcept {
    return state.load(std::memory_order_relaxed) != closing &&
           published.load(std::memory_order_relaxed) != taken.load(std::memory_order_relaxed);
  }
  // The holder, with room (published < depth). release: the job's body is
  // written before a thief's acquire load of `published` sees it.
  void publish(owner_job* job) noexcept {
    const std::uint32_t n = published.load(std::memory_order_relaxed);  // only the holder writes it
    jobs[n] = job;
    published.store(n + 1, std::memory_order_release);
  }
  // A thief: the oldest job not taken, or null (none, the owner closing,
  // another taker inside: look again later, or refused() - asked inside
  // the lease, after the job's publication was acquired - returned true).
  template <typename Refused>
  [[nodiscard]] owner_job* steal(Refused refused) noexcept {
    if (!has_work() || !try_enter()) return nullptr;
    owner_job* job = nullptr;
    const std::uint32_t t = taken.load(std::memory_order_relaxed);       // written only inside the lease
    if (t != published.load(std::memory_order_acquire) && !refused()) {  // acquire: pairs with publish()
      job = jobs[t];
      taken.store(t + 1, std::memory_order_relaxed);  // published by leave()
    }
    leave();
    return job;
  }
  // The holder: the newest job no thief took, or null when none is left.
  [[nodiscard]] owner_job* take_newest() noexcept;  // src/pool_core_steal.cpp
  // The holder, with the slot full (published == depth): true when every
  // job in it was taken, and then its room is back.
  [[nodiscard]] bool make_room() noexcept;  // src/pool_core_steal.cpp
  // The holder, after take_newest() returned null: keeps thieves out from
  // here on (waiting for one inside). `taken` is then final.
  void close() noexcept { change_from_held(closing); }
  // The holder gives the slot back, closing it first if it has not: a thief
  // may be inside even a slot never published to (it read a previous
  // holder's words, then its CAS found the slot held), and its leave()
  // must not land on a slot given back.
  // release: pairs with the next holder's acquire in lease_owner_slot().
  void give_back() noexcept {
    if (state.load(std::memory_order_relaxed) != closing) close();  // only the holder stores `closing`
    published.store(0, std::memory_order_relaxed);
    taken.store(0, std::memory_order_relaxed);
    state.store(free_slot, std::memory_order_release);
  }

 private:
  // acquire: pairs with leave()'s release (the previous taker's words) and,
  // through the release sequence of the lease's CAS, with give_back().
  [[nodiscard]] bool try_enter() noexcept {
    std::uint32_t expected = held;
    return state.compare_exchange_strong(expected, inside, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void enter() noexcept { change_from_held(inside); }
  // The holder: the state from `held` to `to`, retried while a taker is
  // inside (acquire, as try_enter()).
  void change_from_held(std::uint32_t to) noexcept;  // src/pool_core_steal.cpp
  // release: pairs with the next taker's try_enter() and with close().
  void leave() noexcept { state.store(held, std::memory_order_release); }
};
inline constexpr std::size_t owner_slot_count = 8;
// A free slot of `pool`'s, now held by the caller; null when every slot is
// held, stop() has begun, or the pool's workers do not steal (typed pools).
[[nodiscard]] owner_slot* lease_owner_slot(pool_front& pool) noexcept;
// After a publish: wakes a worker if none is awake to look (as a push does).
// Runs the light side of the asymmetric fence first (detail/asymmetric_fence.hpp),
// so the caller's loads after it are ordered after its publish.
void wake_for_owner_slot(pool_front& pool) noexcept;

// How a front builds its core.
struct core_config {
  std::string name;
  // What the pool is, for messages: "<kind> '<name>': ..." (a literal).
  const char* kind = "thread_pool";
  std::unique_ptr<injector> queue;  // never null
  std::uint32_t latency_sample_every = 32;
  error_handler on_error;
  thread_system::backpressure bounds{};
  std::size_t worker_stack_size = 0;
  std::chrono::nanoseconds idle_wait{detail::idle_yield_ns};  // negative: refused by the core's constructor
  // false: producers never push to a worker's deque (every job goes through
  // the injector, which knows its kind and priority); a worker's deque only
  // holds the rest of a batch of the highest kind it serves, and workers do
  // not steal. The typed pool's scheduling.
  bool local_deques = true;
  // Makes the workers resize() adds (null: plain thread_workers).
  std::unique_ptr<thread_worker> (*make_worker)() = nullptr;
};

// invalid_argument: `q` is no pool_queue (a value cast from another number);
// `kind` names the pool ("thread_pool").
[[nodiscard]] unexpected_error unknown_queue_kind(const char* kind, pool_queue q) noexcept;

// The settings both pools' options share (pool_options,
// typed_pool_options<T>), around the injector `queue`.
template <typename Options>
[[nodiscard]] core_config core_config_of(const Options& o, std::string name, std::unique_ptr<injector> queue) {
  core_config c;
  c.queue = std::move(queue);
  c.name = std::move(name);
  c.latency_sample_every = o.latency_sample_every;
  c.on_error = o.on_error;
  c.bounds = o.backpressure;
  c.worker_stack_size = o.worker_stack_size;
  c.idle_wait = o.idle_wait;
  return c;
}

// The active workers (those resize() has not asked to leave or set aside):
// how many, and the union of their responsibility masks, of all and of the
// first `first_n` in the order added (the ones resize(first_n) keeps).
struct worker_masks {
  std::uint64_t all = 0;
  std::uint64_t first_n = 0;
  std::size_t active = 0;
};

/// The members thread_pool and typed_thread_pool_t<T> share (see the header comment).
class pool_front {
 public:
  /// The most workers a pool has.
  static constexpr std::size_t max_workers = detail::max_workers;
  /// Jobs a worker takes from its LIFO slot in a row before it runs the
  /// oldest job of its deque (see thread_pool.hpp, "Scheduling").
  static constexpr std::uint32_t lifo_slot_budget = 3;

  /// Not copyable.
  pool_front(const pool_front&) = delete;
  /// Not copyable.
  pool_front& operator=(const pool_front&) = delete;

  /// Starts the workers added so far, all or none. `already_started`,
  /// `pool_stopped` after stop(), `invalid_argument` without workers,
  /// `resource_exhausted` when the OS refuses a thread (none runs then).
  result<void> start();
  /// The workers in the order added (pointers valid until the pool is destroyed).
  [[nodiscard]] std::vector<thread_worker*> get_workers() const;

  // ---- threads ----------------------------------------------------------------

  /// Pins worker `worker` (index in get_workers()) to `cpus` (Linux).
  /// `invalid_argument` for a worker that is not running or a CPU that does
  /// not exist (above the highest possible CPU number), is offline or is
  /// outside the process's cpuset (the worker's CPUs are then unchanged: all
  /// or nothing); `not_supported` where the platform cannot do it, the OS
  /// refuses or the new mask cannot be read back to check it;
  /// `resource_exhausted` without memory for a mask wider than 1024 CPUs. Worker threads are named "<pool
  /// name>-<index>" (or the worker's own name) for the OS.
  result<void> set_affinity(std::size_t worker, std::span<const int> cpus);
  /// Sets worker `worker`'s nice level (-20..19; Linux, per thread). Raising
  /// priority needs privileges: `not_supported` with the OS's reason.
  result<void> set_nice(std::size_t worker, int nice);
  /// The platform handle of worker `worker`'s thread (pthread_t on Linux and
  /// macOS), for platform calls the pool does not wrap. Valid from start()
  /// (or the resize() that started it) until the thread is joined: by
  /// stop(), or by a later resize() that brings the worker back (a resize()
  /// that removes a worker lets its thread end and joins it only then);
  /// using it after that is undefined, as std::thread::native_handle()
  /// after join().
  /// `invalid_argument` when `worker` is not an index into get_workers() or
  /// that worker is not running (before start(), after stop(), or removed by
  /// resize()).
  [[nodiscard]] result<native_thread_handle> native_handle(std::size_t worker) const;

  // ---- lifecycle -----------------------------------------------------------

  /// Pauses the pool: jobs are still accepted, but none starts until
  /// resume(); jobs already running finish. Idle workers park (≈0% CPU).
  /// stop(drain) on a paused pool resumes it and runs everything queued;
  /// wait_idle() on a paused pool with queued jobs waits for resume().
  /// Exceptions: a job a worker had already taken when pause() was called
  /// may still start; backpressure::caller_runs runs jobs on the submitting
  /// thread. A worker leaving after resize() takes the jobs on its own deque
  /// and holds them (and their backpressure room) until resume(). Fork-join
  /// children not yet started are held too: a task_group::wait() or a
  /// parallel_for waiting for them waits until resume() (parallel_for.hpp,
  /// *Pause*); a job that pauses its own pool must not wait for its forks.
  void pause() noexcept;
  /// Ends pause(): queued jobs start again and parked workers are woken.
  void resume() noexcept;
  /// True between pause() and resume().
  [[nodiscard]] bool is_paused() const noexcept;

  /// Blocks until the pool is idle: every accepted job has finished (or
  /// been cancelled) - those accepted before the call and those accepted
  /// while it waits (jobs that submit more, other producers), so a pool that
  /// never runs dry (a job that resubmits itself, a steady producer) keeps
  /// it waiting. Returns at once on a pool that was never started.
  void wait_idle();

  /// Stops the pool (see stop_mode): the timers first (drain dispatches
  /// one-shot timers already due, every other timer is cancelled), then the
  /// workers, which are joined. Idempotent: later calls return the same
  /// report. On a pool that was never started, drain runs the pending jobs
  /// on the calling thread. From the moment stop() is called a full bounded
  /// pool refuses instead of blocking (`pool_stopped`): a producer blocked
  /// for room, a timer's run among them, gives up. Like running jobs, the
  /// code of a job that backpressure::drop_oldest is discarding on a
  /// producer thread (its cancel hook, its destructor) is waited for, and
  /// the job counted as cancelled; so is a job that backpressure::
  /// caller_runs runs on a producer thread, counted as executed. The report counts the
  /// jobs finished by then: a job whose own code calls stop() (one that
  /// caller_runs runs on a producer thread) is in neither its accepted nor
  /// its executed count; get_statistics() counts it once it returns.
  stop_report stop(stop_mode mode = stop_mode::drain);

  /// True from a successful start() (or the concise constructor) until stop() begins.
  [[nodiscard]] bool is_running() const noexcept;
  /// True once stop() has finished.
  [[nodiscard]] bool is_stopped() const noexcept;

  /// Changes the number of workers to `n` (1..256), under load. Growing
  /// starts workers at once (reusing ones that left earlier). Shrinking
  /// asks the newest workers to leave: each finishes the job it is running
  /// and the jobs on its own deque first, so nothing is lost and no worker
  /// exits mid-job; resize() does not wait for that. Before start() it sets
  /// how many workers start() starts: the newest are set aside (not
  /// destroyed: get_workers() still lists them) until a later resize()
  /// takes them back. `invalid_argument` for 0 or more than
  /// 256; `pool_stopped` after stop(); `resource_exhausted` when the OS
  /// refuses a thread (nothing changes: the threads made for this call are
  /// joined before they run a job, and the pool keeps its previous size).
  result<void> resize(std::size_t n);

  // ---- observation ----------------------------------------------------------

  /// A snapshot of the pool's counters (see worker_statistics.hpp for its consistency).
  [[nodiscard]] pool_statistics get_statistics() const;
  /// Wait and run times of sampled jobs, merged over all workers (see
  /// pool_options::latency_sample_every).
  [[nodiscard]] worker_latency latency() const;
  /// Workers in the pool, not counting those resize() asked to leave.
  /// After stop() the workers are still counted (their threads ended).
  [[nodiscard]] std::size_t worker_count() const;
  /// True when the calling thread is one of this pool's workers.
  [[nodiscard]] bool is_worker_thread() const noexcept { return context_of(core_.get()) != nullptr; }
  /// The pool's name (its options' name, or the seed-style constructor's argument).
  [[nodiscard]] const std::string& get_name() const noexcept;
  /// Replaces the failure handler (null restores the default stderr line).
  void set_error_handler(error_handler handler);
  /// Timers scheduled, fired, cancelled (including by stop()), skipped.
  [[nodiscard]] timer_statistics get_timer_statistics() const;

 private:
  friend bool nothing_left_to_steal(const pool_front& pool) noexcept;
  friend taken_back_account& taken_back_of(pool_front& pool) noexcept;
  friend owner_slot* lease_owner_slot(pool_front& pool) noexcept;
  friend void wake_for_owner_slot(pool_front& pool) noexcept;

  // Owned, never null.
  std::unique_ptr<pool_core, void (*)(pool_core*)> core_;

 protected:
  // Builds the core (not started). Throws error_exception: invalid_argument
  // for a bad backpressure setting, resource_exhausted out of memory.
  explicit pool_front(core_config config);
  // stop_for_destructor().
  ~pool_front();
  // For the pools' destructors: stop(stop_mode::drain) unless stopped, then
  // retire_spawn_key(). On one of the pool's own workers (the last owner
  // dropped the pool inside a job), on its timer thread, or inside a call
  // into the core that runs a job's code on the calling thread: the timers
  // and the spawn key end here, and the core is orphaned (drained, then
  // freed by its last worker) once that code's call returns (see
  // thread_pool.hpp and pool_core::orphan()). Idempotent.
  void stop_for_destructor() noexcept;

  // Any job: onto this worker's deque when called from a worker of a pool
  // with local deques, else through the injector. `invalid_argument` for an
  // empty job, `resource_exhausted` out of memory.
  result<void> push_one(job_function&& fn);
  // All or none; `invalid_argument` when one is empty.
  result<void> push_batch(std::span<job_function> fns);
  // A coroutine's resumption from one of this pool's workers: into that
  // worker's LIFO slot, run as soon as its current job returns, no worker
  // woken (see thread_pool.hpp, "Scheduling"); otherwise as push_one().
  result<void> push_continuation(job_function&& fn);
  // A fork-join piece (detail::fork_access: a task_group child, a
  // parallel_for half) from one of this pool's workers: onto that worker's
  // deque, past its LIFO slot; otherwise as push_one().
  result<void> push_fork(job_function&& fn);
  // Into `target` - the pool's injector (the job's tag routes it), or a
  // queue inside it that the injector counts and closes as its own (the
  // typed injector's queue of the job's kind: typed_injector::direct_queue(),
  // one virtual call fewer) - waking a worker that serves `kind_mask`. The
  // same admission, accounting and refusals either way. Non-empty jobs; out
  // of memory throws std::bad_alloc.
  result<void> push_routed(std::uint64_t kind_mask, injector& target, job_function&& fn);
  // A batch through the injector, all or none, as push_routed(); an empty
  // batch as push_batch() answers it.
  result<void> push_routed_batch(std::uint64_t kind_mask, std::span<job_function> fns);
  // invalid_argument naming the first empty job of `fns` (push_batch()'s
  // refusal, for a front that checks before routing), or ok.
  [[nodiscard]] result<void> refuse_empty_jobs(std::span<const job_function> fns) const noexcept;

  // Adds workers (they start at once on a running pool), all or none.
  result<void> add_workers(std::vector<std::unique_ptr<thread_worker>> workers);
  // True once stop() has begun.
  [[nodiscard]] bool stop_begun() const noexcept;
  // "<kind> '<name>'" ("typed_thread_pool 'jobs'"), the start of the pool's
  // messages; throws std::bad_alloc.
  [[nodiscard]] std::string named() const;
  // The pool_stopped refusal of a pool whose stop() has begun (never throws).
  [[nodiscard]] unexpected_error stopped_error() const noexcept;
  // Allocates nothing.
  [[nodiscard]] worker_masks active_worker_masks(std::size_t first_n = 0) const;
  // Passes `e` to the error handler (a coroutine that failed, say).
  void report_failure(const std::exception_ptr& e) noexcept;
  // The key spawned tasks find this pool under while it exists
  // (coro/spawn.hpp, src/spawn_registry.cpp), registered on first use;
  // resource_exhausted out of memory.
  [[nodiscard]] result<std::uint64_t> spawn_key() noexcept;
  // Leaves the registry, waiting for every spawn_pin on this pool to go.
  // Each pool's destructor calls it once stopped, while the whole pool
  // still exists (the pinned reports push into it); idempotent.
  void retire_spawn_key() noexcept;

  // Puts a built timer (detail::timer_after() and friends) on the pool's
  // timer queue, created on first use with `target` as its dispatch, its
  // thread named after the pool. pool_stopped once stop() began ("<kind>
  // '<name>' is stopped"), checked before the timer's own refusal;
  // resource_exhausted when the timer thread cannot start or memory runs out.
  result<timer_handle> add_timer(timer_routed_dispatch target, built_timer&& timer);

 private:
  // The pool's timers (src/pool_timers.hpp). Their runs go into the core:
  // declared after core_, so destroyed (their thread joined) before it.
  std::unique_ptr<pool_timers> timers_;
  // 0 until the first spawn() (spawn_key()).
  std::atomic<std::uint64_t> spawn_key_{0};
};

}  // namespace detail

}  // namespace thread_system
