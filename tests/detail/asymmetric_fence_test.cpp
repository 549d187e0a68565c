// detail/asymmetric_fence.hpp: where the kernel offers membarrier(2), the
// pools' pushers and the logger's producers pay only a compiler barrier
// (asymmetric_fence_cheap is set by asymmetric_fence_init(), which a pool's
// constructor calls); and either way a light side and a heavy
// side form a store->load fence pair: in the store-buffering litmus test
// (each thread stores its flag, runs its side of the fence, loads the
// other's flag) at least one thread sees the other's store.
#include "thread_system/detail/asymmetric_fence.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "../support/store_buffering.hpp"
#include "thread_system/pools/thread_pool.hpp"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ts = thread_system;

namespace {

// Why the light side cannot be a compiler barrier here, or nullptr when the
// kernel offers expedited membarrier (then registering must make it one).
const char* why_no_membarrier() {
#if !defined(__linux__) || !defined(__NR_membarrier)
  return "no membarrier(2) on this platform: both sides are full fences";
#elif defined(THREAD_SYSTEM_TSAN)
  return "under ThreadSanitizer both sides are seq_cst fences (which it models)";
#else
  // MEMBARRIER_CMD_QUERY (0) and MEMBARRIER_CMD_PRIVATE_EXPEDITED (1 << 3): fixed by the kernel's ABI.
  const long supported = ::syscall(__NR_membarrier, 0, 0, 0);
  if (supported < 0 || (supported & (1 << 3)) == 0)
    return "this kernel does not offer MEMBARRIER_CMD_PRIVATE_EXPEDITED";
  return nullptr;
#endif
}

TEST(AsymmetricFence, UsesMembarrierWhereTheKernelOffersIt) {
  if (const char* why = why_no_membarrier()) GTEST_SKIP() << why;
  ts::detail::asymmetric_fence_init();
  // relaxed: set by this thread's own call above.
  EXPECT_TRUE(ts::detail::asymmetric_fence_cheap.load(std::memory_order_relaxed))
      << "membarrier is available, yet the producers' side still runs a full fence";
  EXPECT_TRUE(ts::detail::asymmetric_fence_heavy()) << "registered, yet the barrier failed";
}

// The pools' pushers run the light side (pool_core::wake_worker_if_needed):
// a pool's constructor registers, before any of its workers exists. (ctest
// runs each test in a process of its own, so nothing registered before.)
TEST(AsymmetricFence, APoolsConstructorRegistersIt) {
  if (const char* why = why_no_membarrier()) GTEST_SKIP() << why;
  ts::thread_pool pool{1};
  // relaxed: set inside the constructor, on this thread.
  EXPECT_TRUE(ts::detail::asymmetric_fence_cheap.load(std::memory_order_relaxed))
      << "the pool's pushers would run a full fence per job";
}

TEST(AsymmetricFence, TheLightAndHeavySidesNeverLetBothThreadsMissTheOtherStore) {
  ts::detail::asymmetric_fence_init();  // as a pool or logger does before any pusher runs
  // A membarrier is a system call that interrupts every running thread of
  // the process: a few microseconds, so fewer rounds than fence_test's.
  const auto r = ts::test::store_buffering([] { ts::detail::asymmetric_fence_light(); },
                                           [] { (void)ts::detail::asymmetric_fence_heavy(); }, ts::test::scaled(50'000),
                                           std::chrono::seconds(1));
  EXPECT_EQ(r.both_missed, 0U) << "of " << r.rounds << " rounds";
  EXPECT_GT(r.rounds, 0U);
}

}  // namespace
