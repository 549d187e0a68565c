// detail/vyukov_ring.hpp: the producer side of Vyukov's bounded ring that
// bounded_queue uses. claim_positions() takes
// `count` consecutive positions, all or none, only when their cells are
// free; reports full while a cell has not been freed; closed once the top
// bit of the tail is set; and concurrent producers get disjoint positions.
#include "thread_system/detail/vyukov_ring.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace ts = thread_system;
using ts::detail::ring_claim;

namespace {

// A ring of `N` cells with no payload: only the sequence protocol.
template <std::size_t N>
struct ring {
  std::array<std::atomic<std::size_t>, N> sequence{};
  std::atomic<std::size_t> tail{0};
  ring() {
    for (std::size_t i = 0; i < N; ++i) sequence[i].store(i, std::memory_order_relaxed);  // before sharing
  }
  ring_claim claim(std::size_t count, std::size_t& first) {
    return ts::detail::claim_positions(
        tail, count, [this](std::size_t p) -> std::atomic<std::size_t>& { return sequence[p % N]; }, first);
  }
  // The producer publishes, then the consumer frees `position` (next lap).
  // release: as the rings do; the claim's acquire loads pair with free().
  void publish(std::size_t position) { sequence[position % N].store(position + 1, std::memory_order_release); }
  void free(std::size_t position) { sequence[position % N].store(position + N, std::memory_order_release); }
};

}  // namespace

TEST(VyukovRing, ClaimsConsecutivePositionsUntilFull) {
  ring<4> r;
  std::size_t first = 99;
  ASSERT_EQ(r.claim(3, first), ring_claim::ok);
  EXPECT_EQ(first, 0U);
  for (std::size_t p = 0; p < 3; ++p) r.publish(p);
  // Two more do not fit (one cell left): all or none, tail unchanged.
  EXPECT_EQ(r.claim(2, first), ring_claim::full);
  EXPECT_EQ(r.tail.load(std::memory_order_relaxed), 3U);  // one thread: no ordering needed
  ASSERT_EQ(r.claim(1, first), ring_claim::ok);
  EXPECT_EQ(first, 3U);
  r.publish(3);
  EXPECT_EQ(r.claim(1, first), ring_claim::full);
  // The consumer frees position 0: its cell is free for position 4.
  r.free(0);
  ASSERT_EQ(r.claim(1, first), ring_claim::ok);
  EXPECT_EQ(first, 4U);
}

TEST(VyukovRing, ClosedBitRefusesEveryLaterClaim) {
  ring<4> r;
  std::size_t first = 0;
  ASSERT_EQ(r.claim(1, first), ring_claim::ok);
  r.tail.fetch_or(ts::detail::ring_closed_bit, std::memory_order_acq_rel);  // as the rings' close()
  EXPECT_EQ(r.claim(1, first), ring_claim::closed);
  EXPECT_EQ(r.tail.load(std::memory_order_relaxed) & ~ts::detail::ring_closed_bit, 1U);  // one thread
}

TEST(VyukovRing, ConcurrentProducersGetDisjointPositions) {
  constexpr std::size_t cells = 1 << 12;
  constexpr int producers = 4;
  ring<cells> r;
  std::vector<std::atomic<int>> owner_count(cells);
  std::vector<std::thread> threads;
  for (int t = 0; t < producers; ++t) {
    threads.emplace_back([&, t] {
      for (;;) {
        std::size_t first = 0;
        const std::size_t count = 1 + static_cast<std::size_t>(t) % 3;
        const ring_claim c = r.claim(count, first);
        if (c != ring_claim::ok) return;  // full: every position claimed
        for (std::size_t i = 0; i < count; ++i) {
          owner_count[first + i].fetch_add(1, std::memory_order_relaxed);  // checked after join()
          r.publish(first + i);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::size_t claimed = r.tail.load(std::memory_order_relaxed);  // after join(): ordered by it
  EXPECT_GT(claimed, cells - 3);                                       // full means fewer than `count` cells left
  // relaxed: after join()
  for (std::size_t p = 0; p < claimed; ++p) EXPECT_EQ(owner_count[p].load(std::memory_order_relaxed), 1) << p;
}

TEST(VyukovRing, DifferenceIsSignedAcrossWrapAround) {
  EXPECT_EQ(ts::detail::ring_difference(0, ~std::size_t{0}), 1);
  EXPECT_EQ(ts::detail::ring_difference(~std::size_t{0}, 0), -1);
}
