// pool_core: the scheduler behind thread_pool and typed_thread_pool_t<T>
// (pools/pool_front.hpp is the only way in). One worker loop (find_and_run:
// LIFO slot, own deque, injector batches, stealing), the wake and parking
// policy (wake groups, spinners), helping waits on workers, admission
// (backpressure), accounting (idle detection, statistics) and the
// lifecycle (start, resize, pause, stop). It knows jobs only as
// job_function and kinds only as the injector's mask bits: the typed pool's
// types, priorities and statistics live in its typed_injector and front.
//
// Where each part is implemented:
//   src/pool_core.cpp             the worker loop (find, run, spin, yield, park)
//   src/pool_core_push.cpp        pushes (LIFO slot, deque, injector), wake-ups
//   src/pool_core_steal.cpp       stealing, task_group owners' slots
//   src/pool_core_admission.cpp   backpressure and refusals
//   src/pool_core_accounting.cpp  failures, idle detection, statistics
//   src/pool_core_lifecycle.cpp   construction, start, resize, pause, stop
//   src/pool_core_frames.cpp      where a pool stopped or destroyed inside its own
//                                 code goes (frames, discard scopes, orphan())
//   src/pool_core_workers.cpp     the workers' list, count and OS threads
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/core/stop_mode.hpp"
#include "thread_system/coro/coro_base.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/detail/job_node.hpp"
#include "thread_system/pools/backpressure.hpp"
#include "thread_system/pools/pool_front.hpp"
#include "thread_system/pools/pool_options.hpp"
#include "thread_system/pools/thread_worker.hpp"
#include "thread_system/scheduler/injector.hpp"
#include "thread_system/scheduler/worker_statistics.hpp"
#include "thread_system/sync/event_count.hpp"

#include "pool_worker.hpp"

namespace thread_system::detail {

// Workers with the same responsibilities park on one event count; a push
// wakes a worker of every group that serves the job's kind. An untyped pool
// has a single group.
struct wake_group {
  explicit wake_group(std::uint64_t m, std::uint32_t spinners) : mask(m), max_spinners(spinners) {}
  // Workers polling the queue before they park. Producers skip the wake-up
  // while one is spinning; at most max_spinners spin at a time.
  alignas(64) std::atomic<std::uint32_t> spinning{0};
  const std::uint64_t mask;
  const std::uint32_t max_spinners;
  event_count work_available;  // the group's workers park here
};

// invalid_argument: a pool of `requested` workers is more than max_workers.
[[nodiscard]] unexpected_error too_many_workers(const char* kind, const std::string& pool_name, std::size_t requested);

// Every member is public to the fronts' implementation (src/pool_front.cpp);
// the class is not visible outside src/.
class pool_core {
 public:
  static constexpr std::size_t max_workers = pool_front::max_workers;
  static constexpr std::uint32_t lifo_slot_budget = pool_front::lifo_slot_budget;

  // See detail::taken_back_of() (pools/pool_front.hpp).
  [[nodiscard]] taken_back_account& taken_back() noexcept { return taken_back_; }

  // Throws error_exception{invalid_argument} for a bad backpressure setting.
  explicit pool_core(core_config config);
  ~pool_core();
  pool_core(const pool_core&) = delete;
  pool_core& operator=(const pool_core&) = delete;

  // The fronts' members, with pool_front's contracts.
  result<void> enqueue_batch(std::vector<std::unique_ptr<thread_worker>> workers);
  result<void> start();
  [[nodiscard]] std::vector<thread_worker*> get_workers() const;
  result<void> set_affinity(std::size_t worker, std::span<const int> cpus);
  result<void> set_nice(std::size_t worker, int nice);
  [[nodiscard]] result<native_thread_handle> native_handle(std::size_t worker) const;
  void pause() noexcept;
  void resume() noexcept;
  [[nodiscard]] bool is_paused() const noexcept;
  void wait_idle();
  // The first step of a stop() that will go ahead (the front calls it
  // before stopping the pool's timers): producers blocked by backpressure
  // (a timer's dispatch among them) give up with pool_stopped, and a full
  // pool no longer makes anyone wait, so nothing stop() waits for can be
  // stuck waiting for room that only stop() would free; and a paused pool
  // resumes (after, with cancel_pending, asking its workers to cancel what
  // they take), so that nothing stop() waits for - a timer's function run
  // on the timer thread, which the next step joins, waiting in wait_idle()
  // or for a future - waits for a resume() that only stop() would make.
  // Idempotent.
  void begin_stop(stop_mode mode) noexcept;
  stop_report stop(stop_mode mode);
  // For a pool destroyed where it cannot be stopped and freed at once (see
  // pool_front::stop_for_destructor(); called after begin_stop()): closes
  // the queue as stop(stop_mode::drain) does, without waiting for anything,
  // and leaves the rest to the last of its workers to leave its loop - that
  // one joins the others, detaches itself, runs what is left and deletes
  // the core (finish_orphaned()); with no worker running, this call does it
  // on the calling thread. Nothing allocates, no thread is started. Nobody
  // may call into the core after this, but its workers and the caller's
  // frames below this call.
  void orphan() noexcept;
  // A call into the core that may run user code on a thread that is not
  // one of its workers: a bounded push (caller_runs runs the job there,
  // drop_oldest a victim's hook and destructor) and stop() (discarded and
  // left-behind jobs). A pool destroyed from inside one (that code dropped
  // its last owner) cannot be freed there: the frames below still use the
  // core. Its destructor marks this thread's outermost frame of the core
  // instead (orphan_to_outermost_frame()), which calls orphan() as it ends.
  // Every frame counts in live_workers_ as a worker does, so an orphaned
  // core is freed only once the last frame on any thread has ended too
  // (two producers whose caller_runs jobs each drop an owner).
  struct frame {
    pool_core* core;
    frame* outer;
    bool finish;
    bool counted_run;  // a caller_runs run of this frame counted in caller_runs_in_flight_
  };
  class frame_scope {
   public:
    explicit frame_scope(pool_core* core) noexcept;
    ~frame_scope();
    frame_scope(const frame_scope&) = delete;
    frame_scope& operator=(const frame_scope&) = delete;

   private:
    frame frame_;
  };
  [[nodiscard]] bool inside_own_frame() const noexcept;
  void orphan_to_outermost_frame() noexcept;
  [[nodiscard]] bool is_running() const noexcept;
  [[nodiscard]] bool is_stopped() const noexcept;
  result<void> resize(std::size_t n);
  [[nodiscard]] pool_statistics get_statistics() const;
  [[nodiscard]] worker_latency latency() const;
  [[nodiscard]] std::size_t worker_count() const;
  void set_error_handler(error_handler handler);

  enum class state : int { created, running, stopping, stopped };

  // How a bounded pool admits a submission from outside its workers: by its
  // backpressure policy, or (a fork-join piece, which its caller runs itself
  // when refused) by taking room only if there is some - never waiting,
  // evicting or running it inline: refused with queue_full instead.
  enum class admission : std::uint8_t { policy, try_only };

  // Pushes through the injector with `push()` (which returns result<void>),
  // then wakes a worker for the kinds in `kind_mask`.
  template <typename Push>
  // `wake`: when given, the push sets it (see injector::push_and_check())
  // and the pool wakes a worker only if it is true.
  result<void> push_external(std::uint64_t kind_mask, std::span<job_function> fns, Push&& push,
                             const bool* wake = nullptr, admission how = admission::policy) {
    // The top tag bit is the pool's: a job never arrives holding room.
    for (auto& fn : fns) fn.set_tag(static_cast<std::uint8_t>(fn.tag() & ~bounded_tag));
    auto queue_push = [&]() -> result<void> {
      if (auto q = push(); !q) return refusal(q.error());
      return {};
    };
    // Submissions from one of the pool's own workers are not bounded
    // (backpressure.hpp): a worker must neither wait for its own pool nor be
    // refused by it. (A standard pool's worker pushes to its deque and gets
    // here only out of memory; a typed pool's workers always get here.)
    if (bounds_.capacity != 0 && !on_own_worker()) return push_external_bounded(kind_mask, fns, queue_push, wake, how);
    return settle_push(queue_push(), kind_mask, wake);
  }
  // push_external() for a bounded pool, out of line: the unbounded path
  // stays short. The policy may run user code here (see frame_scope); the
  // frame ends after the last use of the core.
  template <typename QueuePush>
  THREAD_SYSTEM_NOINLINE result<void> push_external_bounded(std::uint64_t kind_mask, std::span<job_function> fns,
                                                            QueuePush& queue_push, const bool* wake, admission how) {
    const frame_scope in_frame(this);
    return settle_push(push_bounded(fns, queue_push, how), kind_mask, wake);
  }
  THREAD_SYSTEM_ALWAYS_INLINE result<void> settle_push(result<void> r, std::uint64_t kind_mask, const bool* wake) {
    if (!r) {
      // A wait_idle() waiter may have seen an accepted count the refusal
      // rolled back: let it look again.
      became_idle_.notify_all();
      return r;
    }
    if (wake == nullptr || *wake) wake_worker_if_needed(kind_mask);
    return {};
  }
  // Bounded pools (see backpressure.hpp): reserve room for `fns` per the
  // policy, tag them, push them with `push()`, give the room back on refusal.
  // When the policy ran them on this thread, `ran_inline` is set and nothing
  // was pushed.
  template <typename Push>
  result<void> push_bounded(std::span<job_function> fns, Push&& push, admission how = admission::policy) {
    bool ran_inline = false;
    std::size_t without_room = 0;
    if (auto r = acquire_room(fns, ran_inline, without_room, how); !r) return r;
    if (ran_inline) return {};
    const std::span<job_function> holding = fns.first(fns.size() - without_room);
    for (auto& fn : holding) fn.set_tag(static_cast<std::uint8_t>(fn.tag() | bounded_tag));
    auto give_back = [&] {
      for (auto& fn : holding) fn.set_tag(static_cast<std::uint8_t>(fn.tag() & ~bounded_tag));
      if (!holding.empty()) release_room(holding.size());
    };
    result<void> r;
    try {
      r = push();
    } catch (...) {  // e.g. bad_alloc: the jobs were not queued
      give_back();
      throw;
    }
    if (!r) give_back();
    return r;
  }
  // `without_room`: how many of `fns` take the place of dropped jobs that
  // held no room (drop_oldest), so are queued without room themselves.
  result<void> acquire_room(std::span<job_function> fns, bool& ran_inline, std::size_t& without_room, admission how);
  // "<kind> '<name>'", the start of the pool's messages (throws std::bad_alloc).
  [[nodiscard]] std::string named() const { return std::string(kind_) + " '" + name_ + "'"; }
  // The refusal of a pool that is stopping or stopped (never throws).
  [[nodiscard]] unexpected_error stopped_error() const noexcept {
    return make_error_nothrow(error_code::pool_stopped, [&] { return named() + " is stopped"; });
  }
  // What an empty batch gets: nothing queued, ok - or pool_stopped once
  // stop() has begun, as every submission after it.
  [[nodiscard]] result<void> empty_batch() const noexcept {
    if (stop_begun()) return stopped_error();
    return {};
  }
  // invalid_argument naming the first empty job of `fns` (a batch with one
  // is refused whole), or ok.
  [[nodiscard]] result<void> refuse_empty_jobs(std::span<const job_function> fns) const noexcept;
  // stop() has begun (stopping or stopped). acquire: pairs with the release
  // store in stop().
  [[nodiscard]] bool stop_begun() const noexcept {
    const state st = state_.load(std::memory_order_acquire);
    return st == state::stopping || st == state::stopped;
  }
  // Caller holds lifecycle_mutex_ (see set_affinity()).
  [[nodiscard]] result<int> worker_os_tid_locked(std::size_t worker) const;
  // Worker `worker` if it is running (its thread joinable, not exited).
  // Caller holds lifecycle_mutex_.
  [[nodiscard]] result<pool_worker*> running_worker_locked(std::size_t worker) const;
  [[nodiscard]] bool try_reserve(std::size_t n) noexcept;
  void release_room(std::size_t n) noexcept;
  // What dropping the oldest queued job did: nothing was queued, it freed
  // room, or it dropped a job that held none (one a worker submitted).
  enum class dropped { none, room, no_room };
  [[nodiscard]] dropped drop_oldest_queued();
  // drop_oldest's victim when the queue holds none: a job a worker has
  // taken from it but not started (on that worker's deque). Never throws.
  [[nodiscard]] bool take_from_a_deque(job_function& out) noexcept;
  void run_on_caller(job_function& fn);
  void wait_while_paused() noexcept;
  // Runs `fn`, reports an escaping exception, destroys the callable.
  job_outcome run_guarded(job_function& fn) noexcept;

  // Stamps `fn` with the enqueue time when this thread's sampling countdown
  // says so.
  void stamp_if_sampled(job_function& fn) const noexcept;
  [[nodiscard]] injector& injector_ref() const noexcept { return *queue_; }
  // See core's worker_masks (pool_front.hpp). Allocates nothing.
  [[nodiscard]] worker_masks active_worker_masks(std::size_t first_n = 0) const;

  // Where a job pushed from one of the pool's own workers goes (a job from
  // any other thread goes through the injector whatever `where` says):
  //   * newest (enqueue()): into the worker's LIFO slot, the job the slot
  //     held onto its deque;
  //   * continuation (a coroutine's `co_await schedule()`): into the empty
  //     slot, marked, no other worker woken - the pushing job ends at once
  //     and this worker takes the slot next (the continuation rule of Asio's
  //     and Tokio's schedulers; docs/ARCHITECTURE.md, the LIFO slot);
  //   * fork (task_group::run(), parallel_for's halves: detail::fork_access):
  //     onto the deque, past the slot (a job the slot held goes first). The
  //     worker's helping wait pops it back from the newest end and thieves
  //     take the oldest first; through the slot it would cost two exchanges
  //     more (one displacing the previous child onto the deque, one taking
  //     the slot back) and stay hidden from thieves until every deque is
  //     empty.
  enum class local_push : std::uint8_t { newest, continuation, fork };
  result<void> push_one(job_function&& fn, local_push where = local_push::newest);
  result<void> push_one_unchecked(job_function&& fn, local_push where = local_push::newest);
  result<void> push_batch_unchecked(std::span<job_function> fns, std::uint64_t kind_mask = ~std::uint64_t{0});
  // push_one() for a job that goes through the injector. Out of line, so
  // that push_one_unchecked() stays small enough to inline into push_one()
  // and a spawn on a worker (push_one() -> push_local()) makes one call, not
  // two: inlined here, GCC then kept push_one_unchecked() out of line
  // (fork-join 0.93-0.95x in the A/B of the file split, docs/PERFORMANCE.md).
  THREAD_SYSTEM_NOINLINE result<void> push_to_injector(job_function&& fn);
  // push_to_injector() into `target`: the injector, or a queue inside it
  // that it counts and closes as its own (pool_front::push_routed()). One
  // function for both, so that push_external() inlines into it.
  result<void> push_to(injector& target, job_function&& fn, std::uint64_t kind_mask);
  // push_to() with the admission given (the body of both push_to() and
  // push_fork_bounded(); inlined into each, so push_to() is what it was).
  THREAD_SYSTEM_ALWAYS_INLINE result<void> push_to(injector& target, job_function&& fn, std::uint64_t kind_mask,
                                                   admission how);
  // push_to_injector() of a fork-join piece from outside the workers of a
  // bounded pool (admission::try_only), out of line.
  THREAD_SYSTEM_NOINLINE result<void> push_fork_bounded(job_function&& fn);
  result<void> push_local(pool_worker& w, job_function&& fn, local_push where = local_push::newest);
  // push_local() for a batch, all or none; false (nothing moved) when the
  // nodes or deque room cannot be allocated, else true with the result in `r`.
  bool push_local_batch(pool_worker& w, std::span<job_function> fns, result<void>& r);
  bool find_and_run(pool_worker& w, std::span<job_function> local, bool helping);
  class worker_help;  // a worker's help_source (src/pool_core.cpp)
  // Jobs popped from the queue per call when the pool drains or cancels it
  // (stop()). A worker's own batch is thread_worker::injector_batch(); the
  // queue hands out only a fair share (queued / workers), so a small backlog
  // is spread over the workers instead of hoarded by one.
  static constexpr std::size_t max_batch = 16;
  // The job in w's LIFO slot, within its budget (see lifo_budget in the
  // source); owner thread only.
  bool take_from_lifo_slot(pool_worker& w, bool helping, job_node*& out) noexcept;
  // Whether `victim` has finished no job for continuation_grace_ns since w
  // (a thief) started watching it: only then does w take the continuation
  // in victim's LIFO slot (see try_steal()).
  static bool owner_stalled(pool_worker& w, const pool_worker& victim) noexcept;
  bool try_steal(pool_worker& w, job_node*& out);
  void run_node(pool_worker& w, job_node* node);
  void execute(pool_worker& w, job_function& fn);
  [[nodiscard]] bool work_visible(const pool_worker& w) const noexcept;
  // A worker that found no work after prepare_wait(): sleeps until notified,
  // running the heavy side of the wake-up fence only if a first, bounded
  // sleep ends without a notification (see the source).
  void sleep_until_notified(detail::wake_group& group, event_count::key_type key, const pool_worker& w);
  // How long that first sleep lasts at most.
  static constexpr std::chrono::milliseconds first_sleep{1};
  result<void> push_batch(std::span<job_function> fns);
  [[nodiscard]] unexpected_error refusal(const error& queue_error) const;
  void wake_worker_if_needed(std::uint64_t kind_mask = ~std::uint64_t{0}) noexcept;
  void wake_all_groups() noexcept;
  wake_group& group_for(std::uint64_t mask);
  // Starts the threads of `batch`, all or none (see "Workers and their
  // threads"); `before_go()` runs once they all exist, before any of them
  // runs. Caller holds lifecycle_mutex_.
  template <typename BeforeGo>
  result<void> launch(std::span<pool_worker* const> batch, BeforeGo before_go);
  // The parts of a worker's set-up that allocate; may throw std::bad_alloc.
  void prepare_worker(pool_worker& w);
  // Makes a started worker visible to thieves (a new one gets a steal slot).
  void publish_worker(pool_worker& w) noexcept;
  // A worker's allocation failed: count it, report the first of a run.
  void note_allocation_failure(pool_worker& w) noexcept;
  [[nodiscard]] std::size_t active_workers_locked() const noexcept;
  void worker_main(pool_worker& w);
  void run_batch(pool_worker& w, std::span<job_function> batch);
  // stop()'s last step: runs (or cancels) jobs no worker will take, on the
  // calling thread, which counts as one of the pool's workers meanwhile
  // (caller_runner_): a job calling wait_idle() or stop() there is refused
  // with invalid_argument as on a worker, instead of waiting for itself.
  void run_left_behind(std::span<job_function> batch);
  [[nodiscard]] pool_worker* own_worker() const noexcept;
  void report_failure(const std::exception_ptr& e) noexcept;
  // This pool as a thread's failure_sink (coro/coro_base.hpp): set on its
  // workers and while it discards jobs, so what a discarded job's cancel()
  // cannot throw (a foreign coroutine's exception) reaches report_failure().
  [[nodiscard]] detail::failure_sink as_failure_sink() noexcept {
    return {this,
            [](void* core, const std::exception_ptr& e) noexcept { static_cast<pool_core*>(core)->report_failure(e); }};
  }
  [[nodiscard]] bool idle_now() const noexcept;
  [[nodiscard]] bool on_own_worker() const noexcept;
  // A discarded job's user code (its cancel hook, its callable's destructor,
  // a coroutine its cancellation resumes) runs inside a discard_scope on the
  // discarding thread - stop()'s caller (cancel_pending) or a drop_oldest
  // producer. There wait_idle() and stop() are refused with invalid_argument
  // (as on a worker), instead of waiting for the job being discarded.
  class discard_scope {
   public:
    explicit discard_scope(const pool_core* core) noexcept;
    ~discard_scope();
    discard_scope(const discard_scope&) = delete;
    discard_scope& operator=(const discard_scope&) = delete;

   private:
    const pool_core* outer_;
  };
  [[nodiscard]] bool discarding_on_this_thread() const noexcept;
  // on_own_worker() or discarding_on_this_thread(): the message of the
  // invalid_argument that `what` (wait_idle/stop) throws there, or null.
  [[nodiscard]] const char* refusal_on_this_thread(bool stop) const noexcept;
  // Throws error_exception{invalid_argument, "<kind> '<name>': <refusal>"}
  // (its code alone when there is no memory for the text).
  [[noreturn]] void throw_refusal(const char* refusal) const;
  [[nodiscard]] bool nothing_left_to_steal_from_caller() const noexcept;  // see nothing_left_to_steal()
  [[nodiscard]] std::uint64_t cancel_queued() noexcept;
  // stop()'s two halves. close_for_stop(): the state becomes stopping, the
  // queue closes, everyone waiting is woken (false: already stopped; the
  // caller holds stop_mutex_). settle_stop(): joins the workers - `self`'s
  // thread (the orphan's finisher, running it) is detached instead - runs
  // what is left, and makes the final report.
  bool close_for_stop(stop_mode mode) noexcept;
  stop_report settle_stop(pool_worker* self) noexcept;
  // Completes an orphaned core's stop and deletes it: on the last worker to
  // leave (`self`), or on orphan()'s thread when no worker runs (null).
  void finish_orphaned(pool_worker* self) noexcept;
  // A worker's thread, as it ends: counts it out of live_workers_, and
  // finishes an orphaned core if it is the last.
  void leave_as_worker(pool_worker& w) noexcept;
  // A frame's end (frame_scope): counts it out of live_workers_, and
  // finishes an orphaned core if it is the last worker or frame.
  void leave_frame() noexcept;
  // caller_runs: runs `fns` on this thread, counted in
  // caller_runs_in_flight_ (false: stop() began first; nothing ran).
  [[nodiscard]] bool run_on_caller_counted(std::span<job_function> fns);
  // stop() from inside a caller_runs run of this core on this thread: that
  // run is not waited for (it is the caller), and is left out of the report.
  void uncount_own_caller_runs() noexcept;
  [[nodiscard]] stop_report make_report() const;

  // Loop pieces taken back and still queued (detail::taken_back_of()):
  // declared before queue_, so that a queued entry destroyed with the queue
  // still finds it. A line of its own (the type is aligned), so the
  // members after it keep the layout they had before it came: sharing
  // queue_'s line cost BM_GroupFromOutside 12% (docs/PERFORMANCE.md).
  static_assert(alignof(taken_back_account) == 64 && sizeof(taken_back_account) == 64);
  taken_back_account taken_back_{};
  // Where task_group owners off the pool keep their first jobs after each
  // wait (detail::owner_slot, pools/pool_front.hpp): owner_slot_count of
  // them, made by the first lease (a pool that no owner off its workers
  // uses holds none; 1.5 KiB) and freed with the core. Thieves look at the
  // first `used` (raised by lease_owner_slot() after the array is
  // installed, never lowered; 0: no array). A line of its own, read by
  // idle workers and written once per slot ever leased; like taken_back_,
  // it keeps the members after it on the line offsets they had before it.
  struct alignas(64) owner_slot_array {
    std::atomic<owner_slot*> slots{nullptr};
    std::atomic<std::size_t> used{0};
    owner_slot_array() = default;
    owner_slot_array(const owner_slot_array&) = delete;
    owner_slot_array& operator=(const owner_slot_array&) = delete;
    ~owner_slot_array() { delete[] slots.load(std::memory_order_relaxed); }  // no thread uses the core now
  } owner_slots_;
  // A worker's last look for work: takes and runs a job from an owner's
  // slot (false: none, or stop() has begun).
  bool run_owner_slot_job() noexcept;
  std::string name_;
  const char* kind_;                 // "thread_pool" or "typed_thread_pool" (core_config::kind)
  std::unique_ptr<injector> queue_;  // never null
  pool_queue queue_kind_ = pool_queue::mutex;

  // Lifecycle: state_ changes under lifecycle_mutex_; read lock-free.
  std::mutex stop_mutex_;  // serialises stop(); never taken by workers (but orphan() on one)
  mutable std::mutex lifecycle_mutex_;
  std::atomic<state> state_{state::created};
  // The handles users hold (get_workers()); the core works on their state.
  std::vector<std::unique_ptr<thread_worker>> workers_;  // guarded by lifecycle_mutex_
  [[nodiscard]] static pool_worker& state_of(const thread_worker& handle) noexcept { return *handle.state_; }
  // Takes `w` into workers_ (capacity reserved by the caller: no
  // allocation), as the next index, and marks it owned. Under
  // lifecycle_mutex_.
  pool_worker& adopt(std::unique_ptr<thread_worker> w) noexcept;
  std::atomic<std::size_t> worker_count_{0};
  // Started workers, for thieves (lock-free reads): slots [0, published_)
  // are set and never change. Written under lifecycle_mutex_.
  std::unique_ptr<std::atomic<pool_worker*>[]> steal_table_{new std::atomic<pool_worker*>[max_workers]};
  std::atomic<std::size_t> published_{0};
  job_node_pool node_pool_;
  stop_report final_report_{};  // guarded by lifecycle_mutex_
  // Accounts for jobs that stop() runs on the calling thread in a pool that
  // was never started (no OS thread behind it).
  pool_worker caller_runner_{"caller"};

  mutable std::mutex handler_mutex_;
  std::shared_ptr<const error_handler> handler_;  // guarded by handler_mutex_

  // Set before workers are told to stop in cancel_pending mode.
  std::atomic<bool> cancel_requested_{false};
  std::atomic<bool> stop_requested_{false};  // begin_stop() was called

  alignas(64) std::atomic<std::uint64_t> cancelled_by_stop_{0};

  // The job_function tag bit of jobs that hold room in a bounded pool
  // (job_tag in scheduler/injector.hpp has the whole byte).
  static constexpr std::uint8_t bounded_tag = job_tag::holds_room;
  thread_system::backpressure bounds_{};
  alignas(64) std::atomic<std::size_t> queued_external_{0};  // bounded pools: jobs holding room
  event_count room_available_;                               // producers blocked by backpressure
  std::atomic<std::size_t> multi_slot_waiters_{0};           // blocked producers of batches (see release_room())
  alignas(64) std::atomic<std::uint64_t> dropped_{0};        // drop_oldest victims (count as finished)
  std::atomic<std::uint64_t> caller_ran_{0};                 // jobs run by caller_runs
  std::atomic<std::uint64_t> caller_failed_{0};
  std::atomic<std::uint64_t> caller_cancelled_{0};
  // drop_oldest_queued() calls under way: a victim taken from the queue is
  // counted in dropped_ only once its own code has run, so settle_stop()
  // waits for them before it makes the final report.
  std::atomic<std::uint32_t> drops_in_flight_{0};
  // caller_runs runs under way on producer threads: stop() waits for them
  // (as for running jobs) before its report, except those of the stopping
  // thread itself (a caller_runs job that calls stop(); see
  // uncount_own_caller_runs()).
  std::atomic<std::uint32_t> caller_runs_in_flight_{0};
  alignas(64) std::atomic<bool> paused_{false};
  event_count resumed_;  // workers holding a job while paused park here

  // false in typed pools: see core_config::local_deques.
  bool local_deques_ = true;
  // Makes the workers resize() adds (a typed pool makes universal workers of its own type).
  std::unique_ptr<thread_worker> (*make_worker_)() = [] { return std::make_unique<thread_worker>(); };
  std::uint32_t latency_sample_every_ = 32;
  std::uint32_t max_spinners_ = 1;
  std::size_t stack_size_ = 0;      // worker threads' stack, bytes (0: default)
  std::uint64_t idle_wait_ns_ = 0;  // the yield phase of an idle worker (core_config::idle_wait)
  // What the error handler receives when a worker runs out of memory (built
  // up front: out of memory there is nothing left to build it with).
  std::exception_ptr out_of_memory_report_;

  // Wake groups (see wake_group): slots [0, group_count_) are set
  // and never change; written under lifecycle_mutex_. One per distinct
  // responsibility set ever started: as many as the pool can have workers,
  // so any set of workers it holds at once fits (64 single-type
  // specialists and a universal worker are 65 sets).
  static constexpr std::size_t max_groups = max_workers;
  std::vector<std::unique_ptr<wake_group>> owned_groups_;  // guarded by lifecycle_mutex_
  std::unique_ptr<std::atomic<wake_group*>[]> groups_{new std::atomic<wake_group*>[max_groups]};
  std::atomic<std::size_t> group_count_{0};

  event_count became_idle_;  // wait_idle() parks here

  // Worker threads that will run or are running worker_main(), and frames
  // (frame_scope) under way on any thread, times 2, plus orphan_bit once
  // orphan() has been called: the worker or frame whose exit takes the
  // count to zero with the bit set, or orphan() finding the count zero,
  // finishes the core - exactly one of them. (Last: the members
  // above keep the cache-line layout the benchmarks measured.)
  static constexpr std::uint64_t orphan_bit = 1;
  std::atomic<std::uint64_t> live_workers_{0};
};

}  // namespace thread_system::detail
