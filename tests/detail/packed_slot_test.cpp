// detail/packed_slot.hpp: the fixed slot the lock-free and bounded queues
// keep a job in. Small jobs are stored inline; larger ones are boxed on the
// heap by prepare() and unboxed by take(), so the consumer gets back the job
// that was pushed; unprepare() undoes a prepare() whose push failed.
#include "thread_system/detail/packed_slot.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

namespace ts = thread_system;
using slot4 = ts::detail::packed_slot<4>;  // the lock-free queue's node slot

namespace {
// 40 bytes: inline in a job_function (at most 48), but over the slot's 16.
struct counted_big {
  std::array<std::uint64_t, 3> payload{1, 2, 5};
  std::shared_ptr<std::atomic<int>> runs;
  void operator()() const { runs->fetch_add(static_cast<int>(payload[2]), std::memory_order_relaxed); }
};
static_assert(ts::job_function::stored_inline<counted_big>);
}  // namespace

static_assert(slot4::inline_bytes == 16);

TEST(PackedSlot, ASmallJobGoesInlineAndComesBackAsIs) {
  int ran = 0;
  ts::job_function job([&ran] { ++ran; });  // one pointer: 8 bytes
  EXPECT_TRUE(slot4::fits(job));
  ASSERT_TRUE(slot4::prepare(job));
  EXPECT_FALSE(job.holds<ts::detail::job_box>());
  slot4 slot;
  slot.put(std::move(job));
  ts::job_function out;
  slot.take(out);
  ASSERT_TRUE(static_cast<bool>(out));
  out();
  EXPECT_EQ(ran, 1);
}

TEST(PackedSlot, ALargeJobIsBoxedThenUnboxedOnTake) {
  auto runs = std::make_shared<std::atomic<int>>(0);
  ts::job_function job(counted_big{{1, 2, 5}, runs});
  EXPECT_FALSE(slot4::fits(job));
  ASSERT_TRUE(slot4::prepare(job));
  EXPECT_TRUE(job.holds<ts::detail::job_box>());
  EXPECT_TRUE(slot4::fits(job));  // the box is three words
  slot4 slot;
  slot.put(std::move(job));
  ts::job_function out;
  slot.take(out);
  EXPECT_FALSE(out.holds<ts::detail::job_box>());  // the consumer gets the pushed job back
  EXPECT_TRUE(out.holds<counted_big>());
  out();
  EXPECT_EQ(runs->load(std::memory_order_relaxed), 5);
}

TEST(PackedSlot, UnprepareGivesBackTheOriginalJob) {
  auto runs = std::make_shared<std::atomic<int>>(0);
  ts::job_function job(counted_big{{1, 2, 5}, runs});
  ASSERT_TRUE(slot4::prepare(job));
  slot4::unprepare(job);  // a push that failed after prepare()
  EXPECT_TRUE(job.holds<counted_big>());
  job();
  EXPECT_EQ(runs->load(std::memory_order_relaxed), 5);
  EXPECT_EQ(runs.use_count(), 2);  // no copy left behind in a box
}

TEST(PackedSlot, DestroyReleasesAStoredJobsCaptures) {
  auto runs = std::make_shared<std::atomic<int>>(0);
  {
    ts::job_function job(counted_big{{1, 2, 5}, runs});
    ASSERT_TRUE(slot4::prepare(job));
    slot4 slot;
    slot.put(std::move(job));
    EXPECT_EQ(runs.use_count(), 2);
    slot.destroy();  // a queue destroyed with the job still in it
  }
  EXPECT_EQ(runs.use_count(), 1);
  EXPECT_EQ(runs->load(std::memory_order_relaxed), 0);  // never ran
}
