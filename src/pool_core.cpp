// The scheduler core's worker loop (detail::pool_core, pool_core.hpp): find
// a job (the LIFO slot, the own deque, the injector in batches, stealing),
// run it, then spin, yield and park; the helping-wait hook that runs one job
// of the pool on a worker. The rest of the core: pool_core_push.cpp (the
// paths by which a job enters it, waking, and the fronts' pushes),
// pool_core_steal.cpp (taking work from other workers and from task_group
// owners' slots), pool_core_lifecycle.cpp (construction, starting workers,
// resize), pool_core_stop.cpp (stop and its report, pause, resume), pool_core_frames.cpp (a pool stopped or destroyed
// inside its own code), pool_core_workers.cpp (the worker list and the workers' OS threads), pool_core_admission.cpp
// (backpressure) and pool_core_accounting.cpp (idle detection, statistics, failure reports). docs/ARCHITECTURE.md walks
// one job through them.
#include "pool_core.hpp"
#include "thread_system/detail/chaos.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <thread>
#include <type_traits>

#include "thread_system/detail/asymmetric_fence.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/os_thread.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/detail/thread_attributes.hpp"
#include "thread_system/sync/cancellation.hpp"
#include "thread_system/sync/helping_wait.hpp"
#include "thread_system/sync/this_job.hpp"

// The concrete injectors, so that their final overrides are visible here.
#include "injectors.hpp"

namespace thread_system::detail {

namespace {

// Every this many jobs a worker looks at the injector before its own deque,
// so external submissions are never starved by a worker that keeps
// spawning locally (a prime, so it does not resonate with spawn patterns).
constexpr unsigned injector_check_interval = 61;

// Polls of the queue before parking (each poll is a pause instruction and a
// load, a few microseconds in all). Only a bounded number of workers spin at
// a time (`max_spinners_`), so on an oversubscribed machine spinning workers
// do not steal the CPU from the threads that produce work.
constexpr int spin_polls = 256;

// After spinning (or instead of it, past the spinner cap), a worker keeps
// polling for this long, yielding its CPU between polls, before it parks.
// Yielding costs nothing to a thread that wants the CPU (a producer on an
// oversubscribed machine runs instead), and it keeps workers awake across
// the short gaps between back-to-back parallel work - a caller that waits
// for one parallel_for and starts the next. Parking there costs a futex
// wake-up per worker per round (tens of microseconds on a VM), and woken
// threads often land on another CPU, away from the data they had cached.
// oneTBB and rayon likewise yield for a while before they sleep. The length
// is pool_options::idle_wait (idle_wait_ns_; by default detail::idle_yield_ns,
// 100 us, the same as helping waits).

using detail::steady_now_ns;

}  // namespace

bool pool_core::take_from_lifo_slot(pool_worker& w, bool helping, detail::job_node*& out) noexcept {
  // relaxed: only this thread fills the slot; a stale non-null only costs
  // the exchange below, which then returns nullptr.
  if (w.lifo_slot_.load(std::memory_order_relaxed) == 0) return false;
  // The budget (pool_front::lifo_slot_budget): a job that keeps spawning
  // a successor cannot starve the jobs spawned before it. Tokio bounds its
  // LIFO slot the same way and with the same value (MAX_LIFO_POLLS_PER_TICK).
  if (w.lifo_streak_ >= lifo_slot_budget && !helping) {
    // Budget spent: the slot's job joins the deque (as its newest) and the
    // oldest job of the deque runs instead. A helping wait skips this: it
    // wants the newest jobs, most likely the one it waits for.
    w.lifo_streak_ = 0;
    // The slot's job runs now when the deque is empty (exact for its owner:
    // thieves only take from it): no older job is there to run first, and
    // moving it through the deque would only offer it to a thief for a
    // moment - the hops of a coroutine on its own worker (a continuation)
    // would then move to another core now and then. Also when out of memory:
    // the deque cannot take it (the budget waits for the next round).
    const bool deque_empty = w.deque_.empty_approx();
    if (deque_empty || !w.deque_.reserve(1)) {
      if (!deque_empty) note_allocation_failure(w);
      out = pool_worker::slot_node(w.lifo_slot_.exchange(0, std::memory_order_relaxed));  // relaxed: as below
      return out != nullptr;
    }
    // relaxed: the owner's own job (or nullptr if a thief took it first;
    // the exchange is then the thief's only competitor).
    if (const pool_worker::slot_word newest = w.lifo_slot_.exchange(0, std::memory_order_relaxed)) {
      w.deque_.push(pool_worker::slot_node(newest));  // room reserved above: no allocation
    }
    auto oldest = w.deque_.steal();  // the FIFO end (the owner may steal like any thief)
    if (!oldest) return false;       // taken by a thief meanwhile: the normal order goes on
    out = oldest.value;
    return true;
  }
  // relaxed: the job was put there by this thread; the exchange decides
  // between the owner and a thief (one total order on the slot).
  out = pool_worker::slot_node(w.lifo_slot_.exchange(0, std::memory_order_relaxed));
  if (out == nullptr) return false;
  if (!helping) ++w.lifo_streak_;
  return true;
}

job_outcome pool_core::run_guarded(job_function& fn) noexcept {
  // A job without a token must not see the token of a job it runs inside
  // (a helping wait, caller_runs): token_job sets its own.
  const this_job::detail::token_scope no_token(nullptr);
  job_outcome outcome = job_outcome::succeeded;
  try {
    outcome = fn.run();
  } catch (...) {
    outcome = job_outcome::failed_reported;
    report_failure(std::current_exception());
  }
  fn.reset();  // the job's captures are destroyed before it counts as done
  return outcome;
}

// A worker thread's help_source (sync/helping_wait.hpp): a helping wait on
// the worker runs one job of this pool through its worker.
class pool_core::worker_help final : public detail::help_source {
 public:
  worker_help(pool_core& pool, pool_worker& worker) noexcept : pool_(pool), worker_(worker) {}
  bool help_once() override {
    std::array<job_function, 1> one;
    return pool_.find_and_run(worker_, one, /*helping=*/true);
  }

 private:
  pool_core& pool_;
  pool_worker& worker_;
};

namespace {
// The worker's buffer for one injector batch. The default batch (16 jobs,
// 1 KB) lives on the worker's stack and its slots are constructed as first
// needed; a larger batch (set_injector_batch(), up to 64) gets a buffer on
// the heap the first time it is asked for. So an idle pool's threads touch
// a page less of stack than with room for the largest batch there. Out of
// memory the batch is the default one (the size is a hint).
// NOLINTBEGIN(cppcoreguidelines-pro-type-member-init): storage_ is raw on
// purpose (slots are constructed in first(), so untouched ones stay untouched).
class batch_buffer {
 public:
  batch_buffer() = default;
  batch_buffer(const batch_buffer&) = delete;
  batch_buffer& operator=(const batch_buffer&) = delete;
  ~batch_buffer() { std::destroy_n(slots(), ready_); }
  // The first n slots (1 <= n <= max_injector_batch), or the inline ones
  // when a larger buffer cannot be allocated.
  std::span<job_function> first(std::size_t n) noexcept {
    if (n > inline_slots) {
      if (!large_) large_.reset(new (std::nothrow) job_function[pool_worker::max_injector_batch]);
      if (large_) return {large_.get(), n};
      n = inline_slots;
    }
    for (; ready_ < n; ++ready_) ::new (static_cast<void*>(slots() + ready_)) job_function();  // does not throw
    return {slots(), n};
  }

 private:
  static constexpr std::size_t inline_slots = pool_worker::default_injector_batch;
  job_function* slots() noexcept { return std::launder(reinterpret_cast<job_function*>(storage_)); }
  alignas(job_function) std::byte storage_[sizeof(job_function) * inline_slots];
  std::size_t ready_ = 0;
  std::unique_ptr<job_function[]> large_;
};
// NOLINTEND(cppcoreguidelines-pro-type-member-init)
static_assert(std::is_nothrow_default_constructible_v<job_function>);
}  // namespace

namespace {
// True when a helping wait on this thread has nested past the worker's
// help floor (see find_and_run()). The first time, finds the floor: the
// stack address halfway between the worker loop's frame and the end of
// this thread's stack. From the real end, not the size
// asked for: the thread library keeps thread-local storage at the stack's
// top (ThreadSanitizer's per-thread state took half of a 256 KiB stack).
// Frame addresses, not a local's: under AddressSanitizer locals may live on
// a separate fake stack.
// When the lookup fails (glibc's allocates, and memory may be short), the
// floor comes from the size the pool asked for, less what the thread library
// keeps at the top (os_thread::usable_stack_size(), found without
// allocating): never "no floor", which would let waits nest until the stack
// overflows. Only where neither is known does the next wait look again.
bool past_help_floor(pool_worker& w, std::size_t stack_size) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  if (w.help_floor_ == pool_worker::help_floor_unknown) [[unlikely]] {
    const std::uintptr_t low = detail::os_thread::current_stack_low();
    if (low != 0 && w.help_base_ > low) {
      w.help_floor_ = low + (w.help_base_ - low) / 2;
    } else if (const std::size_t usable = detail::os_thread::usable_stack_size(stack_size);
               usable != 0 && w.help_base_ > usable) {
      w.help_floor_ = w.help_base_ - usable / 2;  // the frames above the loop's are a few hundred bytes
    } else {
      return false;  // unknown for now: no floor for this wait
    }
  }
  return w.help_floor_ != 0 && reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)) < w.help_floor_;
#else
  (void)w;
  return false;
#endif
}
}  // namespace

void pool_core::worker_main(pool_worker& w) {
  tl_context = worker_context{this, &w};
  const failure_sink_scope sink(as_failure_sink());
#if defined(__GNUC__) || defined(__clang__)
  w.help_base_ = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));  // see past_help_floor()
#endif
  w.help_floor_ = pool_worker::help_floor_unknown;
  worker_help help(*this, w);
  detail::help_source* const outer_help = detail::set_help_source(&help);
  // release: pairs with the acquire load in worker_os_tid_locked().
  w.os_tid_.store(detail::current_os_thread_id(), std::memory_order_release);
  (void)detail::set_current_thread_name(w.thread_name_);  // a convenience: failure changes nothing
  batch_buffer local;
  // The buffer for this iteration's batch (relaxed: a setting, see find_and_run()).
  auto batch = [&local, &w] {
    return local.first(
        std::clamp<std::size_t>(w.injector_batch_.load(std::memory_order_relaxed), 1, pool_worker::max_injector_batch));
  };
  std::uint64_t busy_since = 0;
  // A busy stretch runs from waking up until no work is found; its start is
  // published so statistics include a stretch in progress.
  auto start_stretch = [&w, &busy_since] {
    busy_since = steady_now_ns();
    w.busy_since_ns_.store(busy_since, std::memory_order_relaxed);  // statistics only
  };
  start_stretch();

  for (;;) {
    // acquire: pairs with the release CAS in resize().
    if (w.membership_.load(std::memory_order_acquire) == pool_worker::retiring) {
      // Leaving: run what is on this worker's own deque (only this thread
      // pushes there), then go - unless resize() took the worker back first.
      detail::job_node* node = nullptr;
      while (take_from_lifo_slot(w, /*helping=*/true, node) || w.deque_.pop(node)) run_node(w, node);
      int m = pool_worker::retiring;
      // acq_rel: pairs with the CAS retiring -> active in resize().
      if (w.membership_.compare_exchange_strong(m, pool_worker::exited, std::memory_order_acq_rel)) {
        single_writer_add(w.busy_ns_, steady_now_ns() - busy_since);  // statistics only
        w.busy_since_ns_.store(0, std::memory_order_relaxed);         // statistics only
        became_idle_.notify_all();                                    // its last jobs may have made the pool idle
        // A producer may have skipped its wake-up because this worker was
        // spinning when it was told to leave: pass the wake-up on.
        wake_worker_if_needed();
        break;
      }
      continue;
    }
    if (find_and_run(w, batch(), /*helping=*/false)) continue;

    single_writer_add(w.busy_ns_, steady_now_ns() - busy_since);
    w.busy_since_ns_.store(0, std::memory_order_relaxed);  // statistics only
    if (queue_->is_closed()) {
      // Closed was observed (acquire): every injector push that succeeded
      // did so before the close, and nothing is pushed to this worker's deque
      // after stop() (push_local refuses), so one more look decides.
      if (find_and_run(w, batch(), false)) {
        start_stretch();
        continue;
      }
      break;
    }
    // Out of work: the pool may have become idle.
    became_idle_.notify_all();

    detail::wake_group& group = *w.group_;
    bool work_seen = false;
    // relaxed: a soft cap; races may exceed it by a few.
    if (group.spinning.load(std::memory_order_relaxed) < group.max_spinners) {
      // seq_cst: producers that read spinning != 0 skip their wake-up; a
      // spinner that misses their job goes through the sleep path below
      // (heavy fence, last look) before it can sleep (see
      // wake_worker_if_needed()).
      group.spinning.fetch_add(1, std::memory_order_seq_cst);
      for (int i = 0; i < spin_polls && !work_seen; ++i) {
        detail::cpu_relax();
        work_seen = work_visible(w);
      }
      // seq_cst: from here producers wake a sleeper again; the re-check
      // after prepare_wait() below catches a push that raced with this.
      group.spinning.fetch_sub(1, std::memory_order_seq_cst);
    }
    // The yield phase (see idle_wait_ns_ above). It is not counted in `spinning`:
    // producers keep notifying, which costs them one relaxed load while no
    // worker is parked, and nothing in the wake-up protocol changes.
    if (!work_seen && idle_wait_ns_ != 0) {
      const std::uint64_t start = steady_now_ns();
      // Saturating: an idle_wait longer than the clock can count never ends.
      const std::uint64_t until = idle_wait_ns_ > ~start ? ~std::uint64_t{0} : start + idle_wait_ns_;
      do {
        std::this_thread::yield();
        work_seen = work_visible(w);
      } while (!work_seen && steady_now_ns() < until);
    }
    if (work_seen) {
      start_stretch();
      continue;
    }

    THREAD_SYSTEM_CHAOS_POINT();
    const auto key = group.work_available.prepare_wait();
    THREAD_SYSTEM_CHAOS_POINT();
    if (work_visible(w)) {
      group.work_available.cancel_wait();
      start_stretch();
      continue;
    }
    single_writer_add(w.parks_, 1);
    const std::uint64_t parked_at = steady_now_ns();
    sleep_until_notified(group, key, w);
    start_stretch();
    single_writer_add(w.idle_ns_, busy_since - parked_at);
    single_writer_add(w.wakeups_, 1);
  }
  tl_context = worker_context{};
  (void)detail::set_help_source(outer_help);
}

void pool_core::sleep_until_notified(detail::wake_group& group, event_count::key_type key, const pool_worker& w) {
  // The sleeper's side of the Dekker pair with wake_worker_if_needed() (see
  // there). Pushers run only the light side of the asymmetric fence, so the
  // look for work after prepare_wait() above may miss a push whose store was
  // still in its pusher's store buffer, while the pusher read no sleeper.
  // Sleeping in two steps keeps that from stranding the job and keeps the
  // heavy side rare:
  //  1. a sleep of at most first_sleep: a notification ends it as usual; in
  //     that race the job waits until it ends;
  //  2. if it ended by itself, announce again, run the heavy side (a
  //     membarrier: a barrier on every running thread of the process), look
  //     again, and only then sleep until notified.
  // So a worker runs the membarrier, which interrupts the CPUs running the
  // process's other threads (about 11 us each on this test VM), at most once
  // per first_sleep + its spin and yield phases, not on every sleep. Where
  // both sides are full fences (no membarrier, ThreadSanitizer) step 1's
  // look is already exact and the first sleep is not bounded.
  // relaxed: set once before any worker exists (asymmetric_fence_init()).
  if (!detail::asymmetric_fence_cheap.load(std::memory_order_relaxed)) {
    group.work_available.commit_wait(key);
    return;
  }
  // A bounded sleep first; with membarrier failing after registration (a
  // seccomp filter installed later) the pair no longer holds and every sleep
  // stays bounded (a job in that race waits at most first_sleep, never
  // forever).
  while (!group.work_available.commit_wait_until(key, std::chrono::steady_clock::now() + first_sleep)) {
    key = group.work_available.prepare_wait();
    const bool paired = detail::asymmetric_fence_heavy();
    THREAD_SYSTEM_CHAOS_POINT();
    if (work_visible(w)) {
      group.work_available.cancel_wait();
      return;
    }
    if (paired) {
      group.work_available.commit_wait(key);
      return;
    }
  }
}

bool pool_core::find_and_run(pool_worker& w, std::span<job_function> local, bool helping) {
  // Helping waits take one job at a time so the awaited result is not
  // delayed behind a batch.
  // A paused pool starts nothing (acquire: pairs with the store in pause()) -
  // until it is closed: stop() runs or cancels everything even if a job
  // calls pause() while the pool drains.
  if (paused_.load(std::memory_order_acquire) && !queue_->is_closed()) return false;
  // A helping wait runs any job of the pool, and that job may wait and help
  // in turn, one level deeper each time: N independent jobs that each wait
  // nested N deep and overflowed the stack. Past half the worker's stack a
  // helping wait takes only this worker's own jobs - its LIFO slot and
  // deque, which its own (nested) waits filled - and leaves the injector's
  // and other workers' jobs to the rest of the pool (oneTBB's stealing
  // threshold works the same way).
  if (helping && past_help_floor(w, stack_size_)) {
    detail::job_node* own = nullptr;
    if ((local_deques_ && take_from_lifo_slot(w, helping, own)) || w.deque_.pop(own)) {
      run_node(w, own);
      return true;
    }
    return false;
  }
  const std::size_t batch_limit =
      // relaxed: a setting (set_injector_batch); nothing is published with it.
      helping ? 1 : std::min<std::size_t>(local.size(), w.injector_batch_.load(std::memory_order_relaxed));
  auto run_from_injector = [&](std::size_t limit) -> bool {
    // All but the first job of a batch go onto the deque, in nodes: take
    // only as many as there is room for without allocating. Out of memory
    // that is one job, which needs neither.
    if (limit > 1) {
      const bool nodes = w.node_cache_.reserve(limit - 1);
      const bool slots = w.deque_.reserve(limit - 1);
      if (nodes && slots) {
        w.degraded_ = false;
      } else {
        note_allocation_failure(w);
        limit = 1 + std::min({limit - 1, w.node_cache_.available(), w.deque_.room()});
      }
    }
    const std::size_t share = worker_count_.load(std::memory_order_relaxed);  // a hint
    std::size_t n = 0;
    try {
      n = queue_->pop_for(w.responsibility_mask_, local.first(limit), share);
    } catch (const std::bad_alloc&) {
      // The queue could not take a job without memory (a lock-free queue's
      // hazard record): nothing was taken. Give the CPU away and look again
      // later; other workers and the deque's jobs go on meanwhile.
      note_allocation_failure(w);
      std::this_thread::yield();
      return false;
    }
    if (n == 0) return false;
    // Typed pools: the kind of the batch whose rest goes onto the deque.
    if (n > 1 && !local_deques_) {
      w.batch_rank_ = detail::job_tag::rank(local[0].tag());
      w.deque_rank_.store(w.batch_rank_, std::memory_order_relaxed);  // a hint (see pool_worker.hpp)
    }
    // All but the first job go onto this worker's deque (newest-first, so
    // the owner still takes them in FIFO order): there they can be stolen,
    // and a helping wait in the first job can reach them. Held in a private
    // array instead, a job could wait forever on one queued behind it.
    // They were counted by the injector already, so spawned_ stays as is.
    for (std::size_t i = n; i-- > 1;) {
      detail::job_node* moved = w.node_cache_.allocate();  // reserved above: no allocation
      moved->fn = std::move(local[i]);
      w.deque_.push_from_queue(moved);  // reserved above: no allocation
    }
    // More work than this worker will run now: make sure someone else is coming.
    if (n > 1) {
      wake_worker_if_needed();
    } else if (const std::uint64_t pending = queue_->pending_mask(); pending != 0) {
      wake_worker_if_needed(pending);
    }
    execute(w, local[0]);
    return true;
  };

  // The periodic look takes a single job: a batch would go onto a deque
  // that is not empty, and repeated looks could grow it without bound.
  if (!local_deques_) {
    // Typed pools. The deque holds only the rest of one batch of the
    // worker's highest kind (rank batch_rank_), taken while the deque was
    // empty: run it first unless a job of a higher kind this worker serves
    // has appeared since (a kind created after the batch was taken).
    detail::job_node* node = nullptr;
    if (!w.deque_.empty_approx()) {
      const std::uint64_t higher = w.responsibility_mask_ & ((std::uint64_t{1} << w.batch_rank_) - 1);
      if ((higher == 0 || (queue_->pending_mask() & higher) == 0) && w.deque_.pop(node)) {
        run_node(w, node);
        return true;
      }
      if (run_from_injector(1)) return true;
      if (w.deque_.pop(node)) {
        run_node(w, node);
        return true;
      }
      return false;
    }
    return run_from_injector(batch_limit);
  }
  // A job from anywhere but the LIFO slot restarts the slot's budget.
  if (++w.tick_ % injector_check_interval == 0 && run_from_injector(1)) {
    w.lifo_streak_ = 0;
    return true;
  }
  detail::job_node* node = nullptr;
  if (take_from_lifo_slot(w, helping, node)) {
    run_node(w, node);
    return true;
  }
  w.lifo_streak_ = 0;
  if (w.deque_.pop(node)) {
    run_node(w, node);
    return true;
  }
  if (run_from_injector(batch_limit)) return true;
  if (try_steal(w, node)) {
    run_node(w, node);
    return true;
  }
  // Last: a job a task_group's owner off the pool keeps within reach.
  // relaxed: a hint (0 for a pool no owner off its workers has used);
  // run_owner_slot_job() reads it again with acquire.
  return owner_slots_.used.load(std::memory_order_relaxed) != 0 && run_owner_slot_job();
}

void pool_core::run_node(pool_worker& w, detail::job_node* node) {
  execute(w, node->fn);
  w.node_cache_.release(node);
}

void pool_core::execute(pool_worker& w, job_function& fn) {
  // acquire: pairs with the release store in stop(); a job not yet started
  // when cancellation is requested is cancelled rather than run.
  const std::uint8_t raw_tag = fn.tag();
  const auto tag = static_cast<std::uint8_t>(raw_tag & ~bounded_tag);
  // A job taken just before pause() became visible to this worker, but
  // pushed after pause() returned, must not start either: the push
  // happens-after the pause store, so this load sees it. Hold the job until
  // resume() or stop() - still holding its room (backpressure.hpp: room
  // frees when a job starts; a held job has not).
  if (paused_.load(std::memory_order_acquire)) wait_while_paused();  // pairs with the seq_cst store in pause()
  if ((raw_tag & bounded_tag) != 0) release_room(1);  // the job leaves the queue now: it starts or is cancelled
  if (cancel_requested_.load(std::memory_order_acquire)) {
    fn.cancel();
    fn.reset();
    queue_->note_cancelled(tag);
    single_writer_add(w.cancelled_, 1, std::memory_order_release);  // pairs with idle_now()
    return;
  }
  // A sampled job: record how long it waited and how long it runs.
  const std::uint64_t stamp = fn.enqueue_stamp();
  std::uint64_t started = 0;
  if (stamp != 0) {
    started = steady_now_ns();
    const std::uint64_t wait = started > stamp ? started - stamp : 0;
    w.wait_histogram_.record(wait);
    if (tag != 0) queue_->note_wait(tag, wait);
  }
  const job_outcome outcome = run_guarded(fn);
  if (stamp != 0) w.run_histogram_.record(steady_now_ns() - started);
  if (outcome == job_outcome::cancelled) {
    // The job saw its token cancelled and completed its own future.
    queue_->note_cancelled(tag);
    single_writer_add(w.cancelled_, 1, std::memory_order_release);  // pairs with idle_now()
    return;
  }
  const bool failed = outcome == job_outcome::failed_reported;
  if (failed) single_writer_add(w.failed_, 1);
  if (tag != 0) queue_->note_done(w.index_, tag, failed);  // a typed injector counts it per kind
  // release: pairs with the acquire loads in idle_now(); everything the job
  // did is visible to a wait_idle() that sees this count.
  single_writer_add(w.processed_, 1, std::memory_order_release);
}

void pool_core::run_batch(pool_worker& w, std::span<job_function> batch) {
  for (auto& fn : batch) execute(w, fn);
}

void pool_core::run_left_behind(std::span<job_function> batch) {
  // This thread may be a worker of another pool: its context comes back.
  struct as_caller_runner {
    worker_context outer = tl_context;
    explicit as_caller_runner(pool_core* core) noexcept {
      tl_context = worker_context{core, &core->caller_runner_, &outer};
    }
    as_caller_runner(const as_caller_runner&) = delete;
    as_caller_runner& operator=(const as_caller_runner&) = delete;
    ~as_caller_runner() { tl_context = outer; }
  } scope(this);
  run_batch(caller_runner_, batch);
}

void pool_core::wait_while_paused() noexcept {
  for (;;) {
    const auto key = resumed_.prepare_wait();
    // seq_cst: Dekker with resume()/stop(), which store then notify.
    if (!paused_.load(std::memory_order_seq_cst) || queue_->is_closed()) {
      resumed_.cancel_wait();
      return;
    }
    resumed_.commit_wait(key);
  }
}

}  // namespace thread_system::detail
