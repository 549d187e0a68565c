// detail/spin.hpp: cpu_relax() is a pause usable in any spin loop (a loop
// that waits with it for another thread's store sees that store), and
// idle_yield_ns is the idle phase the pools and helping waits share: the
// default of pool_options::idle_wait.
#include "thread_system/detail/spin.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "thread_system/pools/job_types.hpp"
#include "thread_system/pools/pool_options.hpp"
#include "thread_system/pools/typed_pool_options.hpp"

namespace ts = thread_system;

namespace {

TEST(Spin, IdleYieldIsTheDefaultIdleWaitOfBothPools) {
  EXPECT_GT(ts::detail::idle_yield_ns, 0);
  EXPECT_EQ(ts::pool_options{}.idle_wait, std::chrono::nanoseconds(ts::detail::idle_yield_ns));
  EXPECT_EQ(ts::typed_pool_options<ts::job_types>{}.idle_wait, std::chrono::nanoseconds(ts::detail::idle_yield_ns));
}

TEST(Spin, ASpinLoopWithCpuRelaxSeesAnotherThreadsStore) {
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    flag.store(true, std::memory_order_release);  // pairs with the acquire loop below
  });
  std::size_t spins = 0;
  while (!flag.load(std::memory_order_acquire)) {
    ts::detail::cpu_relax();
    if (++spins % 1024 == 0) std::this_thread::yield();  // a loaded machine may not run the setter at once
  }
  setter.join();
  EXPECT_TRUE(flag.load(std::memory_order_relaxed));
}

}  // namespace
