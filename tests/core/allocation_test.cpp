// Proves that small jobs cause no heap allocation, by counting every call of
// the global operator new in this test binary (it has its own executable so
// the replacement affects nothing else).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <new>

#include "thread_system/core/job_function.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace {
std::atomic<std::uint64_t> g_allocations{0};
}

// Replacements of the global allocation functions (counting, then malloc).
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);  // a count, no ordering needed
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);  // a count, no ordering needed
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace ts = thread_system;

namespace {
std::uint64_t allocations() { return g_allocations.load(std::memory_order_relaxed); }
}  // namespace

TEST(Allocation, SmallJobFunctionDoesNotAllocate) {
  std::array<char, 40> payload{};
  int* out = nullptr;
  int value = 0;
  out = &value;
  const auto before = allocations();
  {
    ts::job_function f([payload, out] { *out += payload[0] + 1; });  // 48 bytes of capture
    ts::job_function g(std::move(f));
    g();
  }
  EXPECT_EQ(allocations() - before, 0U);
  EXPECT_EQ(value, 1);
}

TEST(Allocation, LargeJobFunctionAllocatesOnce) {
  std::array<char, 128> payload{};
  const auto before = allocations();
  {
    ts::job_function f([payload] { (void)payload; });
    ts::job_function g(std::move(f));
    g();
  }
  EXPECT_EQ(allocations() - before, 1U);
}

// Once the queue has grown to the working-set size, enqueueing and running
// small jobs allocates nothing at all, on any thread.
TEST(Allocation, PoolSteadyStateDoesNotAllocatePerJob) {
  // The queue's ring starts large enough for the whole burst, so the only
  // allocations left would be per job. Job nodes (the rest of a batch goes
  // onto a worker's deque) come from a pool that grows until every worker's
  // free list holds what it needs; warm up until a whole round allocates
  // nothing, then require the following rounds to allocate nothing too.
  ts::pool_options options;
  options.initial_queue_capacity = 16 * 1024;
  ts::thread_pool pool{2, options};
  std::atomic<std::uint64_t> sum{0};
  constexpr int jobs = 10'000;
  auto round_allocations = [&] {
    const auto before = allocations();
    for (int i = 0; i < jobs; ++i) {
      auto r = pool.enqueue([&sum, i] { sum.fetch_add(static_cast<std::uint64_t>(i), std::memory_order_relaxed); });
      EXPECT_TRUE(r);
    }
    pool.wait_idle();
    return allocations() - before;
  };
  int warm_rounds = 0;
  while (round_allocations() != 0) {
    ASSERT_LT(++warm_rounds, 20) << "the pool never reached an allocation-free round";
  }
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(round_allocations(), 0U) << "allocations while running " << jobs << " small jobs (round " << round << ")";
  }
  EXPECT_EQ(sum.load(), static_cast<std::uint64_t>(warm_rounds + 4) * (jobs - 1) * jobs / 2);
}
