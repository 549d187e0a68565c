// The Prometheus exposition of real pools (exposition_scenarios.hpp) under
// the strict in-repo checker: a busy pool, a typed pool and several pools
// in one text. The same scenarios go through `promtool check metrics` in
// the ctest tests monitoring.promtool.* when promtool is installed.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "exposition_scenarios.hpp"
#include "format_checkers.hpp"

namespace thread_system::monitoring {
namespace {

using labels = std::map<std::string, std::string>;

double value_or_nan(const test::prom_document& doc, std::string_view name, const labels& l) {
  return doc.value(name, l).value_or(std::nan(""));
}

TEST(Exposition, BusyPoolCountsEveryFateOfAJob) {
  const monitor_report r = test::busy_pool_report();
  const std::string text = to_prometheus(r);
  test::prometheus_checker c;
  const auto doc = c.check(text);
  ASSERT_TRUE(doc) << c.error() << "\n" << text;

  const labels pool{{"pool", "busy"}};
  const double accepted = value_or_nan(*doc, "thread_system_pool_jobs_accepted_total", pool);
  const double executed = value_or_nan(*doc, "thread_system_pool_jobs_executed_total", pool);
  const double cancelled = value_or_nan(*doc, "thread_system_pool_jobs_cancelled_total", pool);
  const double failed = value_or_nan(*doc, "thread_system_pool_jobs_failed_total", pool);
  // Idle pool: every accepted job ran or was cancelled.
  EXPECT_EQ(accepted, executed + cancelled);
  EXPECT_EQ(accepted, static_cast<double>(1 + test::busy_flood + test::busy_token_jobs + 50 * test::busy_capacity));
  // The token jobs, and at least one job dropped by drop_oldest.
  EXPECT_GT(cancelled, static_cast<double>(test::busy_token_jobs));
  EXPECT_GT(failed, 0.0);
  EXPECT_EQ(doc->types.at("thread_system_pool_job_wait_seconds"), "histogram");
  EXPECT_GT(value_or_nan(*doc, "thread_system_pool_job_run_seconds_count", pool), 0.0);

  // The HELP text says every way a job is cancelled.
  const auto help = text.find("# HELP thread_system_pool_jobs_cancelled_total ");
  ASSERT_NE(help, std::string::npos);
  const std::string help_line = text.substr(help, text.find('\n', help) - help);
  EXPECT_NE(help_line.find("stop(cancel_pending)"), std::string::npos) << help_line;
  EXPECT_NE(help_line.find("cancellation token"), std::string::npos) << help_line;
  EXPECT_NE(help_line.find("drop_oldest"), std::string::npos) << help_line;
}

TEST(Exposition, TypedPoolHasAHistogramPerType) {
  const std::string text = to_prometheus(test::typed_pool_report());
  test::prometheus_checker c;
  const auto doc = c.check(text);
  ASSERT_TRUE(doc) << c.error() << "\n" << text;
  for (const job_types t : {job_types::RealTime, job_types::Batch, job_types::Background}) {
    const labels l{{"pool", "typed"}, {"type", std::string(to_string(t))}};
    EXPECT_EQ(value_or_nan(*doc, "thread_system_job_type_executed_total", l), 200.0) << to_string(t);
    EXPECT_GT(value_or_nan(*doc, "thread_system_job_type_wait_seconds_count", l), 0.0) << to_string(t);
  }
  EXPECT_EQ(value_or_nan(*doc, "thread_system_job_type_failed_total",
                         labels{{"pool", "typed"}, {"type", std::string(to_string(job_types::Batch))}}),
            50.0);
}

TEST(Exposition, SeveralPoolsInOneText) {
  const std::string text = test::several_exposition();
  test::prometheus_checker c;
  const auto doc = c.check(text);
  ASSERT_TRUE(doc) << c.error() << "\n" << text;
  for (const char* name : {"busy", "typed", "idle \"pool\"\\\nsecond line"}) {
    EXPECT_TRUE(doc->value("thread_system_pool_jobs_executed_total", labels{{"pool", name}})) << name;
  }
  EXPECT_EQ(
      value_or_nan(*doc, "thread_system_pool_jobs_executed_total", labels{{"pool", "idle \"pool\"\\\nsecond line"}}),
      0.0);
}

}  // namespace
}  // namespace thread_system::monitoring
