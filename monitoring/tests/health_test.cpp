// Health checks: each threshold produces ok / warning / critical, checks
// without data are not applicable, disabled thresholds are skipped, and the
// overall status is the worst check.
#include <gtest/gtest.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "support/test_support.hpp"
#include "thread_system/monitoring/monitoring.hpp"

namespace thread_system::monitoring {
namespace {

using namespace std::chrono_literals;

health_inputs healthy() {
  health_inputs in;
  in.have_window = true;
  in.throughput_per_s = 200'000;
  in.backlog_sustained = true;
  in.queue_depth = 3;
  in.window_executed = 10'000;
  in.window_failed = 0;
  in.utilisation = 0.5;
  in.workers = 4;
  return in;
}

health_status status_of(const health_report& r, const char* check) {
  const health_check* c = r.find(check);
  EXPECT_NE(c, nullptr) << check;
  return c == nullptr ? health_status::critical : c->status;
}

// A check's detail text is written with a decimal point whatever the
// process's locale (it was printf's %g: "0,02 (warning > 0,01 ..." under a
// German LC_NUMERIC). The locale is built with localedef into a temporary
// directory (skipped where the system has no locale sources); the test runs
// in a child process, so the locale stays there.
TEST(Health, DetailTextIgnoresTheLocalesDecimalComma) {
  // A fresh process (re-executed: this one may have threads) inherits the
  // directory through the environment and builds nothing itself.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr const char* dir_variable = "THREAD_SYSTEM_TEST_LOCPATH";
  const char* inherited = std::getenv(dir_variable);
  const bool child = inherited != nullptr;
  const std::filesystem::path dir =
      child ? std::filesystem::path(inherited)
            : std::filesystem::temp_directory_path() / ("ts_locale_" + std::to_string(::getpid()));
  if (!child) {
    std::filesystem::create_directories(dir);
    const std::string cmd = "localedef -i de_DE -f UTF-8 '" + (dir / "de_DE.UTF-8").string() + "' >/dev/null 2>&1";
    const bool built = std::system(cmd.c_str()) == 0 || std::filesystem::exists(dir / "de_DE.UTF-8" / "LC_NUMERIC");
    if (!built) {
      std::filesystem::remove_all(dir);
      GTEST_SKIP() << "localedef could not build de_DE.UTF-8 (no locale sources)";
    }
    ::setenv(dir_variable, dir.c_str(), 1);
  }
  EXPECT_EXIT(
      {
        ::setenv("LOCPATH", dir.c_str(), 1);
        if (std::setlocale(LC_ALL, "de_DE.UTF-8") == nullptr) std::_Exit(2);
        health_inputs in = healthy();
        in.window_failed = 200;                                            // 2% failed
        const health_report r = evaluate_health(in, health_thresholds{});  // error rate: 1% / 5%
        const health_check* c = r.find("error_rate");
        if (c == nullptr) std::_Exit(3);
        std::fprintf(stderr, "detail: %s\n", c->detail.c_str());
        std::_Exit(c->detail.find("0,0") == std::string::npos && c->detail.find("0.02") != std::string::npos ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
  ::unsetenv(dir_variable);
  std::filesystem::remove_all(dir);
}

TEST(Health, HealthyInputsAreOk) {
  const health_report r = evaluate_health(healthy(), health_thresholds{});
  EXPECT_EQ(r.status, health_status::ok);
  for (const char* name : {"throughput", "queue_depth", "error_rate", "utilisation", "stuck_workers"}) {
    EXPECT_EQ(status_of(r, name), health_status::ok) << name;
  }
  EXPECT_EQ(r.find("wait_p99"), nullptr) << "off by default";
}

TEST(Health, QueueDepthThresholds) {
  health_inputs in = healthy();
  in.queue_depth = 50;
  EXPECT_EQ(status_of(evaluate_health(in, {}), "queue_depth"), health_status::ok) << "warning is > 50";
  in.queue_depth = 51;
  health_report r = evaluate_health(in, {});
  EXPECT_EQ(status_of(r, "queue_depth"), health_status::warning);
  EXPECT_EQ(r.status, health_status::warning);
  in.queue_depth = 201;
  r = evaluate_health(in, {});
  EXPECT_EQ(status_of(r, "queue_depth"), health_status::critical);
  EXPECT_EQ(r.status, health_status::critical);
  EXPECT_DOUBLE_EQ(r.find("queue_depth")->value, 201.0);
  EXPECT_FALSE(r.find("queue_depth")->detail.empty());
}

TEST(Health, ErrorRateThresholds) {
  health_inputs in = healthy();
  in.window_failed = 200;  // 2 %
  EXPECT_EQ(status_of(evaluate_health(in, {}), "error_rate"), health_status::warning);
  in.window_failed = 600;  // 6 %
  EXPECT_EQ(status_of(evaluate_health(in, {}), "error_rate"), health_status::critical);
  in.window_executed = 0;
  in.window_failed = 0;
  const health_report r = evaluate_health(in, {});
  EXPECT_FALSE(r.find("error_rate")->applicable);
  EXPECT_EQ(status_of(r, "error_rate"), health_status::ok);
}

TEST(Health, ThroughputCountsOnlyUnderSustainedBacklog) {
  health_inputs in = healthy();
  in.throughput_per_s = 40'000;
  EXPECT_EQ(status_of(evaluate_health(in, {}), "throughput"), health_status::warning);
  in.throughput_per_s = 5'000;
  EXPECT_EQ(status_of(evaluate_health(in, {}), "throughput"), health_status::critical);
  in.backlog_sustained = false;  // a quiet pool is not a slow pool
  const health_report r = evaluate_health(in, {});
  EXPECT_EQ(status_of(r, "throughput"), health_status::ok);
  EXPECT_FALSE(r.find("throughput")->applicable);
  in.have_window = false;
  EXPECT_FALSE(evaluate_health(in, {}).find("throughput")->applicable);
}

TEST(Health, UtilisationAndStuckWorkers) {
  health_inputs in = healthy();
  in.utilisation = 0.99;
  EXPECT_EQ(status_of(evaluate_health(in, {}), "utilisation"), health_status::warning);
  in.utilisation = 1.0;
  EXPECT_EQ(status_of(evaluate_health(in, {}), "utilisation"), health_status::critical);
  in = healthy();
  in.stuck_workers = 1;
  EXPECT_EQ(status_of(evaluate_health(in, {}), "stuck_workers"), health_status::warning);
  in.stuck_workers = 4;
  EXPECT_EQ(status_of(evaluate_health(in, {}), "stuck_workers"), health_status::critical);
}

TEST(Health, CustomAndDisabledThresholds) {
  health_thresholds t;
  t.queue_depth = threshold{5, 10};
  t.error_rate.reset();
  t.throughput_per_s.reset();
  t.utilisation.reset();
  t.stuck_after = 0s;
  t.wait_p99_ns = threshold{1e6, 1e7};
  health_inputs in = healthy();
  in.queue_depth = 7;
  in.window_failed = 9'000;  // would be critical, but the check is off
  in.have_wait_latency = true;
  in.wait_p99_ns = 2'000'000;
  const health_report r = evaluate_health(in, t);
  EXPECT_EQ(r.find("error_rate"), nullptr);
  EXPECT_EQ(r.find("throughput"), nullptr);
  EXPECT_EQ(r.find("utilisation"), nullptr);
  EXPECT_EQ(r.find("stuck_workers"), nullptr);
  EXPECT_EQ(status_of(r, "queue_depth"), health_status::warning);
  EXPECT_EQ(status_of(r, "wait_p99"), health_status::warning);
  EXPECT_EQ(r.status, health_status::warning);
  in.wait_p99_ns = 20'000'000;
  EXPECT_EQ(evaluate_health(in, t).status, health_status::critical);
}

TEST(Health, MonitorAppliesItsThresholdsToSamples) {
  std::uint64_t depth = 0;
  std::uint64_t executed = 0;
  std::uint64_t failed = 0;
  std::uint64_t fake_now = 1;
  monitor_options mo;
  mo.clock = [&] { return fake_now; };
  mo.thresholds.queue_depth = threshold{10, 100};
  pool_monitor mon(
      [&](pool_metrics& m) {
        m.queue_depth = depth;
        m.executed = executed;
        m.failed = failed;
      },
      mo);
  EXPECT_EQ(mon.health().status, health_status::ok) << "health() samples when there is no sample yet";
  depth = 11;
  fake_now += 1'000'000'000;
  EXPECT_EQ(mon.sample().health.status, health_status::warning);
  EXPECT_EQ(mon.health().status, health_status::warning) << "the latest sample's health";
  depth = 101;
  fake_now += 1'000'000'000;
  EXPECT_EQ(mon.sample().health.status, health_status::critical);
  depth = 0;
  executed = 1000;
  failed = 100;
  fake_now += 1'000'000'000;
  const monitor_report r = mon.sample();
  EXPECT_EQ(status_of(r.health, "queue_depth"), health_status::ok);
  EXPECT_EQ(status_of(r.health, "error_rate"), health_status::critical);
  EXPECT_EQ(to_string(r.health.status), "critical");
}

}  // namespace
}  // namespace thread_system::monitoring
