// The injectors over each queue implementation (the interface and its
// accounting contract are in scheduler/injector.hpp). A private header of
// the library's sources, not installed: src/injector.cpp builds them
// (make_injector), and the scheduler core (src/pool_core*.cpp) sees the
// final classes, so the compiler may devirtualise the hot calls. The public
// headers include no queue.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>

#include "thread_system/detail/chaos.hpp"
#include "thread_system/queues/adaptive_job_queue.hpp"
#include "thread_system/queues/bounded_queue.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"
#include "thread_system/queues/queue_concept.hpp"
#include "thread_system/queues/sharded_queue.hpp"
#include "thread_system/queues/two_lock_job_queue.hpp"
#include "thread_system/scheduler/injector.hpp"

namespace thread_system::detail {

// max(1, size / consumers) jobs, at most out.size(), by pop_batch(): a
// worker's fair share from a queue that has no pop of its own for it.
template <job_queue_model Q>
std::size_t pop_fair_share(Q& queue, std::span<job_function> out, std::size_t consumers) {
  const std::size_t size = queue.size_approx();
  std::size_t fair = consumers <= 1 ? size : size / consumers;
  fair = std::clamp<std::size_t>(fair, 1, out.size());
  return queue.pop_batch(out.first(fair));
}

// A worker's share of any queue: the queue's own pop_share() when it has one
// (two_lock_job_queue: under its head lock; job_queue: under its lock;
// lockfree_queue: one CAS for the run), else
// pop_fair_share().
template <job_queue_model Q>
std::size_t take_share(Q& queue, std::span<job_function> out, std::size_t consumers) {
  if constexpr (requires { queue.pop_share(out, consumers); }) {
    return queue.pop_share(out, consumers);
  } else {
    return pop_fair_share(queue, out, consumers);
  }
}

// A queue that counts the jobs it accepted itself (accepted_pushes(), final
// after close() plus wait_for_pushes() where it has one) and reports, from a
// push, whether an earlier job was still waiting (try_push(job, was_empty)).
template <typename Q>
concept self_counting_queue = job_queue_model<Q> && requires(Q& q, const Q& cq, job_function&& fn, bool& was_empty) {
  { q.try_push(std::move(fn), was_empty) } -> std::same_as<result<void>>;
  { cq.accepted_pushes() } -> std::same_as<std::uint64_t>;
};

// The injector over a self-counting queue: no counter of its own on the push
// path. two_lock_job_queue counts inside its push's critical section (exact, free);
// lockfree_queue per hazard record, before a job can be popped, and its
// close() resolves every push in flight; two_lock_adaptive_job_queue in its
// two queues, each as above.
template <self_counting_queue Q>
class self_counting_injector final : public injector {
 public:
  template <typename... A>
  explicit self_counting_injector(A&&... args) : queue_(std::forward<A>(args)...) {}

  result<void> push(job_function&& fn) override { return queue_.try_push(std::move(fn)); }
  result<void> push_batch(std::span<job_function> fns) override { return queue_.push_batch(fns); }
  result<void> push_and_check(job_function&& fn, bool& wake) override {
    wake = true;  // try_push sets it only when the job went in
    return queue_.try_push(std::move(fn), wake);
  }
  std::size_t pop_share(std::span<job_function> out, std::size_t consumers) override {
    return take_share(queue_, out, consumers);
  }
  bool empty_approx() const noexcept override { return queue_.empty_approx(); }
  std::size_t size_approx() const noexcept override { return queue_.size_approx(); }
  void close() override { queue_.close(); }
  bool is_closed() const noexcept override { return queue_.is_closed(); }
  std::uint64_t accepted() const noexcept override { return queue_.accepted_pushes(); }
  void wait_for_pushes() const noexcept override {
    if constexpr (requires { queue_.wait_for_pushes(); }) queue_.wait_for_pushes();
  }
  std::uint64_t queue_switches() const noexcept override {
    if constexpr (requires { queue_.get_statistics().switches; }) {
      return queue_.get_statistics().switches;
    } else {
      return 0;
    }
  }
  /// The queue itself, for white-box tests (tests/scheduler/injector_test.cpp).
  Q& queue_for_testing() noexcept { return queue_; }

 private:
  Q queue_;
};

// The mutex strategy: two_lock_job_queue, whose producers and workers never
// wait for each other (workers take jobs in shares; see its header).
using mutex_injector = self_counting_injector<two_lock_job_queue>;
using lockfree_injector = self_counting_injector<lockfree_queue>;
// The adaptive strategy over the same two-lock queue as its mutex side.
using adaptive_injector = self_counting_injector<two_lock_adaptive_job_queue>;

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
    return take_share(queue_, out, consumers);
  }
  bool empty_approx() const noexcept override { return queue_.size_approx() == 0; }
  std::size_t size_approx() const noexcept override { return queue_.size_approx(); }
  std::size_t capacity() const noexcept override {
    if constexpr (std::is_same_v<Q, bounded_queue>) {
      return queue_.capacity();
    } else {
      return 0;
    }
  }
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
    if constexpr (std::is_same_v<Q, bounded_queue>) {
      // A batch above the ring's capacity never fits: the queue refuses it
      // (invalid_argument) without touching it, and nothing is counted.
      if (n > queue_.capacity()) return push();
      // A full ring refuses before the push is counted, so that accepted()
      // does not rise and fall again for each refusal (a ring that fills
      // meanwhile still refuses below, and the count is taken back then).
      // relaxed: a hint; a closed queue answers pool_stopped below.
      if (queue_.certainly_full_for(n) && !closed_.load(std::memory_order_relaxed)) {
        return make_error(error_code::queue_full, "bounded_queue: queue is full");
      }
    }
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

}  // namespace thread_system::detail
