// The injector: the queue through which jobs submitted from outside the
// pool's workers enter it. A pool picks its kind at construction
// (pool_options::queue); the worker loop is the same for every kind.
//
// Accounting contract (what idle detection and stop() rely on):
//   * accepted() counts every job a push accepted. The count becomes visible
//     no later than the job itself: a thread that has observed a popped
//     job's completion through a release/acquire chain reads an accepted()
//     that includes it.
//   * After close() and wait_for_pushes() return, accepted() is exact and
//     final: every later push fails with pool_stopped and is not counted.
//   * After close(), once is_closed() has been observed, a pop that finds
//     nothing means every accepted job has already been popped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <utility>
#include "thread_system/detail/chaos.hpp"

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/queues/adaptive_job_queue.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"
#include "thread_system/queues/queue_concept.hpp"
#include "thread_system/queues/sharded_queue.hpp"

namespace thread_system {

/// Which queue a thread_pool uses for jobs submitted from outside its workers.
enum class pool_queue {
  mutex,     ///< job_queue: a growing ring under a spin lock (the default).
  lockfree,  ///< lockfree_queue: Michael-Scott with hazard pointers.
  adaptive,  ///< adaptive_job_queue (ADAPTIVE): switches between the two above.
  sharded,   ///< sharded_queue: per-producer shards.
};

[[nodiscard]] constexpr const char* to_string(pool_queue q) noexcept {
  switch (q) {
    case pool_queue::mutex:
      return "mutex";
    case pool_queue::lockfree:
      return "lockfree";
    case pool_queue::adaptive:
      return "adaptive";
    case pool_queue::sharded:
      return "sharded";
  }
  return "unknown";
}

namespace detail {

class injector {
 public:
  virtual ~injector() = default;
  [[nodiscard]] virtual result<void> push(job_function&& fn) = 0;
  [[nodiscard]] virtual result<void> push_batch(std::span<job_function> fns) = 0;
  /// push() that also tells the pool whether to wake a worker. `wake` is
  /// set false only when the push exactly (inside the queue's critical
  /// section) found jobs already queued: the push that made the queue
  /// non-empty woke a worker, and a worker that takes jobs and leaves some
  /// behind wakes another (thread_pool::find_and_run), so these jobs are
  /// covered. Only an injector with one kind of job may say so; the default
  /// always wakes.
  [[nodiscard]] virtual result<void> push_and_check(job_function&& fn, bool& wake) {
    wake = true;
    return push(std::move(fn));
  }
  /// Pops at most max(1, size / consumers) jobs, at most out.size().
  [[nodiscard]] virtual std::size_t pop_share(std::span<job_function> out, std::size_t consumers) = 0;
  [[nodiscard]] virtual bool empty_approx() const noexcept = 0;
  [[nodiscard]] virtual std::size_t size_approx() const noexcept = 0;
  virtual void close() = 0;
  [[nodiscard]] virtual bool is_closed() const noexcept = 0;
  [[nodiscard]] virtual std::uint64_t accepted() const noexcept = 0;
  /// After close(): returns once no push that could still succeed is running.
  virtual void wait_for_pushes() const noexcept {}

  // ---- worker-aware access (typed pools) ----------------------------------
  // A worker serves the job kinds in its responsibility mask (bit r = the
  // kind of rank r; all bits = everything). Plain injectors hold one kind and
  // ignore the mask.

  /// pop_share() restricted to the kinds in `mask`.
  [[nodiscard]] virtual std::size_t pop_for(std::uint64_t mask, std::span<job_function> out, std::size_t consumers) {
    (void)mask;
    return pop_share(out, consumers);
  }
  /// True when a job of a kind in `mask` may be waiting (approximate, like empty_approx()).
  [[nodiscard]] virtual bool has_work_for(std::uint64_t mask) const noexcept {
    (void)mask;
    return !empty_approx();
  }
  /// The kinds that may have jobs waiting (bit per rank; all bits for a plain injector).
  [[nodiscard]] virtual std::uint64_t pending_mask() const noexcept { return empty_approx() ? 0 : ~std::uint64_t{0}; }
  /// Pops the job backpressure::drop_oldest discards to make room (the
  /// oldest queued job; a typed injector picks its lowest-priority kind).
  [[nodiscard]] virtual std::size_t pop_victim(std::span<job_function> out) { return pop_share(out.first(1), 1); }
  /// Called for a job carrying `tag` that a stop discarded (typed pools count it per kind).
  virtual void note_cancelled(std::uint8_t tag) noexcept { (void)tag; }
  /// Called for a sampled job of `tag` that waited `wait_ns` before it started.
  virtual void note_wait(std::uint8_t tag, std::uint64_t wait_ns) noexcept {
    (void)tag;
    (void)wait_ns;
  }
};

// job_queue counts acceptance inside its own critical section: exact, free.
class mutex_injector final : public injector {
 public:
  explicit mutex_injector(std::size_t capacity) : queue_(capacity) {}
  result<void> push(job_function&& fn) override { return queue_.try_push(std::move(fn)); }
  result<void> push_batch(std::span<job_function> fns) override { return queue_.push_batch(fns); }
  result<void> push_and_check(job_function&& fn, bool& wake) override {
    wake = true;  // try_push sets it only when the job went in
    return queue_.try_push(std::move(fn), wake);
  }
  std::size_t pop_share(std::span<job_function> out, std::size_t consumers) override {
    return queue_.pop_fair_share(out, consumers);
  }
  bool empty_approx() const noexcept override { return queue_.empty_approx(); }
  std::size_t size_approx() const noexcept override { return queue_.size_approx(); }
  void close() override { queue_.close(); }
  bool is_closed() const noexcept override { return queue_.is_closed(); }
  std::uint64_t accepted() const noexcept override { return queue_.total_pushed(); }

 private:
  job_queue queue_;
};

// Any other queue: acceptance is counted around the push. A push announces
// itself in pushes_in_flight_ and re-checks `closed_` (Dekker with close(),
// both sides seq_cst), so once close() has run and the in-flight count has
// drained, no push can still be accepted and the count is final.
template <job_queue_model Q>
class counting_injector final : public injector {
 public:
  template <typename... A>
  explicit counting_injector(A&&... args) : queue_(std::forward<A>(args)...) {}

  result<void> push(job_function&& fn) override {
    return counted(1, [&] { return queue_.try_push(std::move(fn)); });
  }
  result<void> push_batch(std::span<job_function> fns) override {
    return counted(fns.size(), [&] { return queue_.push_batch(fns); });
  }
  std::size_t pop_share(std::span<job_function> out, std::size_t consumers) override {
    const std::size_t size = queue_.size_approx();
    std::size_t fair = consumers <= 1 ? size : size / consumers;
    fair = std::clamp<std::size_t>(fair, 1, out.size());
    return queue_.pop_batch(out.first(fair));
  }
  bool empty_approx() const noexcept override { return queue_.size_approx() == 0; }
  std::size_t size_approx() const noexcept override { return queue_.size_approx(); }
  void close() override {
    closed_.store(true, std::memory_order_seq_cst);  // Dekker with push(): see counted()
    queue_.close();
  }
  bool is_closed() const noexcept override { return queue_.is_closed(); }
  std::uint64_t accepted() const noexcept override {
    return accepted_.load(std::memory_order_acquire);  // pairs with the release increment in counted()
  }
  void wait_for_pushes() const noexcept override {
    // seq_cst: ordered after close()'s store of closed_ (same thread).
    while (pushes_in_flight_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  }

 private:
  template <typename Push>
  result<void> counted(std::size_t n, Push push) {
    // seq_cst RMW then seq_cst load of closed_: either close() sees us in
    // flight (and waits), or we see closed_ and refuse without counting.
    pushes_in_flight_.fetch_add(1, std::memory_order_seq_cst);
    THREAD_SYSTEM_CHAOS_POINT();
    if (closed_.load(std::memory_order_seq_cst)) {
      pushes_in_flight_.fetch_sub(1, std::memory_order_release);  // pairs with wait_for_pushes()
      return make_error(error_code::pool_stopped, "queue is closed");
    }
    // release: counted before the job becomes poppable (see idle_now()).
    accepted_.fetch_add(n, std::memory_order_release);
    THREAD_SYSTEM_CHAOS_POINT();
    result<void> r;
    try {
      r = push();
    } catch (...) {  // e.g. bad_alloc while growing: not accepted, and no longer in flight
      accepted_.fetch_sub(n, std::memory_order_release);          // pairs with accepted()'s acquire
      pushes_in_flight_.fetch_sub(1, std::memory_order_release);  // pairs with wait_for_pushes()
      throw;
    }
    if (!r) accepted_.fetch_sub(n, std::memory_order_release);  // refused after all: not accepted
    pushes_in_flight_.fetch_sub(1, std::memory_order_release);  // pairs with wait_for_pushes()
    return r;
  }

  Q queue_;
  alignas(64) std::atomic<std::uint64_t> accepted_{0};
  alignas(64) std::atomic<std::uint32_t> pushes_in_flight_{0};
  std::atomic<bool> closed_{false};
};

inline std::unique_ptr<injector> make_injector(pool_queue kind, std::size_t initial_capacity) {
  switch (kind) {
    case pool_queue::lockfree:
      return std::make_unique<counting_injector<lockfree_queue>>();
    case pool_queue::adaptive:
      return std::make_unique<counting_injector<adaptive_job_queue>>(adaptive_job_queue::queue_strategy::ADAPTIVE);
    case pool_queue::sharded:
      return std::make_unique<counting_injector<sharded_queue>>();
    case pool_queue::mutex:
      break;
  }
  return std::make_unique<mutex_injector>(initial_capacity);
}

}  // namespace detail
}  // namespace thread_system
