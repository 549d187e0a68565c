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
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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

// log_module::stop() from a sink begins the stop; the next stop() from
// another thread waits until every accepted record is written. (It failed
// to join the writer from the writer - a sink error - and the next stop()
// found no default logger and returned at once.)
TEST(LogModule, StopFromASinkAndAgainFromAnotherThreadWritesEverything) {
  std::atomic<std::uint64_t> seen{0};
  auto sink = std::make_shared<ts::callback_sink>([&seen](const ts::log_entry&) {
    // relaxed: counted on the writer thread, read after stop() joined it
    if (seen.fetch_add(1, std::memory_order_relaxed) == 0) ts::log_module::stop();
  });
  ASSERT_TRUE(ts::log_module::start({sink}, all_levels()));
  for (int i = 0; i < 200; ++i) ts::log_module::write_information("record {}", i);
  while (seen.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
  ts::log_module::stop();
  const ts::logger_statistics s = ts::log_module::statistics();
  EXPECT_EQ(s.written, s.accepted);
  EXPECT_EQ(seen.load(std::memory_order_relaxed), s.written);
  EXPECT_EQ(s.sink_errors, 0U);
  EXPECT_FALSE(ts::log_module::is_running());
}

// A sink stops the default logger (only begun, on its writer), and a new
// default starts before the next stop(): that stop() still waits until the
// first logger has written everything it accepted.
TEST(LogModule, StopAfterARestartWritesWhatTheReplacedDefaultAccepted) {
  constexpr std::uint64_t n = 200;
  std::atomic<std::uint64_t> seen{0};
  std::atomic<bool> all_written{false};
  auto first = std::make_shared<ts::callback_sink>([&](const ts::log_entry&) {
    // relaxed: counted on the writer thread, read after stop() joined it
    if (seen.fetch_add(1, std::memory_order_relaxed) == 0) {
      // acquire: pairs with the release below (every call made, all accepted)
      while (!all_written.load(std::memory_order_acquire)) std::this_thread::yield();
      ts::log_module::stop();  // only begins the stop (on the writer thread)
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow sink: records still queued
  });
  ASSERT_TRUE(ts::log_module::start({first}, all_levels()));
  for (std::uint64_t i = 0; i < n; ++i) ts::log_module::write_information("record {}", i);
  all_written.store(true, std::memory_order_release);
  while (ts::log_module::is_running()) std::this_thread::yield();  // the sink began the stop
  ASSERT_TRUE(ts::log_module::start({std::make_shared<ts::callback_sink>([](const ts::log_entry&) {})}, all_levels()));
  ts::log_module::stop();
  EXPECT_EQ(seen.load(std::memory_order_relaxed), n);  // every record of the replaced default, written
}

// A refused start(sinks) whose sink's destructor calls log_module: no
// deadlock on the facade's lock (the sink is destroyed unlocked).
TEST(LogModule, ARefusedStartMayDestroyASinkThatUsesLogModule) {
  ASSERT_TRUE(ts::log_module::start({std::make_shared<ts::callback_sink>([](const ts::log_entry&) {})}, all_levels()));
  struct calling_sink final : ts::log_sink {
    std::atomic<bool>* destroyed;
    explicit calling_sink(std::atomic<bool>* d) : destroyed(d) {}
    calling_sink(const calling_sink&) = delete;
    calling_sink& operator=(const calling_sink&) = delete;
    ~calling_sink() override {
      (void)ts::log_module::statistics();  // takes the facade's lock
      destroyed->store(true, std::memory_order_relaxed);
    }
    ts::result<void> write(const ts::log_entry&) override { return {}; }
    ts::result<void> flush() override { return {}; }
  };
  std::atomic<bool> destroyed{false};
  std::vector<std::shared_ptr<ts::log_sink>> sinks{std::make_shared<calling_sink>(&destroyed)};
  auto r = ts::log_module::start(std::move(sinks), all_levels());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::already_started);
  EXPECT_TRUE(destroyed.load(std::memory_order_relaxed));
  ts::log_module::stop();
}

// Two stop() calls at once: the second also returns only once everything is
// written (it found no default logger and returned while the first still
// drained).
TEST(LogModule, ASecondConcurrentStopWaitsForTheFirst) {
  std::atomic<bool> gate{false};
  auto sink = std::make_shared<ts::callback_sink>([&gate](const ts::log_entry&) {
    // acquire: pairs with the release below (nothing else is published)
    while (!gate.load(std::memory_order_acquire)) std::this_thread::yield();
  });
  ASSERT_TRUE(ts::log_module::start({sink}, all_levels()));
  for (int i = 0; i < 50; ++i) ts::log_module::write_information("record {}", i);
  std::thread first([] { ts::log_module::stop(); });  // waits: the sink holds the writer
  while (ts::log_module::is_running()) std::this_thread::yield();
  std::atomic<bool> second_returned{false};
  ts::logger_statistics at_second_return;
  std::thread second([&] {
    ts::log_module::stop();
    at_second_return = ts::log_module::statistics();
    second_returned.store(true, std::memory_order_release);  // publishes at_second_return
  });
  // The sink is released once the second stop() returned, or after a while
  // (a fixed stop() waits for the release, so it cannot return first).
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (!second_returned.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  gate.store(true, std::memory_order_release);
  second.join();
  first.join();
  EXPECT_EQ(at_second_return.written, at_second_return.accepted);
  EXPECT_EQ(at_second_return.accepted, 50U);
}

// A call that reaches a replaced default logger (through a reference taken
// while it ran) is refused and counted in statistics(), also when it comes
// after the next logger started (it was counted only up to that start).
TEST(LogModule, RefusalsOfAReplacedDefaultLoggerAreCounted) {
  capture c;
  ASSERT_TRUE(ts::log_module::start({c.sink()}, all_levels()));
  ts::logger& old_default = ts::logger::handle();
  ts::log_module::stop();
  ASSERT_TRUE(ts::log_module::start({c.sink()}, all_levels()));
  const auto before = ts::log_module::statistics().rejected;
  EXPECT_FALSE(old_default.try_log(ts::log_level::info, "too late {}", 1));
  EXPECT_EQ(ts::log_module::statistics().rejected, before + 1);
  ts::log_module::stop();
  EXPECT_EQ(ts::log_module::statistics().rejected, before + 1);
}

// At exit, logger::handle() returns a stopped logger also when no default
// logger ever ran (it threw pool_stopped: std::terminate from a static
// destructor). In a fresh process (the "threadsafe" death-test style runs
// this test alone in a re-executed binary), so that no earlier test started
// one.
TEST(LoggerHandle, AtExitWithNoDefaultEverStartedReturnsAStoppedLogger) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // Destroyed after the exit handler that log_module registers below
        // (registered later, so run earlier).
        static struct reporter {
          reporter() = default;
          reporter(const reporter&) = delete;
          reporter& operator=(const reporter&) = delete;
          ~reporter() {
            ts::logger& l = ts::logger::handle();
            const auto r = l.try_log(ts::log_level::info, "shutting down {}", 1);
            std::fprintf(stderr, "refused: %s\n",
                         !r && r.error().code() == ts::error_code::pool_stopped ? "yes" : "no");
          }
        } at_exit;
        ts::log_module::write_information("before any start {}", 1);  // refused; registers the exit handler
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "refused: yes");
}
