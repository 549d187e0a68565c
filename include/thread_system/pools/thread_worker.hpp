// thread_worker: one worker thread of a thread_pool.
//
// Seed-style code creates workers and hands them to a pool:
//
//   std::vector<std::unique_ptr<thread_worker>> workers;
//   for (int i = 0; i < 4; ++i) workers.push_back(std::make_unique<thread_worker>());
//   pool->enqueue_batch(std::move(workers));
//   pool->start();
//
// The pool owns its workers; pointers from `thread_pool::get_workers()` stay
// valid until the pool is destroyed. get_statistics() may be called from any
// thread at any time; each counter is written only by the worker itself.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/job_node.hpp"
#include "thread_system/detail/os_thread.hpp"
#include "thread_system/queues/work_stealing_deque.hpp"
#include "thread_system/scheduler/worker_statistics.hpp"

namespace thread_system {

namespace detail {
class pool_core;
struct wake_group;
}  // namespace detail

/// One worker thread of a thread_pool; seed-style code creates workers and hands them to a pool, which owns them.
class thread_worker {
 public:
  /// `name` becomes the OS thread name (truncated to 15 bytes on Linux);
  /// empty means "<pool name>-<index>".
  explicit thread_worker(std::string name = {}) : name_(std::move(name)) {}
  /// Not copyable.
  thread_worker(const thread_worker&) = delete;
  /// Not copyable.
  thread_worker& operator=(const thread_worker&) = delete;
  virtual ~thread_worker() = default;  // the owning pool joins the thread first

  /// The name given at construction (empty: the pool names the thread "<pool name>-<index>").
  [[nodiscard]] const std::string& get_name() const noexcept { return name_; }

  /// A snapshot of this worker's counters; callable from any thread at any time.
  [[nodiscard]] worker_statistics get_statistics() const noexcept {
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

  /// The most jobs a worker takes from its pool's queue per visit.
  static constexpr std::size_t max_injector_batch = 64;
  /// The batch a worker takes unless told otherwise.
  static constexpr std::size_t default_injector_batch = 16;

  /// At most `n` jobs per visit to the pool's queue (the injector): the
  /// first runs at once, the rest go onto this worker's deque, where idle
  /// workers of a thread_pool can steal them (in a typed pool workers do not
  /// steal: only this worker runs them, and it takes a batch only of the
  /// highest type it serves). A larger batch spreads one visit's cost (the
  /// queue's lock or CASes, one wake-up check) over more jobs and raises
  /// throughput of short jobs; a smaller one keeps jobs in the shared queue
  /// longer, where any worker can take them first, which shortens the wait
  /// of a job queued behind a long one. A visit never takes more than a
  /// fair share of the queue (queued jobs / workers, at least one), and a
  /// helping wait always takes one. Any thread, any time; the worker uses
  /// the new size from its next visit. `invalid_argument` for 0 or more
  /// than max_injector_batch.
  result<void> set_injector_batch(std::size_t n) {
    if (n == 0 || n > max_injector_batch) {
      return make_error(error_code::invalid_argument, "thread_worker::set_injector_batch: " + std::to_string(n) +
                                                          " is outside 1.." + std::to_string(max_injector_batch));
    }
    injector_batch_.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);  // a setting; read by the worker
    return {};
  }
  /// The batch size set_injector_batch() set (default_injector_batch at first).
  [[nodiscard]] std::size_t injector_batch() const noexcept {
    return injector_batch_.load(std::memory_order_relaxed);  // a setting, no data published with it
  }

  /// Seed API: enabled, up to `batch_size` jobs per visit (clamped to
  /// 1..max_injector_batch: the seed's call is a hint and returns nothing);
  /// disabled, one job per visit. set_injector_batch() is the checked form.
  void set_batch_processing(bool enabled, std::size_t batch_size = 32) noexcept {
    const std::size_t n = enabled ? std::clamp<std::size_t>(batch_size, 1, max_injector_batch) : 1;
    injector_batch_.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);  // as set_injector_batch()
  }
  /// Seed API: true when the worker takes more than one job per visit.
  [[nodiscard]] bool is_batch_processing_enabled() const noexcept { return injector_batch() > 1; }

  /// Wait and run times of the jobs this worker ran that were sampled.
  [[nodiscard]] worker_latency latency() const noexcept {
    return {wait_histogram_.snapshot(), run_histogram_.snapshot()};
  }

 private:
  friend class detail::pool_core;

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
    const std::uint64_t now = detail::steady_now_ns();
    return closed + (now > since ? now - since : 0);
  }

  std::string name_;
  detail::os_thread thread_;
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

  // Jobs spawned by jobs running on this worker; thieves steal from the top.
  // 64 slots (512 bytes) hold the rest of the largest injector batch; the
  // ring doubles when spawning needs more.
  work_stealing_deque<detail::job_node*> deque_{max_injector_batch};
  // The LIFO slot: the newest job spawned on this worker, or 0. Only the
  // owner puts a job here (a newer one pushes the previous one onto the
  // deque); the owner takes it first, and thieves take it with an exchange
  // only after finding every deque empty (see pool_core::push_local(), src/pool_core.cpp).
  // The value is the job's node address; its low bit marks a continuation
  // (pool_core::enqueue_continuation()), which the owner runs as soon as
  // the current job returns: no worker is woken for it and idle workers do
  // not count it as work (see pool_core::work_visible()).
  // On a line of its own: thieves' polls of it must not pull in the
  // owner-only fields below, which the owner writes for every job.
  using slot_word = std::uintptr_t;
  static constexpr slot_word continuation_bit = 1;
  static_assert(alignof(detail::job_node) > continuation_bit, "the low bit of a node address must be free");
  [[nodiscard]] static slot_word slot_word_of(detail::job_node* node, bool continuation) noexcept {
    return reinterpret_cast<slot_word>(node) | (continuation ? continuation_bit : 0);
  }
  [[nodiscard]] static detail::job_node* slot_node(slot_word v) noexcept {
    // The value came from slot_word_of(): the address of a live node with
    // its low bit maybe set, so the cast gives back that very node.
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a tagged pointer, see above
    return reinterpret_cast<detail::job_node*>(v & ~continuation_bit);
  }
  alignas(64) std::atomic<slot_word> lifo_slot_{0};
  alignas(64) std::uint32_t lifo_streak_ = 0;  // owner thread only: jobs taken from the slot in a row
  detail::job_node_pool::cache node_cache_;    // owner thread only
  std::uint32_t rng_state_ = 0;                // owner thread only: victim selection
  std::uint32_t tick_ = 0;                     // owner thread only: injector fairness
  unsigned batch_rank_ = 0;                    // owner thread only: typed pools, the kind on the deque
  bool degraded_ = false;                      // owner thread only: the last allocation attempt failed
  // Owner thread only: the worker whose LIFO-slot continuation this one
  // watches as a thief, that worker's job count and when watching began
  // (pool_core::owner_stalled()).
  const thread_worker* watched_ = nullptr;
  std::uint64_t watched_progress_ = 0;
  std::uint64_t watched_since_ = 0;
  // Jobs per visit to the injector (set_injector_batch); any thread writes,
  // the owner reads it once per visit (relaxed: a setting).
  std::atomic<std::uint32_t> injector_batch_{default_injector_batch};

 protected:
  /// Job kinds this worker serves (bit r = rank r; typed pools). Set before
  /// the worker is started and constant afterwards.
  std::uint64_t responsibility_mask_ = ~std::uint64_t{0};

 private:
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
  detail::wake_group* group_ = nullptr;
};

}  // namespace thread_system
