// The injector (include/thread_system/scheduler/injector.hpp): the tag
// byte's layout, the accounting contract every kind make_injector() builds
// keeps, and white-box tests of the private injectors (src/injectors.hpp):
// what the pool reads from them that the public API cannot provoke on demand.
#include "thread_system/scheduler/injector.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../../src/injectors.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;

namespace {

constexpr std::array<ts::pool_queue, 5> every_kind{ts::pool_queue::mutex, ts::pool_queue::lockfree,
                                                   ts::pool_queue::adaptive, ts::pool_queue::sharded,
                                                   ts::pool_queue::bounded};

}  // namespace

// The core's bit and the injector's kind bits do not disturb each other.
TEST(Injector, TheTagKeepsTheCoresBitAndTheKindApart) {
  namespace tag = ts::detail::job_tag;
  EXPECT_EQ(tag::kind(0), 0U) << "an untyped job";
  EXPECT_EQ(tag::kind(tag::holds_room), 0U);
  for (std::size_t rank = 0; rank < 64; ++rank) {
    for (const std::uint8_t base : {std::uint8_t{0}, tag::holds_room}) {
      const std::uint8_t t = tag::with_rank(base, rank);
      EXPECT_NE(tag::kind(t), 0U) << rank;
      EXPECT_EQ(tag::rank(t), rank);
      EXPECT_EQ(t & tag::holds_room, base) << "the core's bit is kept";
      EXPECT_EQ(tag::without_room(t), tag::kind(t));
    }
  }
  // with_rank() replaces an earlier kind.
  EXPECT_EQ(tag::rank(tag::with_rank(tag::with_rank(tag::holds_room, 5), 9)), 9U);
}

// The accounting contract of the header, for every kind: accepted() counts
// exactly the accepted jobs; after close() and wait_for_pushes() a push is
// refused with pool_stopped and not counted; the jobs queued before can
// still be popped, then a pop finds nothing.
TEST(Injector, EveryKindKeepsTheAccountingContract) {
  for (const auto kind : every_kind) {
    SCOPED_TRACE(ts::to_string(kind));
    const auto inj = ts::detail::make_injector(kind, 64);
    EXPECT_TRUE(inj->empty_approx());
    EXPECT_EQ(inj->pending_mask(), 0U);
    int ran = 0;
    bool wake = false;
    ASSERT_TRUE(inj->push_and_check(ts::job_function([&ran] { ++ran; }), wake));
    EXPECT_TRUE(wake) << "the push that made the injector non-empty wakes a worker";
    for (int i = 0; i < 9; ++i) ASSERT_TRUE(inj->push(ts::job_function([&ran] { ++ran; })));
    std::vector<ts::job_function> batch;
    for (int i = 0; i < 5; ++i) batch.emplace_back([&ran] { ++ran; });
    ASSERT_TRUE(inj->push_batch(batch));
    EXPECT_EQ(inj->accepted(), 15U);
    EXPECT_EQ(inj->size_approx(), 15U);
    EXPECT_FALSE(inj->empty_approx());
    EXPECT_NE(inj->pending_mask(), 0U);

    std::array<ts::job_function, 16> out;
    const std::size_t share = inj->pop_share(out, 3);
    EXPECT_GE(share, 1U);
    if (kind != ts::pool_queue::lockfree && kind != ts::pool_queue::adaptive) {
      EXPECT_LE(share, 5U) << "at most max(1, backlog / consumers)";
    }  // the lock-free queue's estimate counts the batch's segment whole (see the header)
    for (std::size_t i = 0; i < share; ++i) out[i]();

    inj->close();
    inj->wait_for_pushes();
    EXPECT_TRUE(inj->is_closed());
    const auto refused = inj->push(ts::job_function([&ran] { ++ran; }));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), ts::error_code::pool_stopped);
    EXPECT_EQ(inj->accepted(), 15U) << "a refused push is not counted";

    std::size_t popped = share;
    for (std::size_t n = 0; (n = inj->pop_share(out, 1)) != 0;) {
      for (std::size_t i = 0; i < n; ++i) out[i]();
      popped += n;
    }
    EXPECT_EQ(popped, 15U) << "after close, a pop that finds nothing means every accepted job was popped";
    EXPECT_EQ(ran, 15);
    EXPECT_TRUE(inj->empty_approx());
  }
}

TEST(Injectors, TheAdaptiveInjectorCountsItsQueueSwitches) {
  ts::detail::adaptive_injector inj;
  EXPECT_EQ(inj.queue_switches(), 0U);
  ASSERT_TRUE(inj.queue_for_testing().force_switch_for_testing());
  EXPECT_EQ(inj.queue_switches(), 1U);
  // The next switch waits until a pop has found the previous queue drained.
  int ran = 0;
  ASSERT_TRUE(inj.push([&ran] { ++ran; }));
  std::array<ts::job_function, 1> out;
  ASSERT_EQ(inj.pop_share(out, 1), 1U);
  out[0]();
  EXPECT_EQ(ran, 1);
  ASSERT_TRUE(inj.queue_for_testing().force_switch_for_testing());
  EXPECT_EQ(inj.queue_switches(), 2U);
}

TEST(Injectors, EveryOtherInjectorReportsNoSwitches) {
  for (const auto kind :
       {ts::pool_queue::mutex, ts::pool_queue::lockfree, ts::pool_queue::sharded, ts::pool_queue::bounded}) {
    const auto inj = ts::detail::make_injector(kind, 64);
    EXPECT_EQ(inj->queue_switches(), 0U) << ts::to_string(kind);
  }
}

TEST(Injectors, ThePoolReportsItsInjectorsSwitches) {
  for (const auto kind : {ts::pool_queue::mutex, ts::pool_queue::adaptive}) {
    ts::pool_options opt;
    opt.queue = kind;
    ts::thread_pool pool{1, opt};
    ASSERT_TRUE(pool.enqueue([] {}));
    pool.wait_idle();
    // An idle pool that ran one job has not switched (the adaptive injector
    // measures windows of many operations before it considers a switch).
    EXPECT_EQ(pool.get_statistics().queue_switches, 0U) << ts::to_string(kind);
  }
}
