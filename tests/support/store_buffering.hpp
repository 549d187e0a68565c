// The store-buffering litmus test (Dekker's pattern), shared by the fence
// tests: two threads each store 1 to their own flag, run their side of a
// fence, then load the other thread's flag. A store->load fence pair must
// never let both loads miss. Rounds are handed over with release/acquire
// counters, the first thread's start varied, and bounded by a round_budget
// (a loaded machine runs fewer rounds, never past the watchdog).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>

#include "test_support.hpp"
#include "thread_system/detail/spin.hpp"

namespace thread_system::test {

/// Rounds where both threads missed the other's store, and rounds run.
struct store_buffering_result {
  std::size_t both_missed = 0;
  std::size_t rounds = 0;
};

/// Spins (yielding now and then, for a loaded machine) until `word` reads `value`.
inline void spin_until_equal(const std::atomic<std::uint64_t>& word, std::uint64_t value) {
  for (unsigned spins = 0; word.load(std::memory_order_acquire) != value; ++spins) {  // pairs with the release stores
    if (spins % 64 == 63) {
      std::this_thread::yield();
    } else {
      detail::cpu_relax();
    }
  }
}

/// Runs the litmus test with `this_fence` on the calling thread and
/// `other_fence` on a second thread, for at most `rounds` rounds (at least
/// 1000, then within `budget`).
template <typename ThisFence, typename OtherFence>
store_buffering_result store_buffering(ThisFence this_fence, OtherFence other_fence, std::size_t rounds,
                                       std::chrono::milliseconds budget_time) {
  std::atomic<int> x{0};
  std::atomic<int> y{0};
  std::atomic<std::uint64_t> go{0};
  std::atomic<std::uint64_t> done{0};
  std::atomic<int> other_saw{0};
  std::atomic<bool> quit{false};
  std::thread other([&] {
    for (std::uint64_t round = 1;; ++round) {
      spin_until_equal(go, round);
      if (quit.load(std::memory_order_relaxed)) return;  // ordered by the acquire of `go`
      y.store(1, std::memory_order_relaxed);
      other_fence();
      other_saw.store(x.load(std::memory_order_relaxed), std::memory_order_relaxed);
      done.store(round, std::memory_order_release);  // pairs with spin_until_equal() below: the round's loads are done
    }
  });
  round_budget budget(rounds, 1'000, budget_time);
  store_buffering_result result;
  std::uint64_t round = 1;
  for (std::size_t i = 0; budget.next(i); ++i, ++round) {
    // relaxed: the other thread is waiting for `go`, whose release publishes these.
    x.store(0, std::memory_order_relaxed);
    y.store(0, std::memory_order_relaxed);
    go.store(round, std::memory_order_release);                    // pairs with the other thread's spin_until_equal()
    for (std::size_t d = 0; d < i % 16; ++d) detail::cpu_relax();  // vary which thread goes first
    x.store(1, std::memory_order_relaxed);
    this_fence();
    const int this_saw = y.load(std::memory_order_relaxed);
    spin_until_equal(done, round);
    if (this_saw == 0 && other_saw.load(std::memory_order_relaxed) == 0) ++result.both_missed;
  }
  quit.store(true, std::memory_order_relaxed);  // published by the release of `go`
  go.store(round, std::memory_order_release);
  other.join();
  result.rounds = budget.ran();
  return result;
}

}  // namespace thread_system::test
