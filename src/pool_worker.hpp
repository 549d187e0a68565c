// pool_worker: the scheduler's own state of one worker thread (private to
// src/). The public thread_worker (pools/thread_worker.hpp) is a handle
// that owns one of these: it carries the name, the batch setting and the
// statistics a user reads, nothing of the loop. The core's hot path works on
// pool_worker only (its worker loop, steal table, LIFO slots and thread-local
// "current worker" hold pool_worker pointers), so the handle adds no
// indirection to running jobs.
//
// Threads: every field is written either by the worker's own thread
// ("owner thread only"), by the pool under its lifecycle mutex before the
// thread starts, or is an atomic whose comment names its memory order and
// what it pairs with.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/job_node.hpp"
#include "thread_system/detail/os_thread.hpp"
#include "thread_system/diagnostics/latency_histogram.hpp"
#include "thread_system/pools/thread_worker.hpp"
#include "thread_system/queues/work_stealing_deque.hpp"
#include "thread_system/scheduler/worker_statistics.hpp"

namespace thread_system::detail {

struct wake_group;

// All members are public to the core's sources; the type is not visible
// outside src/.
// A worker's work-stealing deque of job nodes. An entry's low bit marks a
// job the worker took from the pool's queue (the rest of an injector batch)
// rather than one a job spawned: backpressure::drop_oldest may take those
// from here, never the others (pool_core::take_from_a_deque()).
class node_deque {
 public:
  explicit node_deque(std::size_t capacity) : deque_(capacity) {}
  // Owner only (as work_stealing_deque's).
  [[nodiscard]] bool reserve(std::size_t n) noexcept { return deque_.reserve(n); }
  [[nodiscard]] std::size_t room() const noexcept { return deque_.room(); }
  void push(job_node* n) { deque_.push(word_of(n)); }
  void push_from_queue(job_node* n) { deque_.push(word_of(n) | from_queue_bit); }
  [[nodiscard]] bool pop(job_node*& out) {
    word w = 0;
    if (!deque_.pop(w)) return false;
    out = node_of(w);
    return true;
  }
  // Any thread.
  [[nodiscard]] steal_result<job_node*> steal() { return as_nodes(deque_.steal()); }
  // The oldest entry if it was taken from the pool's queue; `empty` if not.
  [[nodiscard]] steal_result<job_node*> steal_from_queue() {
    return as_nodes(deque_.steal_if([](word w) noexcept { return (w & from_queue_bit) != 0; }));
  }
  [[nodiscard]] std::size_t size_approx() const noexcept { return deque_.size_approx(); }
  [[nodiscard]] bool empty_approx() const noexcept { return deque_.empty_approx(); }

 private:
  using word = std::uintptr_t;
  static constexpr word from_queue_bit = 1;
  static_assert(alignof(job_node) > from_queue_bit, "the low bit of a node address must be free");
  [[nodiscard]] static word word_of(job_node* n) noexcept { return reinterpret_cast<word>(n); }
  [[nodiscard]] static job_node* node_of(word w) noexcept {
    // The value came from word_of(): the address of a live node (or 0),
    // maybe with its low bit set, so the cast gives back that very node.
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a tagged pointer, see above
    return reinterpret_cast<job_node*>(w & ~from_queue_bit);
  }
  [[nodiscard]] static steal_result<job_node*> as_nodes(steal_result<word> r) noexcept {
    return {r.status, node_of(r.value)};
  }
  work_stealing_deque<word> deque_;
};

class pool_worker {
 public:
  static constexpr std::size_t max_injector_batch = thread_worker::max_injector_batch;
  static constexpr std::size_t default_injector_batch = thread_worker::default_injector_batch;

  explicit pool_worker(std::string name) : name_(std::move(name)) {}
  pool_worker(const pool_worker&) = delete;
  pool_worker& operator=(const pool_worker&) = delete;
  ~pool_worker() = default;  // the owning pool joins the thread first

  // A snapshot of the counters; any thread, any time.
  [[nodiscard]] worker_statistics statistics() const noexcept {
    worker_statistics s;
    // All loads relaxed: monotonic counters read for reporting; no data is
    // published through them (wait_idle uses its own acquire load).
    s.jobs_processed = processed_.load(std::memory_order_relaxed);
    s.jobs_failed = failed_.load(std::memory_order_relaxed);
    s.jobs_cancelled = cancelled_.load(std::memory_order_relaxed);
    s.busy_time = std::chrono::nanoseconds(busy_time_ns());
    s.idle_time = std::chrono::nanoseconds(idle_ns_.load(std::memory_order_relaxed));
    s.parks = parks_.load(std::memory_order_relaxed);
    s.steals = steals_.load(std::memory_order_relaxed);
    s.wakeups = wakeups_.load(std::memory_order_relaxed);
    s.local_spawns = spawned_.load(std::memory_order_relaxed);
    s.allocation_failures = alloc_failures_.load(std::memory_order_relaxed);
    s.avg_processing_time_ns = run_histogram_.mean_ns();
    s.busy_since_ns = busy_since_ns_.load(std::memory_order_relaxed);  // statistics only
    return s;
  }

  // Closed busy stretches plus the one in progress, if any. Approximate
  // while the worker runs (the two words are read separately).
  [[nodiscard]] std::uint64_t busy_time_ns() const noexcept {
    // relaxed: statistics only.
    const std::uint64_t closed = busy_ns_.load(std::memory_order_relaxed);
    const std::uint64_t since = busy_since_ns_.load(std::memory_order_relaxed);
    if (since == 0) {
      // The stretch may have closed between the two loads: re-read the total.
      return std::max(closed, busy_ns_.load(std::memory_order_relaxed));
    }
    const std::uint64_t now = steady_now_ns();
    return closed + (now > since ? now - since : 0);
  }

  std::string name_;  // as given to the handle; empty: "<pool name>-<index>"
  os_thread thread_;
  std::size_t index_ = 0;
  // Set by the pool before the thread starts (the thread allocates nothing
  // to name itself): name_, or "<pool name>-<index>".
  std::string thread_name_;
  bool prepared_ = false;   // the pool has set up the node cache, group and counters
  bool published_ = false;  // has a steal slot (kept when the worker leaves and comes back)

  // Written only by this worker's thread; padded away from other workers'.
  // processed_ is stored with release: wait_idle() reads it with acquire so
  // that a finished job's effects are visible when wait_idle() returns.
  alignas(64) std::atomic<std::uint64_t> processed_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint64_t> cancelled_{0};
  std::atomic<std::uint64_t> busy_ns_{0};
  std::atomic<std::uint64_t> busy_since_ns_{0};  // start of the current busy stretch, 0 when parked or stopped
  std::atomic<std::uint64_t> idle_ns_{0};
  std::atomic<std::uint64_t> parks_{0};
  std::atomic<std::uint64_t> steals_{0};
  std::atomic<std::uint64_t> wakeups_{0};
  // Jobs this worker pushed onto its own deque (accepted there, not through
  // the injector). Stored with release before the push; idle detection adds
  // it to the accepted total.
  std::atomic<std::uint64_t> spawned_{0};
  // Allocations that failed on this worker's thread (it fell back to a path
  // that needs none; see thread_pool.hpp, "Out of memory").
  std::atomic<std::uint64_t> alloc_failures_{0};

  // Sampled jobs' enqueue->start and run times; written by this worker only.
  latency_histogram wait_histogram_;
  latency_histogram run_histogram_;

  // Jobs spawned by jobs running on this worker, and the rest of a batch it
  // took from the pool's queue; thieves steal from the top. 64 slots (512
  // bytes) hold the rest of the largest injector batch; the ring doubles
  // when spawning needs more.
  node_deque deque_{max_injector_batch};
  // The LIFO slot: the newest job spawned on this worker, or 0. Only the
  // owner puts a job here (a newer one pushes the previous one onto the
  // deque); the owner takes it first, and thieves take it with an exchange
  // only after finding every deque empty (see pool_core::push_local(), src/pool_core_push.cpp).
  // The value is the job's node address; its low bit marks a continuation
  // (pool_core::local_push::continuation), which the owner runs as soon as
  // the current job returns: no worker is woken for it and idle workers do
  // not count it as work (see pool_core::work_visible()).
  // On a line of its own: thieves' polls of it must not pull in the
  // owner-only fields below, which the owner writes for every job.
  using slot_word = std::uintptr_t;
  static constexpr slot_word continuation_bit = 1;
  static_assert(alignof(job_node) > continuation_bit, "the low bit of a node address must be free");
  [[nodiscard]] static slot_word slot_word_of(job_node* node, bool continuation) noexcept {
    return reinterpret_cast<slot_word>(node) | (continuation ? continuation_bit : 0);
  }
  [[nodiscard]] static job_node* slot_node(slot_word v) noexcept {
    // The value came from slot_word_of(): the address of a live node with
    // its low bit maybe set, so the cast gives back that very node.
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a tagged pointer, see above
    return reinterpret_cast<job_node*>(v & ~continuation_bit);
  }
  alignas(64) std::atomic<slot_word> lifo_slot_{0};
  // Typed pools: the rank of the kind on the deque (batch_rank_'s copy for
  // other threads; a typed pool has no LIFO slot, so this line is quiet).
  // Written with the batch, read by drop_oldest to pick the deque of the
  // lowest-priority kind; relaxed both ways: a hint, not a hand-over.
  std::atomic<unsigned> deque_rank_{0};
  alignas(64) std::uint32_t lifo_streak_ = 0;  // owner thread only: jobs taken from the slot in a row
  job_node_pool::cache node_cache_;            // owner thread only
  std::uint32_t rng_state_ = 0;                // owner thread only: victim selection
  std::uint32_t tick_ = 0;                     // owner thread only: injector fairness
  unsigned batch_rank_ = 0;                    // owner thread only: typed pools, the kind on the deque
  bool degraded_ = false;                      // owner thread only: the last allocation attempt failed
  // Owner thread only: below help_floor_ (half the worker's stack used) a
  // helping wait runs only this worker's own jobs (pool_core::find_and_run());
  // help_floor_unknown: not found yet (looked for again at the next helping
  // wait; pool_core.cpp, past_help_floor()). Found at the
  // first helping wait, halfway between help_base_ (the worker loop's
  // frame) and the stack's end: looking that end up allocates on the
  // calling thread with glibc (pthread_getattr_np), which would give every
  // worker a malloc arena of its own (a page of RSS each), so a worker that
  // never helps never looks.
  static constexpr std::uintptr_t help_floor_unknown = ~std::uintptr_t{0};
  std::uintptr_t help_base_ = 0;
  std::uintptr_t help_floor_ = help_floor_unknown;
  // Owner thread only: the worker whose LIFO-slot continuation this one
  // watches as a thief, that worker's job count and when watching began
  // (pool_core::owner_stalled()).
  const pool_worker* watched_ = nullptr;
  std::uint64_t watched_progress_ = 0;
  std::uint64_t watched_since_ = 0;
  // Jobs per visit to the injector (thread_worker::set_injector_batch); any
  // thread writes, the owner reads it once per visit (relaxed: a setting).
  std::atomic<std::uint32_t> injector_batch_{default_injector_batch};

  // Job kinds this worker serves (bit r = rank r; typed pools). Set before
  // the worker is started and constant afterwards.
  std::uint64_t responsibility_mask_ = ~std::uint64_t{0};

  // Set (release) once a pool owns the worker - pool_core::adopt(), under
  // the pool's lifecycle mutex - and never cleared; read (acquire) by
  // thread_worker::belongs_to_pool(), so settings fixed at that point
  // (a typed worker's responsibilities) are refused afterwards.
  std::atomic<bool> owned_by_pool_{false};

  // The OS thread id of the running thread (0 before it started); set by
  // the worker itself, read by set_affinity()/set_nice().
  std::atomic<int> os_tid_{0};

  // resize(): active -> retiring (set by the pool) -> exited (set by the
  // worker when it leaves its loop), or retiring -> active again when the
  // pool grows before the worker left.
  enum : int { active = 0, retiring = 1, exited = 2 };
  std::atomic<int> membership_{active};

  // The workers sharing this worker's responsibilities park together; set
  // by the pool before the thread starts.
  wake_group* group_ = nullptr;
};

}  // namespace thread_system::detail
