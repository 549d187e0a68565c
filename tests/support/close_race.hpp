// A close() racing pushes, for queues whose accepted_pushes() must be final
// once close() and wait_for_pushes() have returned (lockfree_queue,
// adaptive_job_queue): the scaffold their tests share.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "thread_system/core/job_function.hpp"

namespace thread_system::test {

// Three producers push empty jobs until the queue refuses one (closed); one
// consumer pops until the queue is closed, calling `after_pop()` after each
// job it took. After `pause`, the calling thread closes the queue and waits
// for pushes in flight: accepted_pushes() must then equal the pushes that
// succeeded, and stay so. `round` labels a failure. Bounded work on a slow
// machine: a producer pushes at most `max_pushes` jobs (then waits for the
// close, and its next push must be refused), since the short pause can last
// far longer on a loaded machine.
template <typename Queue, typename AfterPop>
void expect_accepted_count_final_after_close(Queue& queue, std::chrono::microseconds pause, AfterPop after_pop,
                                             std::size_t round) {
  std::atomic<std::uint64_t> succeeded{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();  // pairs with the release below
      constexpr std::size_t max_pushes = 20'000;
      for (std::size_t n = 0;; ++n) {
        if (n == max_pushes) {
          while (!queue.is_closed()) std::this_thread::yield();
        }
        if (!queue.try_push(job_function([] {}))) return;   // closed
        succeeded.fetch_add(1, std::memory_order_relaxed);  // read after the joins
      }
    });
  }
  std::thread consumer([&] {
    job_function job;
    while (!queue.is_closed()) {
      if (queue.try_pop(job)) after_pop();
    }
  });
  go.store(true, std::memory_order_release);  // pairs with the producers' acquire
  std::this_thread::sleep_for(pause);
  queue.close();
  queue.wait_for_pushes();
  const std::uint64_t final_count = queue.accepted_pushes();
  for (auto& t : producers) t.join();
  consumer.join();
  // seq_cst: after the joins, which order every increment before it.
  EXPECT_EQ(final_count, succeeded.load(std::memory_order_seq_cst)) << "round " << round;
  EXPECT_EQ(queue.accepted_pushes(), final_count) << "round " << round;
}

}  // namespace thread_system::test
