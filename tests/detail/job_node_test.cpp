// job_node and job_node_pool (detail/job_node.hpp): one cache line per node;
// a cache hands out what it was given back first; a first refill hands out
// what was asked for (rounded up to refill_step), later ones a batch; nodes
// released into another worker's cache travel back through the shared list,
// so memory stays bounded by the peak number of nodes in use.
// (Out-of-memory behaviour: tests/stress/fault_sweep_test.cpp.)
#include "thread_system/detail/job_node.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace ts = thread_system;
using pool_t = ts::detail::job_node_pool;

namespace {

TEST(JobNode, EachNodeHasACacheLineOfItsOwn) {
  static_assert(alignof(ts::detail::job_node) == 64);
  static_assert(sizeof(ts::detail::job_node) % 64 == 0);
  pool_t pool;
  pool_t::cache cache;
  cache.attach(&pool);
  std::vector<ts::detail::job_node*> nodes;
  for (int i = 0; i < 40; ++i) nodes.push_back(cache.allocate());
  std::set<std::uintptr_t> lines;
  for (auto* n : nodes) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(n) % 64, 0U);
    EXPECT_FALSE(n->fn) << "a node starts empty";
    lines.insert(reinterpret_cast<std::uintptr_t>(n) / 64);
  }
  EXPECT_EQ(lines.size(), nodes.size());
  for (auto* n : nodes) cache.release(n);
}

TEST(JobNode, RefillsHandOutWhatWasAskedForFirstThenBatches) {
  EXPECT_EQ(pool_t::round_up(0), pool_t::refill_step);
  EXPECT_EQ(pool_t::round_up(1), pool_t::refill_step);
  EXPECT_EQ(pool_t::round_up(15), 16U);
  EXPECT_EQ(pool_t::round_up(17), 32U);
  EXPECT_EQ(pool_t::round_up(1000), pool_t::batch_size);

  pool_t pool;
  pool_t::cache cache;
  cache.attach(&pool);
  EXPECT_EQ(cache.available(), 0U) << "attach() reserves room, not nodes";
  ASSERT_TRUE(cache.reserve(15));
  EXPECT_EQ(cache.available(), 16U) << "the first refill: what was asked, rounded up";
  std::vector<ts::detail::job_node*> taken;
  for (int i = 0; i < 17; ++i) taken.push_back(cache.allocate());
  EXPECT_EQ(cache.available(), pool_t::batch_size - 1) << "the second refill: a batch";
  for (auto* n : taken) cache.release(n);
}

TEST(JobNode, AReleasedNodeIsTheNextOneHandedOut) {
  pool_t pool;
  pool_t::cache cache;
  cache.attach(&pool);
  ts::detail::job_node* const a = cache.allocate();
  ts::detail::job_node* const b = cache.allocate();
  EXPECT_NE(a, b);
  cache.release(a);
  EXPECT_EQ(cache.allocate(), a);
  ts::detail::job_node* const c = cache.try_allocate();
  EXPECT_NE(c, nullptr) << "try_allocate() succeeds while memory lasts";
  cache.release(c);
  cache.release(a);
  cache.release(b);
}

// A producer-consumer pattern: one cache allocates, another (a thief, say)
// releases. The releasing cache spills to the shared list past 4 batches,
// and the allocating one refills from there: after the first round no new
// node is ever constructed.
TEST(JobNode, NodesReleasedElsewhereComeBackThroughTheSharedList) {
  pool_t pool;
  pool_t::cache producer;
  pool_t::cache thief;
  producer.attach(&pool);
  thief.attach(&pool);
  constexpr int per_round = 1000;
  std::set<ts::detail::job_node*> seen;
  std::vector<ts::detail::job_node*> in_flight;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < per_round; ++i) {
      in_flight.push_back(producer.allocate());
      seen.insert(in_flight.back());
    }
    for (auto* n : in_flight) thief.release(n);
    in_flight.clear();
    EXPECT_LE(thief.available(), 4 * pool_t::batch_size) << "a cache keeps at most four batches";
  }
  // The peak in use was per_round; what the caches and the shared list hold
  // on top of it is bounded by a few batches per cache, not by the rounds.
  EXPECT_LE(seen.size(), static_cast<std::size_t>(per_round) + 10 * pool_t::batch_size) << seen.size();
}

// reserve_for_worker() allocates raw storage for a worker's first refill on
// the calling thread; the refill then constructs nodes in it.
TEST(JobNode, StorageReservedForAWorkerServesItsFirstRefill) {
  pool_t pool;
  for (int i = 0; i < 20; ++i) pool.reserve_for_worker();  // 20 workers: two chunks of 256
  pool_t::cache cache;
  cache.attach(&pool);
  ASSERT_TRUE(cache.reserve(15));
  EXPECT_EQ(cache.available(), pool_t::refill_step);
  std::vector<ts::detail::job_node*> nodes;
  while (cache.available() > 0) nodes.push_back(cache.allocate());
  for (auto* n : nodes) cache.release(n);
}

}  // namespace
