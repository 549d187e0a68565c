// The async logger: exactly-once delivery across producers and shutdown,
// overflow policies with exact counts, level filtering, record contents,
// error reporting. Flushes: logger_flush_test.cpp; sinks that call into
// loggers: logger_sink_calls_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
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

using test::gated_sink;
using test::options_with;
using test::recording_sink;
using test::scaled;

// Parses "p<producer> s<sequence> ..." into its two numbers.
bool parse_tag(std::string_view message, int& producer, int& sequence) {
  return std::sscanf(std::string(message).c_str(), "p%d s%d", &producer, &sequence) == 2;
}

// How many records of `record` bytes fit, one after another, in an empty
// thread buffer of `buffer` bytes whose first `held` bytes are still held by
// the writer (a record is never split: one that does not fit before the end
// starts at offset 0, after a wrap marker).
std::size_t records_that_fit(std::size_t buffer, std::size_t held, std::size_t record) {
  std::size_t position = held;
  std::size_t n = 0;
  for (;;) {
    const std::size_t to_end = buffer - position % buffer;
    const std::size_t needed = record <= to_end ? record : to_end + record;
    if (position + needed > buffer) return n;
    position += needed;
    ++n;
  }
}

// Producers × messages with per-producer sequence numbers; a callback sink
// counts each (producer, sequence) and checks per-producer order.
void run_exactly_once(std::size_t buffer_bytes, overflow_policy policy, bool vary_length) {
  constexpr int producers = 4;
  const int per_producer = static_cast<int>(scaled(20000));
  std::vector<std::vector<int>> seen(producers, std::vector<int>(static_cast<std::size_t>(per_producer), 0));
  std::vector<int> last(producers, -1);
  std::atomic<int> out_of_order{0};
  std::atomic<int> foreign{0};
  auto sink = std::make_shared<callback_sink>([&](const log_entry& e) {
    int p = 0;
    int s = 0;
    if (!parse_tag(e.record().message, p, s) || p < 0 || p >= producers || s < 0 || s >= per_producer) {
      foreign.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping (e.g. a "dropped" notice)
      return;
    }
    ++seen[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)];
    if (s <= last[static_cast<std::size_t>(p)]) out_of_order.fetch_add(1, std::memory_order_relaxed);
    last[static_cast<std::size_t>(p)] = s;
  });
  std::vector<std::vector<bool>> accepted(producers, std::vector<bool>(static_cast<std::size_t>(per_producer), false));
  {
    logger log({sink}, options_with(buffer_bytes, policy));
    std::vector<std::thread> threads;
    const std::string padding(300, 'x');
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        for (int s = 0; s < per_producer; ++s) {
          // Lengths from 0 to 299 characters, so records wrap the buffer's end at varying offsets.
          const std::string_view pad =
              vary_length ? std::string_view(padding).substr(0, static_cast<std::size_t>((s * 37) % 300))
                          : std::string_view();
          accepted[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)] =
              log.try_log(log_level::info, "p{} s{} {}", p, s, pad).has_value();
        }
      });
    }
    for (auto& t : threads) t.join();
    log.stop();
    const logger_statistics st = log.statistics();
    EXPECT_EQ(st.accepted, st.written);
    EXPECT_EQ(st.accepted + st.dropped,
              static_cast<std::uint64_t>(producers) * static_cast<std::uint64_t>(per_producer));
    if (policy == overflow_policy::block) {
      EXPECT_EQ(st.dropped, 0U);
    }
    EXPECT_EQ(st.rejected, 0U);
  }
  EXPECT_EQ(out_of_order.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  for (int p = 0; p < producers; ++p) {
    for (int s = 0; s < per_producer; ++s) {
      const int expected = accepted[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)] ? 1 : 0;
      ASSERT_EQ(seen[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)], expected) << "p" << p << " s" << s;
    }
  }
  if (policy == overflow_policy::block) {
    EXPECT_EQ(foreign.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  }
}

TEST(Logger, EveryAcceptedMessageReachesTheSinkExactlyOnce) {
  run_exactly_once(std::size_t{1} << 20, overflow_policy::block, false);
}

TEST(Logger, ExactlyOnceWithATinyBlockingBufferAndVaryingLengths) {
  run_exactly_once(1024, overflow_policy::block, true);
}

TEST(Logger, ExactlyOnceWithATinyDroppingBuffer) { run_exactly_once(1024, overflow_policy::drop, true); }

TEST(Logger, ShutdownWhileProducingLosesNothingAccepted) {
  constexpr int producers = 4;
  const int per_producer = static_cast<int>(scaled(50000));
  std::vector<std::vector<int>> seen(producers, std::vector<int>(static_cast<std::size_t>(per_producer), 0));
  auto sink = std::make_shared<callback_sink>([&](const log_entry& e) {
    int p = 0;
    int s = 0;
    if (parse_tag(e.record().message, p, s)) ++seen[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)];
  });
  std::vector<std::vector<char>> accepted(producers, std::vector<char>(static_cast<std::size_t>(per_producer), 0));
  std::uint64_t rejected_calls = 0;
  {
    logger log({sink}, options_with(8192, overflow_policy::block));
    std::latch started(producers + 1);
    std::vector<std::thread> threads;
    std::vector<std::uint64_t> rejected(producers, 0);
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        started.arrive_and_wait();
        for (int s = 0; s < per_producer; ++s) {
          auto r = log.try_log(log_level::info, "p{} s{}", p, s);
          if (r) {
            accepted[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)] = 1;
          } else {
            EXPECT_EQ(r.error().code(), error_code::pool_stopped);
            ++rejected[static_cast<std::size_t>(p)];
          }
        }
      });
    }
    started.arrive_and_wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    log.stop();  // while the producers are still logging (most of them)
    for (auto& t : threads) t.join();
    for (auto r : rejected) rejected_calls += r;
    const logger_statistics st = log.statistics();
    EXPECT_EQ(st.accepted, st.written);
    EXPECT_EQ(st.rejected, rejected_calls);
    EXPECT_EQ(st.accepted + st.rejected,
              static_cast<std::uint64_t>(producers) * static_cast<std::uint64_t>(per_producer));
  }
  for (int p = 0; p < producers; ++p) {
    for (int s = 0; s < per_producer; ++s) {
      ASSERT_EQ(seen[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)],
                accepted[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)])
          << "p" << p << " s" << s;
    }
  }
}

TEST(Logger, DestructorWritesEverythingAccepted) {
  auto sink = std::make_shared<null_sink>();
  const std::size_t n = scaled(100000);
  {
    logger log({sink}, options_with(16384, overflow_policy::block));
    for (std::size_t i = 0; i < n; ++i) log.info("message {}", i);
  }
  EXPECT_EQ(sink->records(), n);
}

TEST(Logger, DropPolicyCountsExactlyAndReportsTheNumber) {
  auto sink = std::make_shared<gated_sink>();
  logger log({sink}, options_with(1024, overflow_policy::drop));
  ASSERT_TRUE(log.try_log(log_level::info, "first"));
  sink->wait_until_blocked();  // the writer holds "first": its bytes are not freed until the batch ends
  // "m{}" with an int: a deferred record of 4 payload bytes.
  const int fit = static_cast<int>(records_that_fit(1024, detail::record_bytes(5), detail::record_bytes(sizeof(int))));
  ASSERT_GT(fit, 4);
  const int attempts = 100;
  int ok = 0;
  int full = 0;
  for (int i = 0; i < attempts; ++i) {
    auto r = log.try_log(log_level::info, "m{}", i);
    if (r) {
      ++ok;
    } else {
      EXPECT_EQ(r.error().code(), error_code::queue_full);
      ++full;
    }
  }
  EXPECT_EQ(ok, fit);  // exactly what fits: nothing consumes while the writer is blocked
  EXPECT_EQ(full, attempts - fit);
  logger_statistics st = log.statistics();
  EXPECT_EQ(st.accepted, static_cast<std::uint64_t>(fit) + 1);
  EXPECT_EQ(st.dropped, static_cast<std::uint64_t>(full));
  EXPECT_EQ(st.accepted + st.dropped, static_cast<std::uint64_t>(attempts + 1));

  sink->open();
  ASSERT_TRUE(log.flush());
  const auto entries = sink->recorder().entries();
  ASSERT_EQ(entries.size(), static_cast<std::size_t>(fit) + 2);  // first, the notice, the ones that fit
  EXPECT_EQ(entries[0].message, "first");
  EXPECT_EQ(entries[1].message, fmt::format("{} messages dropped", full));
  EXPECT_EQ(entries[1].level, log_level::warn);
  for (int i = 0; i < fit; ++i) EXPECT_EQ(entries[static_cast<std::size_t>(i) + 2].message, fmt::format("m{}", i));
  st = log.statistics();
  EXPECT_EQ(st.written, static_cast<std::uint64_t>(fit) + 1);
}

TEST(Logger, DroppedNoticeIsWrittenAtStopWhenNothingFollows) {
  auto sink = std::make_shared<gated_sink>();
  {
    logger log({sink}, options_with(1024, overflow_policy::drop));
    log.info("first");
    sink->wait_until_blocked();
    const std::size_t fit = records_that_fit(1024, detail::record_bytes(5), detail::record_bytes(sizeof(int)));
    for (std::size_t i = 0; i < fit + 6; ++i) log.info("m{}", i);  // `fit` fit, 6 dropped
    EXPECT_EQ(log.statistics().dropped, 6U);
    sink->open();
    log.stop();
    ASSERT_EQ(sink->recorder().messages().size(), fit + 2);
  }
  const auto messages = sink->recorder().messages();
  EXPECT_EQ(messages[1], "6 messages dropped");
}

TEST(Logger, BlockPolicyWaitsForRoomAndLosesNothing) {
  auto sink = std::make_shared<gated_sink>();
  logger log({sink}, options_with(1024, overflow_policy::block));
  log.info("first");
  sink->wait_until_blocked();
  std::atomic<int> done{0};
  std::thread producer([&] {
    for (int i = 0; i < 50; ++i) {
      EXPECT_TRUE(log.try_log(log_level::info, "m{}", i));
      done.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
    }
  });
  // The producer fills the buffer (50 records need 3200 bytes) and then has to wait.
  while (log.statistics().blocked == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_LT(done.load(std::memory_order_relaxed), 50);
  sink->open();
  producer.join();
  ASSERT_TRUE(log.flush());
  const auto messages = sink->recorder().messages();
  ASSERT_EQ(messages.size(), 51U);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(messages[static_cast<std::size_t>(i) + 1], fmt::format("m{}", i));
  EXPECT_EQ(log.statistics().dropped, 0U);
}

TEST(Logger, StopWakesAProducerBlockedOnAFullBuffer) {
  auto sink = std::make_shared<gated_sink>();
  logger log({sink}, options_with(1024, overflow_policy::block));
  log.info("first");
  sink->wait_until_blocked();
  // Each thread has its own buffer: the producer fills its 1024 bytes with
  // two 400-character records (448 bytes each); a third does not fit.
  const std::string a(400, 'a');
  const std::string b(400, 'b');
  std::promise<result<void>> outcome;
  std::thread producer([&] {
    log.log_text(log_level::info, a);
    log.log_text(log_level::info, b);
    outcome.set_value(log.try_log_text(log_level::info, std::string(400, 'c')));
  });
  while (log.statistics().blocked == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread stopper([&] { log.stop(); });
  auto r = outcome.get_future().get();  // woken by stop(), refused
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), error_code::pool_stopped);
  sink->open();
  stopper.join();
  producer.join();
  EXPECT_EQ(sink->recorder().messages(), (std::vector<std::string>{"first", a, b}));
  EXPECT_EQ(log.statistics().rejected, 1U);
}

struct counted_argument {
  std::atomic<int>* formatted;
};

}  // namespace
}  // namespace thread_system

template <>
struct fmt::formatter<thread_system::counted_argument> : fmt::formatter<int> {
  template <typename Context>
  auto format(const thread_system::counted_argument& a, Context& ctx) const {
    a.formatted->fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
    return fmt::formatter<int>::format(42, ctx);
  }
};

namespace thread_system {
namespace {

TEST(Logger, LevelFilterRunsBeforeFormatting) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, options_with(8192, overflow_policy::block, log_level::warn));
  std::atomic<int> formatted{0};
  const counted_argument arg{&formatted};
  log.trace("t {}", arg);
  log.debug("d {}", arg);
  log.info("i {}", arg);
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(formatted.load(std::memory_order_seq_cst), 0);  // filtered calls never format their arguments
  log.warn("w {}", arg);
  log.error("e {}", arg);
  log.critical("c {}", arg);
  EXPECT_EQ(formatted.load(std::memory_order_seq_cst), 3);  // seq_cst: pairs with the writers' RMW/store
  EXPECT_FALSE(log.should_log(log_level::info));
  log.set_level(log_level::trace);
  EXPECT_TRUE(log.should_log(log_level::trace));
  log.trace("t2");
  log.set_level(log_level::off);
  log.critical("never");
  EXPECT_FALSE(log.should_log(log_level::critical));
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->messages(), (std::vector<std::string>{"w 42", "e 42", "c 42", "t2"}));
  const auto entries = sink->entries();
  EXPECT_EQ(entries[0].level, log_level::warn);
  EXPECT_EQ(entries[1].level, log_level::error);
  EXPECT_EQ(entries[2].level, log_level::critical);
  EXPECT_EQ(entries[3].level, log_level::trace);
  EXPECT_EQ(log.statistics().accepted, 4U);
}

// A level no record may have - log_level::off, a value outside log_level, a
// seed type outside log_types - is refused with invalid_argument and counted
// in `rejected`, whatever the filter: such calls were accepted and written
// as "[unknown]" (a value above off) or dropped without a trace (off, and
// an unknown seed type mapped to it).
TEST(Logger, ALevelNoRecordMayHaveIsRefusedAndCounted) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, options_with(8192, overflow_policy::block, log_level::trace));
  const auto beyond = static_cast<log_level>(9);
  for (const log_level level : {log_level::off, beyond}) {
    auto r = log.try_log(level, "formatted {}", 1);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), error_code::invalid_argument);
    auto t = log.try_log_text(level, "text");
    ASSERT_FALSE(t);
    EXPECT_EQ(t.error().code(), error_code::invalid_argument);
  }
  log.log(beyond, "counted, not returned");
  log.write(static_cast<log_types>(42), "an unknown seed type");
  log.write(log_types::None, "None is skipped, not refused");
  log.info("kept");
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->messages(), std::vector<std::string>{"kept"});
  const logger_statistics st = log.statistics();
  EXPECT_EQ(st.accepted, 1U);
  EXPECT_EQ(st.rejected, 6U);
}

TEST(Logger, RecordCarriesSourceLocationThreadAndTime) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, options_with(8192, overflow_policy::block));
  const auto before = std::chrono::system_clock::now();
  std::uint32_t producer_tid = 0;
  std::uint32_t expected_line = 0;
  std::thread t([&] {
    producer_tid = current_thread_id();
    expected_line = __LINE__ + 1;
    log.info("hello {} and {}", 7, std::string("world"));
  });
  t.join();
  const auto after = std::chrono::system_clock::now();
  ASSERT_TRUE(log.flush());
  const auto entries = sink->entries();
  ASSERT_EQ(entries.size(), 1U);
  const auto& e = entries[0];
  EXPECT_EQ(e.message, "hello 7 and world");
  EXPECT_EQ(e.source_line, expected_line);
  EXPECT_NE(e.file.find("logger_test.cpp"), std::string::npos);
  EXPECT_EQ(e.thread_id, producer_tid);
  EXPECT_NE(e.thread_id, current_thread_id());
  EXPECT_GE(e.time, before);
  EXPECT_LE(e.time, after);
  // 2025-01-02T13:45:01.123456Z [info] [tid] [logger_test.cpp:N] hello 7 and world
  const std::string& line = e.line;
  ASSERT_GE(line.size(), 28U);
  EXPECT_EQ(line[4], '-');
  EXPECT_EQ(line[10], 'T');
  EXPECT_EQ(line[19], '.');
  EXPECT_EQ(line[26], 'Z');
  const std::string tail =
      fmt::format(" [info] [{}] [logger_test.cpp:{}] hello 7 and world\n", producer_tid, expected_line);
  EXPECT_EQ(line.substr(27), tail);
}

TEST(Logger, TimestampIsFormattedAsUtc) {
  line_formatter f;
  log_record r;
  r.level = log_level::error;
  r.time = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000) + std::chrono::microseconds(42));
  r.thread_id = 7;
  r.message = "m";
  std::size_t b = 0;
  std::size_t e = 0;
  EXPECT_EQ(f.format(r, b, e), "2023-11-14T22:13:20.000042Z [error] [7] m\n");
  EXPECT_EQ(std::string_view("2023-11-14T22:13:20.000042Z [error] [7] m\n").substr(b, e - b), "error");
}

// Before the epoch a time prints the microsecond it falls in (floored), as
// after it (-500 ns printed 00:00:00.000000: the microseconds were
// truncated toward zero).
TEST(Logger, TimestampsBeforeTheEpochAreFloored) {
  line_formatter f;
  log_record r;
  r.level = log_level::info;
  r.thread_id = 1;
  r.message = "m";
  std::size_t b = 0;
  std::size_t e = 0;
  const auto at = [&](std::int64_t ns) {
    // floor: system_clock may count microseconds (libc++), and the time
    // must stay in the microsecond it falls in.
    r.time = std::chrono::system_clock::time_point(
        std::chrono::floor<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns)));
    return std::string(f.format(r, b, e).substr(0, 27));
  };
  EXPECT_EQ(at(-500), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(at(-1500), "1969-12-31T23:59:59.999998Z");
  EXPECT_EQ(at(-1'000'000'000), "1969-12-31T23:59:59.000000Z");
  EXPECT_EQ(at(-1'000'000'001), "1969-12-31T23:59:58.999999Z");
  EXPECT_EQ(at(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(at(1999), "1970-01-01T00:00:00.000001Z");
}

TEST(Logger, RuntimeFormatStringsAndLiteralBraces) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, options_with(8192, overflow_policy::block));
  log.info("{{literal}}");
  log.info(fmt::runtime("{} + {}"), 1, 2);
  auto bad = log.try_log(log_level::info, fmt::runtime("{} {}"), 1);  // too few arguments
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), error_code::invalid_argument);
  log.log_text(log_level::warn, "raw {text}");
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->messages(), (std::vector<std::string>{"{literal}", "1 + 2", "raw {text}"}));
  EXPECT_EQ(log.statistics().rejected, 1U);
}

TEST(Logger, LongMessagesWrapTheBufferAndAreTruncatedAboveTheLimit) {
  auto sink = std::make_shared<recording_sink>();
  logger_options o = options_with(2048, overflow_policy::block);
  o.max_message_bytes = 600;  // fits in half the buffer (1024 - 48 bytes)
  logger log({sink}, o);
  std::vector<std::string> sent;
  for (int i = 0; i < 40; ++i) {  // lengths 0..585: the 2 KiB buffer wraps many times
    std::string s(static_cast<std::size_t>(i * 15), static_cast<char>('a' + i % 26));
    s += std::to_string(i);
    sent.push_back(s);
    log.log_text(log_level::info, s);
  }
  log.log_text(log_level::info, std::string(1000, 'z'));
  ASSERT_TRUE(log.flush());
  const auto entries = sink->entries();
  ASSERT_EQ(entries.size(), 41U);
  for (std::size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(entries[i].message, sent[i]);
    EXPECT_FALSE(entries[i].truncated);
  }
  EXPECT_EQ(entries[40].message, std::string(600, 'z'));
  EXPECT_TRUE(entries[40].truncated);
  EXPECT_NE(entries[40].line.find(" [truncated]\n"), std::string::npos);
  EXPECT_EQ(log.statistics().truncated, 1U);
}

TEST(Logger, RefusesAfterStop) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, options_with(8192, overflow_policy::block));
  log.info("before");
  log.stop();
  log.stop();  // idempotent
  auto r = log.try_log(log_level::info, "after");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), error_code::pool_stopped);
  log.info("after too");
  EXPECT_TRUE(log.flush());  // nothing pending
  EXPECT_EQ(sink->messages(), std::vector<std::string>{"before"});
  const logger_statistics st = log.statistics();
  EXPECT_EQ(st.accepted, 1U);
  EXPECT_EQ(st.written, 1U);
  EXPECT_EQ(st.rejected, 2U);
}

class failing_sink final : public log_sink {
 public:
  result<void> write(const log_entry& e) override {
    if (e.record().message == "throw") throw std::runtime_error("sink exploded");
    return make_error(error_code::resource_exhausted, "disk full");
  }
  result<void> flush() override { return {}; }
};

TEST(Logger, SinkFailuresAreCountedAndReportedAndOtherSinksStillGetTheRecord) {
  auto bad = std::make_shared<failing_sink>();
  auto good = std::make_shared<recording_sink>();
  std::vector<std::string> reported;
  logger_options o = options_with(8192, overflow_policy::block);
  o.error_handler = [&](const error& e) { reported.push_back(e.to_string()); };
  logger log({bad, good}, o);
  log.info("one");
  log.info("throw");
  ASSERT_TRUE(log.flush());
  log.stop();
  EXPECT_EQ(good->messages(), (std::vector<std::string>{"one", "throw"}));
  EXPECT_EQ(log.statistics().sink_errors, 2U);
  ASSERT_EQ(reported.size(), 2U);
  EXPECT_NE(reported[0].find("disk full"), std::string::npos);
  EXPECT_NE(reported[1].find("sink exploded"), std::string::npos);
}

}  // namespace
}  // namespace thread_system
