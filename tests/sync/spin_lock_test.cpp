// sync/spin_lock.hpp: mutual exclusion, try_lock, the contended-path hook,
// and Lockable (std::lock_guard / std::unique_lock / std::scoped_lock).
#include "thread_system/sync/spin_lock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

namespace ts = thread_system;

TEST(SpinLock, TryLockFailsWhileHeldAndSucceedsAfterUnlock) {
  ts::spin_lock lock;
  ASSERT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  std::thread other([&lock] { EXPECT_FALSE(lock.try_lock()); });
  other.join();
  lock.unlock();
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

TEST(SpinLock, IsLockableByTheStandardGuards) {
  ts::spin_lock a;
  ts::spin_lock b;
  {
    std::lock_guard guard(a);
    EXPECT_FALSE(a.try_lock());
  }
  {
    std::unique_lock guard(a, std::try_to_lock);
    EXPECT_TRUE(guard.owns_lock());
  }
  {
    std::scoped_lock both(a, b);  // std::lock's deadlock avoidance over two spin locks
    EXPECT_FALSE(a.try_lock());
    EXPECT_FALSE(b.try_lock());
  }
  EXPECT_TRUE(a.try_lock());
  a.unlock();
}

// A plain (non-atomic) counter incremented under the lock by several threads
// loses no increment (and TSan sees no race: lock acquires, unlock releases).
TEST(SpinLock, ExcludesEveryOtherThreadFromTheCriticalSection) {
  ts::spin_lock lock;
  std::uint64_t counter = 0;
  int inside = 0;  // threads in the critical section; must never exceed 1
  int max_inside = 0;
  const int threads = 4;
  const std::size_t per_thread = ts::test::scaled(50'000);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (std::size_t i = 0; i < per_thread; ++i) {
        std::lock_guard guard(lock);
        ++inside;
        if (inside > max_inside) max_inside = inside;
        ++counter;
        --inside;
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(counter, threads * per_thread);
  EXPECT_EQ(max_inside, 1);
}

// The hook runs only when the first attempt found the lock held, inside the
// critical section.
TEST(SpinLock, LockThenIfContendedCallsTheHookOnlyUnderContention) {
  ts::spin_lock lock;
  int hooks = 0;
  lock.lock_then_if_contended([&hooks] { ++hooks; });
  lock.unlock();
  EXPECT_EQ(hooks, 0);  // free at the first attempt

  lock.lock();
  std::atomic<bool> waiting{false};
  std::thread contender([&] {
    waiting.store(true, std::memory_order_release);  // pairs with the acquire below
    lock.lock_then_if_contended([&hooks] { ++hooks; });
    lock.unlock();
  });
  ASSERT_TRUE(ts::test::eventually([&waiting] { return waiting.load(std::memory_order_acquire); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the contender finds the lock held
  lock.unlock();
  contender.join();
  // The contender's first exchange ran while this thread held the lock
  // unless it was descheduled past the unlock; then it took the free lock
  // and no hook ran. Either way the hook ran at most once, under the lock.
  EXPECT_LE(hooks, 1);
}
