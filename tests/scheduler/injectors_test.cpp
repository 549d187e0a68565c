// White-box tests of the private injectors (src/injectors.hpp): what the
// pool reads from them that the public API cannot provoke on demand.
#include <gtest/gtest.h>

#include <array>
#include <memory>

#include "../../src/injectors.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;

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
