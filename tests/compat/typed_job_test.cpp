// compat/typed_job.hpp: the seed-style typed jobs. A typed job is a seed job
// (compat/job.hpp) that carries its type; a typed pool routes it by type().
#include "thread_system/compat/typed_job.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "thread_system/pools/typed_thread_pool.hpp"

namespace ts = thread_system;
using ts::job_types;

TEST(TypedJob, CarriesItsTypeAndRunsItsCallback) {
  int hits = 0;
  ts::callback_typed_job j([&hits] { ++hits; }, job_types::Background, "cleanup");
  EXPECT_EQ(j.type(), job_types::Background);
  EXPECT_EQ(j.get_name(), "cleanup");
  EXPECT_TRUE(j.runnable());
  EXPECT_TRUE(j.do_work());
  EXPECT_EQ(hits, 1);

  ts::callback_typed_job_t<int> custom([]() -> ts::result_void { return ts::make_error(ts::error_code::timeout, "x"); },
                                       7);
  EXPECT_EQ(custom.type(), 7);
  auto r = custom.do_work();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "x");
}

TEST(TypedJob, AnEmptyCallbackIsNotRunnableAndATypedPoolRefusesIt) {
  std::function<void()> empty;
  auto j = std::make_unique<ts::callback_typed_job>(empty, job_types::RealTime, "nothing");
  EXPECT_FALSE(j->runnable());
  EXPECT_FALSE(j->has_callback());

  ts::typed_thread_pool_t<job_types> pool{1};
  auto refused = pool.enqueue(std::move(j));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::invalid_argument);
  EXPECT_NE(refused.error().message().find("nothing"), std::string::npos) << refused.error().message();
  auto null_job = pool.enqueue(std::unique_ptr<ts::typed_job_t<job_types>>{});
  ASSERT_FALSE(null_job);
  EXPECT_EQ(null_job.error().code(), ts::error_code::invalid_argument);
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().accepted, 0U);
}

TEST(TypedJob, ATypedPoolRunsItAsAJobOfItsType) {
  ts::typed_thread_pool_t<job_types> pool{"typed_job_pool"};
  auto specialist = std::make_unique<ts::typed_thread_worker_t<job_types>>();
  ASSERT_TRUE(specialist->set_responsibilities({job_types::Batch}));
  ASSERT_TRUE(pool.add_worker(std::move(specialist)));
  ASSERT_TRUE(pool.start());
  int hits = 0;
  ASSERT_TRUE(pool.enqueue(std::make_unique<ts::callback_typed_job>([&hits] { ++hits; }, job_types::Batch)));
  pool.wait_idle();  // wait_idle() makes the job's writes visible here
  EXPECT_EQ(hits, 1);
  const auto stats = pool.get_type_statistics();
  ASSERT_EQ(stats.size(), 1U);  // only Batch was used
  EXPECT_EQ(stats[0].type_name, "Batch");
  EXPECT_EQ(stats[0].executed, 1U);
}
