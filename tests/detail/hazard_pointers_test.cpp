// hazard_domain and hazard_holder (detail/hazard_pointers.hpp): a protected
// pointer is not reclaimed, not even across threads or by the retiring
// thread's own threshold scans; collect() and the destructor reclaim the
// rest; records are reused by the thread that held one, and taken anew only
// when every record is held; wait_for_holders() waits for the operations in
// progress; tallies sum over the records.
#include "thread_system/detail/hazard_pointers.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>

namespace ts = thread_system;

namespace {

// Reclaims `int`s allocated with new, remembering which ones.
struct reclaim_log {
  std::mutex mutex;
  std::set<const void*> reclaimed;

  static void reclaim(void* context, void* pointer) noexcept {
    auto* self = static_cast<reclaim_log*>(context);
    {
      std::lock_guard lock(self->mutex);
      self->reclaimed.insert(pointer);
    }
    delete static_cast<int*>(pointer);
  }
  bool contains(const void* pointer) {
    std::lock_guard lock(mutex);
    return reclaimed.count(pointer) != 0;
  }
};

}  // namespace

TEST(HazardPointers, ProtectedPointerIsNotReclaimed) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  std::atomic<int*> source{new int(7)};
  int* const protected_value = source.load(std::memory_order_seq_cst);  // seq_cst: setup read, no other thread yet
  {
    ts::detail::hazard_holder reader(domain);
    EXPECT_EQ(reader.protect(0, source), protected_value);
    {
      ts::detail::hazard_holder writer(domain);
      source.store(nullptr, std::memory_order_seq_cst);
      writer.retire(protected_value);
      // Retire many more so the writer's own threshold scan runs too.
      for (int i = 0; i < 200; ++i) writer.retire(new int(i));
    }
    domain.collect();
    EXPECT_FALSE(log.contains(protected_value));
    EXPECT_EQ(*protected_value, 7);  // still readable (ASan would flag a free)
    EXPECT_EQ(domain.retired_count(), 1U);
  }
  domain.collect();
  EXPECT_TRUE(log.contains(protected_value));
  EXPECT_EQ(domain.retired_count(), 0U);
}

TEST(HazardPointers, ProtectionHoldsAcrossThreads) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  std::atomic<int*> source{new int(42)};
  int* const value = source.load(std::memory_order_seq_cst);  // seq_cst: setup read, no other thread yet
  std::atomic<int> stage{0};
  std::thread reader([&] {
    ts::detail::hazard_holder holder(domain);
    int* seen = holder.protect(0, source);
    stage.store(1, std::memory_order_release);  // pairs with the main thread's acquire
    while (stage.load(std::memory_order_acquire) != 2) std::this_thread::yield();
    EXPECT_EQ(*seen, 42);  // dereferenced after many scans
  });
  while (stage.load(std::memory_order_acquire) != 1) std::this_thread::yield();
  {
    ts::detail::hazard_holder writer(domain);
    source.store(nullptr, std::memory_order_seq_cst);
    writer.retire(value);
    for (int i = 0; i < 1000; ++i) writer.retire(new int(i));
  }
  for (int i = 0; i < 10; ++i) domain.collect();
  EXPECT_FALSE(log.contains(value));
  stage.store(2, std::memory_order_release);  // pairs with the reader's acquire
  reader.join();
  domain.collect();
  EXPECT_TRUE(log.contains(value));
}

TEST(HazardPointers, DomainDestructorReclaimsLeftovers) {
  reclaim_log log;
  {
    ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
    ts::detail::hazard_holder holder(domain);
    holder.retire(new int(1));
    holder.retire(new int(2));
  }
  EXPECT_EQ(log.reclaimed.size(), 2U);
}

TEST(HazardPointers, WaitForHoldersWaitsForTheOperationInProgress) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  std::atomic<int> stage{0};
  std::atomic<bool> released{false};
  std::thread holder_thread([&] {
    ts::detail::hazard_holder holder(domain);
    stage.store(1, std::memory_order_release);  // pairs with the main thread's acquire
    while (stage.load(std::memory_order_acquire) != 2) std::this_thread::yield();
    released.store(true, std::memory_order_relaxed);  // ordered by the record's release below
  });
  while (stage.load(std::memory_order_acquire) != 1) std::this_thread::yield();
  std::thread waiter([&] {
    domain.wait_for_holders();
    // relaxed: the wait's acquire of the record's release orders it.
    EXPECT_TRUE(released.load(std::memory_order_relaxed));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the waiter is (very likely) waiting by now
  stage.store(2, std::memory_order_release);
  waiter.join();
  holder_thread.join();
}

TEST(HazardPointers, AThreadReusesItsRecord) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  for (int i = 0; i < 100; ++i) {
    ts::detail::hazard_holder holder(domain);
    EXPECT_TRUE(domain.any_record_held());
  }
  EXPECT_EQ(domain.record_count(), 1U) << "one operation at a time needs one record";
  EXPECT_FALSE(domain.any_record_held());
}

TEST(HazardPointers, OperationsInProgressAtOnceHoldARecordEach) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  {
    ts::detail::hazard_holder first(domain);
    ts::detail::hazard_holder second(domain);
    ts::detail::hazard_holder third(domain);
    EXPECT_EQ(domain.record_count(), 3U);
  }
  EXPECT_FALSE(domain.any_record_held());
  {
    ts::detail::hazard_holder again(domain);
    ts::detail::hazard_holder and_again(domain);
  }
  EXPECT_EQ(domain.record_count(), 3U) << "released records are taken again, none allocated";
}

// clear() drops a protection; set() protects without re-reading a source.
TEST(HazardPointers, ClearAndSetMoveTheProtection) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  int* const first = new int(1);
  int* const second = new int(2);
  ts::detail::hazard_holder reader(domain);
  reader.set(0, first);
  reader.set(1, second);
  {
    ts::detail::hazard_holder writer(domain);
    writer.retire(first);
    writer.retire(second);
  }
  domain.collect();
  EXPECT_FALSE(log.contains(first));
  EXPECT_FALSE(log.contains(second));
  reader.clear(0);
  domain.collect();
  EXPECT_TRUE(log.contains(first)) << "no slot holds it any more";
  EXPECT_FALSE(log.contains(second));
  reader.set(1, nullptr);
  domain.collect();
  EXPECT_TRUE(log.contains(second));
  EXPECT_EQ(domain.retired_count(), 0U);
}

// reserve_record() makes one record exist, which a never-failing holder then
// takes (no allocation in that constructor).
TEST(HazardPointers, ANeverFailingHolderTakesTheReservedRecord) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  domain.reserve_record();
  EXPECT_EQ(domain.record_count(), 1U);
  EXPECT_FALSE(domain.any_record_held());
  {
    ts::detail::hazard_holder holder(domain, ts::detail::hazard_holder::never_fails);
    EXPECT_TRUE(domain.any_record_held());
    holder.retire(new int(3));
  }
  EXPECT_EQ(domain.record_count(), 1U);
  domain.collect();
  EXPECT_EQ(domain.retired_count(), 0U);
  EXPECT_EQ(log.reclaimed.size(), 1U);
}

// Each holder adds to its record's counters; tally_sum() adds the records up,
// also after they were handed to other threads.
TEST(HazardPointers, TalliesSumOverRecordsAndThreads) {
  reclaim_log log;
  ts::detail::hazard_domain domain(&reclaim_log::reclaim, &log);
  {
    ts::detail::hazard_holder a(domain);
    ts::detail::hazard_holder b(domain);
    a.tally(0, 5);
    b.tally(0, 7);
    b.tally(3, 1);
  }
  std::thread other([&domain] {
    for (int i = 0; i < 10; ++i) {
      ts::detail::hazard_holder h(domain);
      h.tally(0, 1);
    }
  });
  other.join();  // its tallies happen-before the sums below
  EXPECT_EQ(domain.tally_sum(0), 22U);
  EXPECT_EQ(domain.tally_sum(1), 0U);
  EXPECT_EQ(domain.tally_sum(3), 1U);
}
