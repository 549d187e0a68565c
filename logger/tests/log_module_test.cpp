// log_module.hpp and logger::handle() / write(): the seed API of the logger
// over one process-wide default logger. The guides' code compiles as
// written (namespace changed), each seed type reaches the sinks at its
// documented level with its caller's source location, calls made while no
// default logger runs are refused and counted, and stop() writes everything.
#include "thread_system/logger/log_module.hpp"

// The guides ignore results the library marks [[nodiscard]] (for their users
// a warning, not an error); their code is compiled here as written.
#pragma GCC diagnostic ignored "-Wunused-result"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "thread_system/logger/sinks/callback_sink.hpp"

namespace ts = thread_system;

namespace {

struct captured {
  ts::log_level level;
  std::string message;
  std::uint32_t line;
};

// A sink that keeps every record; read after log_module::stop().
struct capture {
  std::mutex m;
  std::vector<captured> records;  // guarded by m
  std::shared_ptr<ts::log_sink> sink() {
    return std::make_shared<ts::callback_sink>([this](const ts::log_entry& e) {
      std::lock_guard lock(m);
      records.push_back({e.record().level, std::string(e.record().message), e.record().line});
    });
  }
};

ts::logger_options all_levels() {
  ts::logger_options o;
  o.level = ts::log_level::trace;
  return o;
}

}  // namespace

TEST(LogModule, TheGuidesExampleCompilesAndRuns) {
  using namespace thread_system;  // the guide's only change: this namespace
  const int value = 42;
  const std::string error = "disk full";
  // 003, "Simple usage", as written (its console sink writes to stdout).
  log_module::start();
  log_module::write_information("Message: {}", value);
  log_module::write_error("Error: {}", error);
  log_module::stop();
  const auto s = log_module::statistics();
  EXPECT_EQ(s.written, 2U);
  EXPECT_FALSE(log_module::is_running());
}

TEST(LogModule, EachSeedTypeArrivesAtItsLevel) {
  capture c;
  ASSERT_TRUE(ts::log_module::start({c.sink()}, all_levels()));
  ts::log_module::write_exception("x {}", 1);
  ts::log_module::write_error("e {}", 2);
  ts::log_module::write_information("i {}", 3);
  const std::uint32_t info_line = __LINE__ - 1;
  ts::log_module::write_debug("d {}", 4);
  ts::log_module::write_sequence("s {}", 5);
  ts::log_module::write_parameter("p {}", 6);
  ts::log_module::write(ts::log_types::None, "never");
  ts::log_module::stop();
  std::lock_guard lock(c.m);
  const std::vector<std::pair<ts::log_level, std::string>> expected = {
      {ts::log_level::critical, "x 1"}, {ts::log_level::error, "e 2"}, {ts::log_level::info, "i 3"},
      {ts::log_level::debug, "d 4"},    {ts::log_level::trace, "s 5"}, {ts::log_level::trace, "p 6"}};
  ASSERT_EQ(c.records.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(c.records[i].level, expected[i].first) << i;
    EXPECT_EQ(c.records[i].message, expected[i].second) << i;
  }
  EXPECT_EQ(c.records[2].line, info_line);  // the caller's location, not the facade's
}

TEST(LogModule, CallsWhileNoDefaultLoggerRunsAreRefusedAndCounted) {
  ASSERT_FALSE(ts::log_module::is_running());
  const auto before = ts::log_module::statistics().rejected;
  ts::log_module::write_information("nobody listens {}", 1);
  ts::log_module::write_error("nor here");
  EXPECT_EQ(ts::log_module::statistics().rejected, before + 2);

  capture c;
  ASSERT_TRUE(ts::log_module::start({c.sink()}, all_levels()));
  auto again = ts::log_module::start();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ts::error_code::already_started);
  auto bad = ts::log_module::start({nullptr});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), ts::error_code::already_started);  // one default at a time, checked first
  ts::log_module::stop();
  ts::log_module::stop();  // idempotent
  auto null_sink = ts::log_module::start({nullptr});
  ASSERT_FALSE(null_sink);
  EXPECT_EQ(null_sink.error().code(), ts::error_code::invalid_argument);
  EXPECT_FALSE(ts::log_module::is_running());
}

// 000, "Migration Path", as written (namespace changed), compiled once with
// HIGH_CONTENTION defined (the lock-free logger's name) and once without.
namespace {
void guide_migration_high_contention(int value) {
  using namespace thread_system;
#define HIGH_CONTENTION
#ifdef HIGH_CONTENTION
  using logger_type = lockfree_logger;
#else
  using logger_type = logger;
#endif
  auto& log = logger_type::handle();
  log.write(log_types::Information, "Message: {}", value);
#undef HIGH_CONTENTION
}

void guide_migration_default(int value) {
  using namespace thread_system;
#ifdef HIGH_CONTENTION
  using logger_type = lockfree_logger;
#else
  using logger_type = logger;
#endif
  auto& log = logger_type::handle();
  log.write(log_types::Information, "Message: {}", value);
}
}  // namespace

TEST(LoggerHandle, TheGuidesMigrationExampleWritesToTheDefaultLogger) {
  capture c;
  ASSERT_TRUE(ts::log_module::start({c.sink()}, all_levels()));
  guide_migration_default(7);
  guide_migration_high_contention(8);
  EXPECT_EQ(&ts::lockfree_logger::handle(), &ts::logger::handle());  // the one default logger
  ts::log_module::stop();
  std::lock_guard lock(c.m);
  ASSERT_EQ(c.records.size(), 2U);
  EXPECT_EQ(c.records[0].message, "Message: 7");
  EXPECT_EQ(c.records[1].message, "Message: 8");
  EXPECT_EQ(c.records[0].level, ts::log_level::info);
}

TEST(LoggerHandle, StartsADefaultLoggerWhenNoneRuns) {
  ASSERT_FALSE(ts::log_module::is_running());
  ts::logger& log = ts::logger::handle();  // console sink on stdout
  EXPECT_TRUE(ts::log_module::is_running());
  log.write(ts::log_types::None, "not logged");
  log.write(ts::log_types::Debug, "handle started me");
  ts::log_module::stop();
  EXPECT_EQ(ts::log_module::statistics().written, 1U);
}

TEST(LogModule, ASinkMayUseLogModuleWhileItStops) {
  // stop() joins the writer thread; a sink running there that asks
  // log_module for its state must not wait for stop() (no deadlock).
  std::atomic<int> asked{0};
  // The final flush runs on the writer thread inside stop(): a sink's flush
  // that asks log_module for its state is certain to do so while stop() runs.
  auto sink = std::make_shared<ts::callback_sink>([](const ts::log_entry&) {},
                                                  [&asked] {
                                                    (void)ts::log_module::statistics();
                                                    (void)ts::log_module::is_running();
                                                    asked.fetch_add(1, std::memory_order_relaxed);  // read after stop()
                                                  });
  ASSERT_TRUE(ts::log_module::start({sink}, all_levels()));
  ts::log_module::write_information("one record");
  ts::log_module::stop();
  EXPECT_GE(asked.load(std::memory_order_relaxed), 1);
  EXPECT_EQ(ts::log_module::statistics().written, 1U);
}
