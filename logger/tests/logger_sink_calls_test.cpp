// Sinks that call into loggers: a sink that logs into, flushes or stops its
// own logger, and loggers whose sinks log into, flush, stop or destroy each
// other (no cycle of waits can close; a pipeline without a cycle still waits
// for room and loses nothing).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "logger_test_sinks.hpp"
#include "support/test_support.hpp"
#include "thread_system/logger/logger.hpp"
#include "thread_system/logger/sinks.hpp"

namespace thread_system {
namespace {

using test::options_with;

TEST(LoggerSinkCalls, ASinkMayLogButNotFlushOrBlock) {
  std::vector<std::string> got;
  logger* self = nullptr;
  result<void> flush_from_sink;
  auto sink = std::make_shared<callback_sink>([&](const log_entry& e) {
    got.emplace_back(e.record().message);
    if (e.record().message == "outer") {
      flush_from_sink = self->flush();
      self->info("inner");
    }
  });
  {
    logger log({sink}, options_with(8192, overflow_policy::block));
    self = &log;
    log.info("outer");
    ASSERT_TRUE(log.flush());
    ASSERT_TRUE(log.flush());
  }
  ASSERT_FALSE(flush_from_sink);
  EXPECT_EQ(flush_from_sink.error().code(), error_code::invalid_argument);
  EXPECT_EQ(got, (std::vector<std::string>{"outer", "inner"}));
}

// stop() from a sink (the writer thread) begins the stop and returns; the
// writer still writes every accepted record, and the destructor joins it.
// (It tried to join the writer from the writer: the join failed, the logger
// counted it as a sink error and took itself for stopped, and its destructor
// freed the buffers under a running writer: std::terminate.)
TEST(LoggerSinkCalls, StopFromASinkBeginsTheStopAndTheDestructorJoins) {
  logger* self = nullptr;
  std::atomic<std::uint64_t> seen{0};
  auto sink = std::make_shared<callback_sink>([&](const log_entry&) {
    // relaxed: counted on the writer thread, read after the join
    if (seen.fetch_add(1, std::memory_order_relaxed) == 0) self->stop();
  });
  logger_statistics s;
  std::uint64_t calls_accepted = 0;
  {
    logger log({sink}, options_with(1 << 16, overflow_policy::block));
    self = &log;
    for (int i = 0; i < 200; ++i) {
      if (log.try_log(log_level::info, "record {}", i)) ++calls_accepted;
    }
    while (seen.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
    log.stop();  // joins: every accepted record is written
    s = log.statistics();
    EXPECT_EQ(s.written, s.accepted);
    EXPECT_EQ(seen.load(std::memory_order_relaxed), s.written);
  }
  EXPECT_EQ(s.accepted, calls_accepted);
  EXPECT_EQ(s.accepted + s.rejected, 200U);
  EXPECT_EQ(s.sink_errors, 0U);
}

// Deadline for the cycle tests: a deadlock ends the process with a message
// (the loggers' destructors would wait for ever).
void expect_within_a_minute(const std::function<bool()>& done, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "%s: not within a minute (a deadlock)\n", what);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Two loggers whose sinks log into each other, both under the block
// policy: each writer may find its buffer in the other logger full while
// the other's writer waits the same way for it. A writer thread's call
// waits for room only while the logger it logs into has no writer waiting
// in another logger; otherwise it is refused as under the drop policy
// (counted, reported), so the cycle cannot close. (Both writers waited for
// each other for ever.)
TEST(LoggerSinkCalls, SinksLoggingIntoEachOtherUnderBlockDoNotDeadlock) {
  constexpr std::uint64_t budget = 20000;  // records forwarded in all
  constexpr int fan_out = 4;               // each record forwarded makes this many
  std::array<logger*, 2> loggers{};
  std::array<std::atomic<std::uint64_t>, 2> into_accepted{};  // per target logger
  std::array<std::atomic<std::uint64_t>, 2> into_refused{};
  std::atomic<std::uint64_t> attempts{0};
  const std::string payload(200, 'x');
  auto forwarding_sink = [&](int target) {
    return std::make_shared<callback_sink>([&, target](const log_entry&) {
      for (int i = 0; i < fan_out; ++i) {
        // relaxed: a budget shared by both writers; read after both stop.
        if (attempts.fetch_add(1, std::memory_order_relaxed) >= budget) return;
        if (loggers[target]->try_log(log_level::info, "{}", payload)) {
          into_accepted[target].fetch_add(1, std::memory_order_relaxed);
        } else {
          into_refused[target].fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  };
  logger a({forwarding_sink(1)}, options_with(4096, overflow_policy::block));
  logger b({forwarding_sink(0)}, options_with(4096, overflow_policy::block));
  loggers = {&a, &b};
  a.info("start");
  // Wait for every forwarding call to return: only a deadlock keeps them from that.
  // relaxed: counters only; the stops below join the writers that wrote them
  // before the final checks read them, and the wait needs no order.
  auto count = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  auto done = [&] {
    return count(into_accepted[0]) + count(into_accepted[1]) + count(into_refused[0]) + count(into_refused[1]);
  };
  expect_within_a_minute([&] { return done() >= budget; }, "two writers logging into each other");
  ASSERT_TRUE(a.flush());
  ASSERT_TRUE(b.flush());
  a.stop();
  b.stop();
  const logger_statistics sa = a.statistics();
  const logger_statistics sb = b.statistics();
  EXPECT_EQ(sa.written, sa.accepted);
  EXPECT_EQ(sb.written, sb.accepted);
  EXPECT_EQ(sa.accepted, 1 + count(into_accepted[0]));
  EXPECT_EQ(sb.accepted, count(into_accepted[1]));
  EXPECT_EQ(sa.dropped, count(into_refused[0]));
  EXPECT_EQ(sb.dropped, count(into_refused[1]));
  EXPECT_EQ(done(), budget);
}

// Two loggers whose sinks, at a record "go", wait until both are inside a
// sink, then flush the other logger (result in flushed[self]). on_go runs
// first in each sink (logger 0 or 1).
struct flush_cycle {
  std::latch both_in_sinks{2};
  std::array<logger*, 2> loggers{};
  std::array<result<void>, 2> flushed{};
  std::atomic<int> returned{0};
  std::function<void(int)> on_go = [](int) {};

  std::shared_ptr<callback_sink> sink(int self, int other) {
    return std::make_shared<callback_sink>([this, self, other](const log_entry& e) {
      if (e.record().message != "go") return;
      on_go(self);
      both_in_sinks.arrive_and_wait();
      flushed[self] = loggers[other]->flush();
      returned.fetch_add(1, std::memory_order_release);  // pairs with the acquire in wait_and_check()
    });
  }
  // Both sinks return, and at least one of the two flushes was refused
  // (both waiting would have been the deadlock), with invalid_argument.
  void wait_and_check(const char* what) {
    expect_within_a_minute([&] { return returned.load(std::memory_order_acquire) == 2; }, what);
    const int refused = static_cast<int>(!flushed[0]) + static_cast<int>(!flushed[1]);
    EXPECT_GE(refused, 1);
    for (const auto& r : flushed) {
      if (!r) {
        EXPECT_EQ(r.error().code(), error_code::invalid_argument);
      }
    }
  }
};

// Each of two loggers' sinks flushes (or stops) the other while both
// writers are inside their sinks: the second to arrive does not wait
// (flush() returns invalid_argument; stop() only begins the stop). (Each
// waited for the other's writer for ever.)
TEST(LoggerSinkCalls, SinksFlushingEachOtherDoNotDeadlock) {
  flush_cycle cycle;
  logger a({cycle.sink(0, 1)}, options_with(8192, overflow_policy::block));
  logger b({cycle.sink(1, 0)}, options_with(8192, overflow_policy::block));
  cycle.loggers = {&a, &b};
  a.info("go");
  b.info("go");
  cycle.wait_and_check("flush() cycle");
  EXPECT_TRUE(a.flush());
  EXPECT_TRUE(b.flush());
}

// The same cycle with A's record written by a thread inside a.flush()
// (flush_on_caller): that thread counts as A's writer, so the rules hold
// as they do for writer threads. Rounds repeat (fresh loggers each) until
// one had A's sink run on the flushing thread, within a time budget; every
// round must end, with at least one of the two flushes refused.
TEST(LoggerSinkCalls, AThreadWritingInFlushFollowsTheCycleRules) {
  bool seen_on_flusher = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int round = 0; !seen_on_flusher && std::chrono::steady_clock::now() < deadline; ++round) {
    flush_cycle cycle;
    std::atomic<bool> a_sink_on_flusher{false};
    thread_local bool tl_flusher = false;
    cycle.on_go = [&](int self) {
      // relaxed: read after the join below
      if (self == 0 && tl_flusher) a_sink_on_flusher.store(true, std::memory_order_relaxed);
    };
    logger a({cycle.sink(0, 1)}, options_with(8192, overflow_policy::block));
    logger b({cycle.sink(1, 0)}, options_with(8192, overflow_policy::block));
    cycle.loggers = {&a, &b};
    result<void> outer;
    std::thread flusher([&] {
      tl_flusher = true;
      a.info("go");
      outer = a.flush();
    });
    b.info("go");
    cycle.wait_and_check("flush() cycle with a caller writing");
    flusher.join();
    EXPECT_TRUE(outer) << "round " << round;
    EXPECT_TRUE(a.flush());
    EXPECT_TRUE(b.flush());
    seen_on_flusher = a_sink_on_flusher.load(std::memory_order_relaxed);  // relaxed: after the join
  }
  EXPECT_TRUE(seen_on_flusher) << "A's sink never ran on the flushing thread";
}

TEST(LoggerSinkCalls, SinksStoppingEachOtherDoNotDeadlock) {
  std::latch both_in_sinks(2);
  std::array<logger*, 2> loggers{};
  std::atomic<int> returned{0};
  auto stopping_sink = [&](int other) {
    return std::make_shared<callback_sink>([&, other](const log_entry& e) {
      if (e.record().message != "go") return;
      both_in_sinks.arrive_and_wait();
      loggers[other]->stop();
      returned.fetch_add(1, std::memory_order_release);  // pairs with the acquire below
    });
  };
  logger_statistics sa;
  logger_statistics sb;
  {
    logger a({stopping_sink(1)}, options_with(8192, overflow_policy::block));
    logger b({stopping_sink(0)}, options_with(8192, overflow_policy::block));
    loggers = {&a, &b};
    ASSERT_TRUE(a.try_log(log_level::info, "go"));
    ASSERT_TRUE(b.try_log(log_level::info, "go"));
    expect_within_a_minute([&] { return returned.load(std::memory_order_acquire) == 2; }, "stop() cycle");
    EXPECT_EQ(a.try_log(log_level::info, "late").error().code(), error_code::pool_stopped);
    EXPECT_EQ(b.try_log(log_level::info, "late").error().code(), error_code::pool_stopped);
    a.stop();  // joins (from this thread), whatever the sinks' stop() did
    b.stop();
    sa = a.statistics();
    sb = b.statistics();
  }
  EXPECT_EQ(sa.accepted, 1U);
  EXPECT_EQ(sa.written, 1U);
  EXPECT_EQ(sb.accepted, 1U);
  EXPECT_EQ(sb.written, 1U);
}

// The other side of the rule: a sink forwarding into another logger whose
// writer waits nowhere waits for room under `block` - nothing is dropped.
// B's writer is held in its first record until A's forwarding has found
// B's buffer full and waited (B's `blocked` count), so the wait is certain.
TEST(LoggerSinkCalls, ASinkForwardingIntoASlowLoggerWaitsForRoomUnderBlock) {
  constexpr int records = 500;
  std::atomic<bool> release{false};
  auto held = std::make_shared<callback_sink>([&release](const log_entry&) {
    while (!release.load(std::memory_order_acquire)) {  // pairs with the release store below
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  logger b({held}, options_with(4096, overflow_policy::block));
  std::atomic<int> forwarded{0};
  const std::string payload(200, 'y');
  auto forwarding = std::make_shared<callback_sink>([&](const log_entry&) {
    if (b.try_log(log_level::info, "{}", payload)) forwarded.fetch_add(1, std::memory_order_relaxed);
  });
  logger a({forwarding}, options_with(1 << 20, overflow_policy::block));
  for (int i = 0; i < records; ++i) a.info("record {}", i);
  expect_within_a_minute([&] { return b.statistics().blocked > 0; }, "the forwarding writer waiting for room");
  release.store(true, std::memory_order_release);
  ASSERT_TRUE(a.flush());
  ASSERT_TRUE(b.flush());
  a.stop();
  b.stop();
  EXPECT_EQ(forwarded.load(std::memory_order_relaxed), records);  // written on a's writer, joined by a.stop()
  const logger_statistics sb = b.statistics();
  EXPECT_EQ(sb.accepted, static_cast<std::uint64_t>(records));
  EXPECT_EQ(sb.dropped, 0U);
}

// A sink of logger A destroys logger B (it holds B's last owner) while B's
// writer, forwarding into A under `block`, waits for room in A - room that
// only A's writer, now inside B's destructor, could free. The destructor
// marks A's writer as waiting and wakes A's waiters: B's writer gives up
// (its record dropped and counted in A), drains, and the destructor's join
// returns. (The two writers waited for each other for ever.)
TEST(LoggerSinkCalls, ADestructorRunByAnotherLoggersSinkEndsItsWritersWaitInThatLogger) {
  std::latch gate(1);
  std::unique_ptr<logger> b;
  std::atomic<bool> destroyed{false};
  std::atomic<std::uint64_t> forwarded{0};
  std::atomic<std::uint64_t> refused{0};
  auto destroying = std::make_shared<callback_sink>([&](const log_entry& e) {
    if (e.record().message != "destroy b") return;
    gate.wait();
    b.reset();                                         // on A's writer thread: B's destructor joins B's writer
    destroyed.store(true, std::memory_order_release);  // pairs with the acquire below
  });
  logger a({destroying}, options_with(4096, overflow_policy::block));
  const std::string payload(200, 'z');
  auto forwarding = std::make_shared<callback_sink>([&](const log_entry&) {
    if (a.try_log(log_level::info, "{}", payload)) {
      forwarded.fetch_add(1, std::memory_order_relaxed);
    } else {
      refused.fetch_add(1, std::memory_order_relaxed);
    }
  });
  b = std::make_unique<logger>(std::vector<std::shared_ptr<log_sink>>{forwarding},
                               options_with(1 << 20, overflow_policy::block));
  a.info("destroy b");  // A's writer waits at the gate from now on
  for (int i = 0; i < 200; ++i) b->info("record {}", i);
  // B's writer has filled its buffer in A and waits for room there.
  expect_within_a_minute([&] { return a.statistics().blocked > 0; }, "B's writer waiting for room in A");
  gate.count_down();
  expect_within_a_minute([&] { return destroyed.load(std::memory_order_acquire); },
                         "B destroyed by A's sink while B's writer waits in A");
  // B's destructor joined B's writer: every record B accepted was forwarded
  // or refused, and A counts the refused ones as dropped.
  EXPECT_EQ(forwarded.load(std::memory_order_relaxed) + refused.load(std::memory_order_relaxed), 200U);
  EXPECT_GE(refused.load(std::memory_order_relaxed), 1U);
  a.stop();
  const logger_statistics sa = a.statistics();
  EXPECT_EQ(sa.written, sa.accepted);
  EXPECT_EQ(sa.accepted, 1 + forwarded.load(std::memory_order_relaxed));
  EXPECT_EQ(sa.dropped, refused.load(std::memory_order_relaxed));
}

TEST(LoggerSinkCalls, InvalidOptionsAreRefused) {
  auto sink = std::make_shared<null_sink>();
  logger_options o;
  o.thread_buffer_bytes = 0;
  EXPECT_THROW(logger({sink}, o), error_exception);
  o.thread_buffer_bytes = 1000;  // below 1 KiB
  EXPECT_THROW(logger({sink}, o), error_exception);
  o.thread_buffer_bytes = (std::size_t{1} << 30) + 1;
  EXPECT_THROW(logger({sink}, o), error_exception);
  o.thread_buffer_bytes = 4096;
  o.batch_size = 0;
  EXPECT_THROW(logger({sink}, o), error_exception);
  o.batch_size = 256;
  o.max_message_bytes = 2048 - 48 + 1;  // one byte more than half the buffer holds
  EXPECT_THROW(logger({sink}, o), error_exception);
  o.max_message_bytes = 2048 - 48;  // exactly what half the buffer holds
  EXPECT_NO_THROW(logger({sink}, o));
  o.max_message_bytes = 10000;
  EXPECT_THROW(logger({nullptr}, logger_options{}), error_exception);
  try {
    logger l({sink}, o);
  } catch (const error_exception& e) {
    EXPECT_EQ(e.code(), error_code::invalid_argument);
  }
}

}  // namespace
}  // namespace thread_system
