// collect() and the exports against a real typed pool: per-type counters
// and wait histograms appear next to the pool and worker figures.
#include <gtest/gtest.h>

#include <string>

#include "format_checkers.hpp"
#include "support/test_support.hpp"
#include "thread_system/monitoring/monitoring.hpp"
#include "thread_system/pools/job_types.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"

namespace thread_system::monitoring {
namespace {

TEST(TypedPoolMonitor, PerTypeCountersMatchWhatRan) {
  typed_pool_options<job_types> o;
  o.name = "typed";
  o.latency_sample_every = 1;
  o.on_error = [](std::exception_ptr) {};
  typed_thread_pool_t<job_types> pool{2, o};
  const std::size_t realtime = thread_system::test::scaled(3'000);
  const std::size_t batch = thread_system::test::scaled(2'000);
  for (std::size_t i = 0; i < realtime; ++i) ASSERT_TRUE(pool.enqueue(job_types::RealTime, [] {}));
  for (std::size_t i = 0; i < batch; ++i) {
    ASSERT_TRUE(pool.enqueue(job_types::Batch, [i] {
      if (i % 4 == 0) throw std::runtime_error("expected failure");
    }));
  }
  pool.wait_idle();

  pool_monitor mon{pool};
  const monitor_report r = mon.sample();
  const pool_metrics& m = r.metrics;
  EXPECT_EQ(m.pool_name, "typed");
  EXPECT_EQ(m.executed, realtime + batch);
  EXPECT_EQ(m.failed, (batch + 3) / 4);
  ASSERT_EQ(m.job_types.size(), 2u);
  const job_type_metrics* rt = nullptr;
  const job_type_metrics* bt = nullptr;
  for (const auto& t : m.job_types) {
    if (t.type_name == std::string(to_string(job_types::RealTime))) rt = &t;
    if (t.type_name == std::string(to_string(job_types::Batch))) bt = &t;
  }
  ASSERT_NE(rt, nullptr);
  ASSERT_NE(bt, nullptr);
  EXPECT_EQ(rt->accepted, realtime);
  EXPECT_EQ(rt->executed, realtime);
  EXPECT_EQ(bt->executed, batch);
  EXPECT_EQ(bt->failed, (batch + 3) / 4);
  EXPECT_EQ(rt->waiting, 0u);
  EXPECT_TRUE(rt->has_latency);
  EXPECT_GT(rt->wait.count, 0u);
  EXPECT_LE(rt->wait.count, realtime);

  test::prometheus_checker c;
  const auto doc = c.check(to_prometheus(r));
  ASSERT_TRUE(doc) << c.error();
  const std::map<std::string, std::string> labels{{"pool", "typed"}, {"type", rt->type_name}};
  EXPECT_EQ(doc->value("thread_system_job_type_executed_total", labels), static_cast<double>(realtime));
  const std::string json = to_json(r);
  test::json_parser p(json);
  EXPECT_TRUE(p.parse()) << p.error();
}

}  // namespace
}  // namespace thread_system::monitoring
