// The logger's deferred formatting, thread buffers and timestamps: every
// argument type the caller encodes gives the text {fmt} gives at the call;
// strings are copied at the call; a failing formatter on the writer thread
// is reported; call sites in a header used by several translation units;
// buffers of exited threads and destroyed loggers; the cheap clock against
// system_clock; records of several threads merged by timestamp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "log_call_in_header.hpp"
#include "logger_test_sinks.hpp"
#include "support/test_support.hpp"
#include "thread_system/logger/logger.hpp"
#include "thread_system/logger/sinks.hpp"

#include <fmt/ranges.h>

namespace thread_system {

enum plain_colour { red_colour = 1, green_colour = 2 };
enum class scoped_size : std::uint8_t { small = 3, large = 200 };

// A value type that opts in to being copied and formatted on the writer
// thread; its formatter records the thread it ran on and can be told to throw.
struct point {
  int x;
  int y;
  bool fail;
};
template <>
struct log_by_value<point> : std::true_type {};

// Opts in too, and has no default constructor (decoding must not need one).
struct money {
  explicit money(long long c) : cents(c) {}
  long long cents;
};
template <>
struct log_by_value<money> : std::true_type {};

// Not deferrable (no opt-in): formatted on the caller's thread. Its
// formatter throws a non-standard exception when asked to.
struct opaque {
  bool throw_int;
};

namespace {
std::atomic<std::thread::id> point_formatted_on{};
}  // namespace

}  // namespace thread_system

// fmt 9 deprecates formatting an enum without a formatter: both have one.
template <>
struct fmt::formatter<thread_system::plain_colour> : fmt::formatter<int> {
  template <typename Context>
  auto format(thread_system::plain_colour c, Context& ctx) const {
    return fmt::formatter<int>::format(static_cast<int>(c), ctx);
  }
};

template <>
struct fmt::formatter<thread_system::scoped_size> : fmt::formatter<int> {
  template <typename Context>
  auto format(thread_system::scoped_size s, Context& ctx) const {
    return fmt::formatter<int>::format(static_cast<int>(s) * 10, ctx);
  }
};

template <>
struct fmt::formatter<thread_system::money> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <typename Context>
  auto format(const thread_system::money& m, Context& ctx) const {
    return fmt::format_to(ctx.out(), "${}.{:02}", m.cents / 100, m.cents % 100);
  }
};

template <>
struct fmt::formatter<thread_system::opaque> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <typename Context>
  auto format(const thread_system::opaque& o, Context& ctx) const {
    if (o.throw_int) throw 42;  // NOLINT(hicpp-exception-baseclass): the case under test
    return fmt::format_to(ctx.out(), "opaque");
  }
};

template <>
struct fmt::formatter<thread_system::point> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <typename Context>
  auto format(const thread_system::point& p, Context& ctx) const {
    // relaxed: read by the test after flush(), which orders it.
    thread_system::point_formatted_on.store(std::this_thread::get_id(), std::memory_order_relaxed);
    if (p.fail) throw fmt::format_error("point refused");
    return fmt::format_to(ctx.out(), "({}, {})", p.x, p.y);
  }
};

// Declared in logger_header_tu_test.cpp: the same header call site, compiled there.
void log_from_second_translation_unit(thread_system::logger& log, int value);

namespace thread_system {
namespace {

using test::gated_sink;
using test::recording_sink;

logger_options small_options() {
  logger_options o;
  o.thread_buffer_bytes = 64 * 1024;
  o.level = log_level::trace;
  return o;
}

// Logs `format` with `args` and expects exactly the text fmt::format gives.
template <typename... Args>
void expect_same_text(logger& log, recording_sink& sink, log_format<Args...> format, Args&&... args) {
  const fmt::string_view text = format.format;
  const std::string expected = fmt::vformat(text, fmt::make_format_args(args...));
  const std::size_t before = sink.entries().size();
  ASSERT_TRUE(log.try_log(log_level::info, format, std::forward<Args>(args)...));
  ASSERT_TRUE(log.flush());
  const auto entries = sink.entries();
  ASSERT_EQ(entries.size(), before + 1);
  EXPECT_EQ(entries.back().message, expected);
}

TEST(LoggerDeferred, EveryEncodedTypeFormatsAsAtTheCall) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  const std::int8_t i8 = -8;
  const std::uint8_t u8 = 250;
  const short s16 = -1234;
  const unsigned short u16 = 65000;
  const long long i64 = -9'000'000'000'000LL;
  const unsigned long long u64 = 18'000'000'000'000'000'000ULL;
  expect_same_text(log, *sink, "{} {} {} {} {} {}", i8, u8, s16, u16, i64, u64);
  expect_same_text(log, *sink, "{:x} {:#o} {:+d} {:>6}|", 255, 8U, 42L, -7);
  expect_same_text(log, *sink, "{} {} {:.3f} {:e} {}", 1.5F, 2.25, 3.14159, 1e-9, 1e300);
  expect_same_text(log, *sink, "{} {} {:d}", true, false, true);
  expect_same_text(log, *sink, "{} {:d} {:?}", 'x', 'A', '\n');
  expect_same_text(log, *sink, "{} {}", red_colour, green_colour);
  expect_same_text(log, *sink, "{} {:>5}", scoped_size::small, scoped_size::large);
  int target = 0;
  const void* pointer = &target;
  expect_same_text(log, *sink, "{} {} {}", pointer, static_cast<void*>(&target), nullptr);
  const std::string owned = "owned string";
  const std::string_view view = "a view";
  const char* c_string = "c string";
  char mutable_chars[] = "mutable chars";
  expect_same_text(log, *sink, "{} | {} | {} | {} | {}", owned, view, c_string, static_cast<char*>(mutable_chars),
                   "literal");
  expect_same_text(log, *sink, "[{:>10}] [{:<8.3}] [{:^9}]", std::string("pad"), std::string_view("truncate"), "mid");
  expect_same_text(log, *sink, "no arguments {{escaped}}");
  expect_same_text(log, *sink, "{} {}", point{1, 2, false}, 7);
  expect_same_text(log, *sink, "{} and {}", money{12345}, opaque{false});  // deferred / formatted at the call
  // Formatted as a pointer, a C string must show the caller's address, not
  // that of a copy (such calls are formatted at the call).
  expect_same_text(log, *sink, "{:p} {:p}", c_string, static_cast<const void*>(c_string));
  // Arrays of other character types are not strings to {fmt} (ranges).
  const unsigned char bytes[3] = {65, 66, 67};
  const signed char signed_bytes[2] = {-1, 1};
  expect_same_text(log, *sink, "{} {}", bytes, signed_bytes);
  EXPECT_EQ(log.statistics().format_errors, 0U);
}

TEST(LoggerDeferred, ArgumentsAreFormattedOnTheWriterThread) {
  auto sink = std::make_shared<recording_sink>();
  logger_options o = small_options();
  o.flush_on_caller = false;  // else flush() below may write (and format) the record on this thread
  logger log({sink}, o);
  log.info("at {}", point{3, 4, false});
  ASSERT_TRUE(log.flush());
  const auto entries = sink->entries();
  ASSERT_EQ(entries.size(), 1U);
  EXPECT_EQ(entries[0].message, "at (3, 4)");
  // relaxed: flush() ordered the writer's store before this load.
  EXPECT_EQ(point_formatted_on.load(std::memory_order_relaxed), entries[0].written_on);
  EXPECT_NE(entries[0].written_on, std::this_thread::get_id());
}

TEST(LoggerDeferred, StringsAreCopiedAtTheCall) {
  auto sink = std::make_shared<gated_sink>();
  logger log({sink}, small_options());
  log.info("first");
  sink->wait_until_blocked();  // the writer cannot read anything until open()
  std::string owned = "before";
  char chars[] = "before";
  {
    const std::string temporary = "temporary";
    log.info("{} {} {} {}", owned, std::string_view(owned), static_cast<const char*>(chars), temporary);
  }  // `temporary` is gone before the writer formats
  owned = "AFTER!";
  chars[0] = 'X';
  sink->open();
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->recorder().messages(), (std::vector<std::string>{"first", "before before before temporary"}));
}

TEST(LoggerDeferred, CharArraysStopAtTheirFirstNulOrTheirEnd) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  const char with_nul[8] = {'a', 'b', '\0', 'z', 'z', 'z', 'z', 'z'};
  log.info("[{}]", with_nul);
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->messages(), (std::vector<std::string>{"[ab]"}));
}

// The same when the call is formatted on the caller's thread (a dynamic
// width keeps it there): the array is read up to its end, not past it as a
// C string ({fmt} strlen()ed it: "[abcdOVERRUN]" here, a heap overflow
// under ASan for an array with no NUL).
TEST(LoggerDeferred, CharArraysStopAtTheirEndWhenFormattedOnTheCaller) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  struct {
    char tag[4];
    char next[8];
  } s = {{'a', 'b', 'c', 'd'}, {'O', 'V', 'E', 'R', 'R', 'U', 'N', '\0'}};
  log.info("[{}] {:>{}}", s.tag, 1, 2);
  auto heap = std::make_unique<char[]>(4);
  std::memcpy(heap.get(), "wxyz", 4);  // no NUL anywhere in the array
  const char(&no_nul)[4] = *reinterpret_cast<const char(*)[4]>(heap.get());
  log.info("[{}] {:>{}}", no_nul, 1, 2);
  const char with_nul[8] = {'a', 'b', '\0', 'z', 'z', 'z', 'z', 'z'};
  log.info("[{}] {:>{}}", with_nul, 1, 2);
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->messages(), (std::vector<std::string>{"[abcd]  1", "[wxyz]  1", "[ab]  1"}));
  EXPECT_EQ(s.next[0], 'O');  // (keeps `next` in use)
}

// A char array with the `p` presentation prints its address, as {fmt} does
// (such a call is formatted on the caller's thread, where the array was
// handed to {fmt} as a string_view, which refuses `p`: the call compiled and
// was refused at run time); string specs still print its characters.
TEST(LoggerDeferred, ACharArrayWithThePointerPresentationPrintsItsAddress) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  char arr[8] = "abc";
  ASSERT_TRUE(log.try_log(log_level::info, "{:p}", arr));
  ASSERT_TRUE(log.try_log(log_level::info, "{:>18p}|{:>5}|{:.2}", arr, arr, arr));
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->messages(),
            (std::vector<std::string>{fmt::format("{:p}", arr), fmt::format("{:>18p}|{:>5}|{:.2}", arr, arr, arr)}));
  EXPECT_EQ(log.statistics().rejected, 0U);
}

TEST(LoggerDeferred, ANonStandardExceptionFromAFormatterAtTheCallIsRefused) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  auto r = log.try_log(log_level::info, "{}", opaque{true});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), error_code::invalid_argument);
  EXPECT_EQ(log.statistics().rejected, 1U);
}

TEST(LoggerDeferred, ANullCStringIsRefusedLikeAnyFormattingFailure) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  const char* null_string = nullptr;
  auto r = log.try_log(log_level::info, "[{}]", null_string);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), error_code::invalid_argument);
  EXPECT_EQ(log.statistics().rejected, 1U);
}

TEST(LoggerDeferred, AFormatterThatThrowsOnTheWriterIsReportedInTheRecord) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  ASSERT_TRUE(log.try_log(log_level::info, "bad {}", point{0, 0, true}));  // accepted: formatted later
  log.info("good {}", 1);
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->messages(), (std::vector<std::string>{"<format error: point refused>", "good 1"}));
  const logger_statistics s = log.statistics();
  EXPECT_EQ(s.format_errors, 1U);
  EXPECT_EQ(s.written, 2U);
  EXPECT_EQ(s.accepted, 2U);
}

TEST(LoggerDeferred, LongStringArgumentsAreCutToMaxMessageBytes) {
  auto sink = std::make_shared<recording_sink>();
  logger_options o = small_options();
  o.max_message_bytes = 1000;
  logger log({sink}, o);
  const std::string fits(900, 'f');
  const std::string long_text(5000, 'l');        // encoded: fits in half the 64 KiB buffer
  const std::string huge_text(100 * 1024, 'h');  // encoded: does not; formatted at the call
  log.info("{}", fits);
  log.info(">{}", long_text);
  log.info("<{}", huge_text);
  ASSERT_TRUE(log.flush());
  const auto entries = sink->entries();
  ASSERT_EQ(entries.size(), 3U);
  EXPECT_EQ(entries[0].message, fits);
  EXPECT_FALSE(entries[0].truncated);
  EXPECT_EQ(entries[1].message, ">" + std::string(999, 'l'));
  EXPECT_TRUE(entries[1].truncated);
  EXPECT_EQ(entries[2].message, "<" + std::string(999, 'h'));
  EXPECT_TRUE(entries[2].truncated);
  EXPECT_EQ(log.statistics().truncated, 2U);
}

TEST(LoggerDeferred, Utf8TextPassesThroughByteForByte) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  const std::string japanese = "日本語のテキスト";
  const std::string_view emoji = "\xF0\x9F\x98\x80 \xE2\x9C\x93";
  expect_same_text(log, *sink, "héllo {} — {} [{:>3}] [{:<4}]", japanese, emoji, "ü", std::string("κό"));
  log.log_text(log_level::info, "Grüße, κόσμε");
  ASSERT_TRUE(log.flush());
  const auto messages = sink->messages();
  ASSERT_EQ(messages.size(), 2U);
  EXPECT_EQ(messages[0].substr(0, 44), "héllo 日本語のテキスト — \xF0\x9F\x98\x80 \xE2\x9C\x93");
  EXPECT_EQ(messages[1], "Grüße, κόσμε");
}

TEST(LoggerDeferred, ACallSiteInAHeaderWorksFromSeveralTranslationUnits) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  test::log_from_header(log, 1);
  log_from_second_translation_unit(log, 2);
  test::log_from_header(log, 3);
  ASSERT_TRUE(log.flush());
  const auto entries = sink->entries();
  ASSERT_EQ(entries.size(), 3U);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].message, fmt::format("from the header: {} ({})", i + 1, "text"));
    EXPECT_NE(entries[i].file.find("log_call_in_header.hpp"), std::string::npos) << entries[i].file;
    EXPECT_EQ(entries[i].source_line, entries[0].source_line);
  }
}

TEST(LoggerDeferred, TimestampsMatchTheSystemClock) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  // The cheap clock is converted on the writer; the conversion must agree
  // with system_clock read around the call (1 ms allows for a calibration
  // error of 1000 ppm over the test's second; the real error is far smaller).
  constexpr auto tolerance = std::chrono::milliseconds(1);
  std::vector<std::pair<std::chrono::system_clock::time_point, std::chrono::system_clock::time_point>> windows;
  for (int i = 0; i < 4; ++i) {
    const auto before = std::chrono::system_clock::now();
    log.info("stamp {}", i);
    const auto after = std::chrono::system_clock::now();
    windows.emplace_back(before, after);
    // Across the 50 ms re-base of the conversion.
    std::this_thread::sleep_for(std::chrono::milliseconds(i == 1 ? 120 : 5));
  }
  ASSERT_TRUE(log.flush());
  const auto entries = sink->entries();
  ASSERT_EQ(entries.size(), windows.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    EXPECT_GE(entries[i].time, windows[i].first - tolerance) << i;
    EXPECT_LE(entries[i].time, windows[i].second + tolerance) << i;
    if (i > 0) {
      EXPECT_LT(entries[i - 1].time, entries[i].time);
    }
  }
}

TEST(LoggerDeferred, RecordsOfSeveralThreadsAreMergedByTimestamp) {
  auto sink = std::make_shared<gated_sink>();
  logger log({sink}, small_options());
  log.info("first");
  sink->wait_until_blocked();  // everything below is visible to the writer at once
  // Four threads log one after another (each starts after the previous one
  // has logged), each in its own buffer.
  for (int t = 0; t < 4; ++t) {
    std::thread([&log, t] { log.info("thread {}", t); }).join();
  }
  log.info("main");
  sink->open();
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->recorder().messages(),
            (std::vector<std::string>{"first", "thread 0", "thread 1", "thread 2", "thread 3", "main"}));
}

TEST(LoggerDeferred, BuffersOfExitedThreadsAreReleased) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back([&log, t] { log.info("short-lived {}", t); });
  for (auto& t : threads) t.join();
  log.info("main");
  // The writer lets a buffer go once its thread has exited and it is
  // drained; it looks when it runs out of work. Keep it busy until it has.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (log.statistics().thread_buffers > 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "buffers of exited threads were never released";
    ASSERT_TRUE(log.flush());
    std::this_thread::yield();
  }
  ASSERT_TRUE(log.flush());  // "main" (the loop may not have flushed at all)
  const logger_statistics s = log.statistics();
  EXPECT_EQ(s.thread_buffers, 1U);  // main's
  EXPECT_EQ(s.accepted, 9U);        // counts of released buffers are kept
  EXPECT_EQ(sink->entries().size(), 9U);
}

TEST(LoggerDeferred, AThreadOutlivesLoggersAndMovesBetweenThem) {
  auto sink = std::make_shared<recording_sink>();
  std::thread worker([&] {
    for (int round = 0; round < 3; ++round) {
      logger a({sink}, small_options());
      logger b({sink}, small_options());
      for (int i = 0; i < 3; ++i) {  // alternate: the one-entry cache misses every time
        a.info("a{} {}", round, i);
        b.info("b{} {}", round, i);
      }
      ASSERT_TRUE(a.flush());
      ASSERT_TRUE(b.flush());
    }  // both destroyed while this thread still holds their buffers
    logger c({sink}, small_options());
    c.info("after");
  });
  worker.join();
  EXPECT_EQ(sink->entries().size(), 3U * 6U + 1U);  // 3 rounds of 3 + 3 calls, then one
}

// Logs from a thread_local destructor that runs after the thread's log
// buffers were released (it was constructed before the first log call, so
// it is destroyed after the registry that owns them). At exit, static
// objects' destructors on the main thread are in the same position.
struct logs_at_thread_exit {
  logger* log = nullptr;
  result<void>* deferred = nullptr;
  result<void>* formatted_here = nullptr;
  ~logs_at_thread_exit() {
    if (log == nullptr) return;
    *deferred = log->try_log(log_level::info, "from a thread_local destructor: {}", 1);
    // Formatted on this thread (no opt-in): must not touch destroyed thread_locals.
    *formatted_here = log->try_log(log_level::info, "and {} {}", opaque{false}, std::string(600, 'x').size());
  }
};

TEST(LoggerDeferred, ACallFromALateThreadLocalDestructorIsStillWritten) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  result<void> deferred = make_error(error_code::not_found, "not run");
  result<void> formatted_here = make_error(error_code::not_found, "not run");
  std::thread([&] {
    thread_local logs_at_thread_exit late;
    late.log = &log;
    late.deferred = &deferred;
    late.formatted_here = &formatted_here;
    log.info("during the thread");
  }).join();
  EXPECT_TRUE(deferred);
  EXPECT_TRUE(formatted_here);
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->messages(),
            (std::vector<std::string>{"during the thread", "from a thread_local destructor: 1", "and opaque 600"}));
  EXPECT_EQ(log.statistics().rejected, 0U);
  EXPECT_EQ(log.statistics().accepted, 3U);
}

// Many late calls (a static object dumping a table at exit): each gets a
// small buffer of its own, at most a bounded number alive at once.
struct logs_many_at_thread_exit {
  logger* log = nullptr;
  int calls = 0;
  int* accepted = nullptr;
  ~logs_many_at_thread_exit() {
    for (int i = 0; i < calls; ++i) {
      if (log->try_log(log_level::info, "late {}", i)) ++*accepted;
    }
  }
};

TEST(LoggerDeferred, ManyLateCallsAreAllWrittenInOrder) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  const int calls = static_cast<int>(test::scaled(3000));
  int accepted = 0;
  std::thread([&] {
    thread_local logs_many_at_thread_exit late;
    late.log = &log;
    late.calls = calls;
    late.accepted = &accepted;
    log.info("first");
  }).join();
  EXPECT_EQ(accepted, calls);
  ASSERT_TRUE(log.flush());
  const auto messages = sink->messages();
  ASSERT_EQ(messages.size(), static_cast<std::size_t>(calls) + 1);
  for (int i = 0; i < calls; ++i) EXPECT_EQ(messages[static_cast<std::size_t>(i) + 1], fmt::format("late {}", i));
  EXPECT_EQ(log.statistics().accepted, static_cast<std::uint64_t>(calls) + 1);
}

TEST(LoggerDeferred, TruncationIsCountedOnlyForAcceptedRecords) {
  auto sink = std::make_shared<gated_sink>();
  logger_options o = small_options();
  o.thread_buffer_bytes = 1024;  // messages cut to 512 - 48 bytes
  o.overflow = overflow_policy::drop;
  logger log({sink}, o);
  log.info("first");
  sink->wait_until_blocked();
  int accepted = 0;
  for (int i = 0; i < 20; ++i) {
    if (log.try_log_text(log_level::info, std::string(1000, 'y'))) ++accepted;
  }
  const logger_statistics s = log.statistics();
  ASSERT_GT(accepted, 0);
  ASSERT_LT(accepted, 20);
  EXPECT_EQ(s.truncated, static_cast<std::uint64_t>(accepted));
  EXPECT_EQ(s.dropped, static_cast<std::uint64_t>(20 - accepted));
  sink->open();
}

TEST(LoggerDeferred, AWriterThatFallsBehindLosesNothing) {
  // A slow sink: every record costs the writer a sleep, so the producers'
  // 4 KiB buffers fill and they block (block policy) many times.
  std::atomic<int> written{0};
  std::vector<std::vector<int>> seen(4);
  std::mutex seen_mutex;
  auto sink = std::make_shared<callback_sink>([&](const log_entry& e) {
    int p = 0;
    int s = 0;
    if (std::sscanf(std::string(e.record().message).c_str(), "p%d s%d", &p, &s) == 2) {
      std::lock_guard lock(seen_mutex);
      seen[static_cast<std::size_t>(p)].push_back(s);
    }
    if (written.fetch_add(1, std::memory_order_relaxed) % 64 == 0) {  // test bookkeeping
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  logger_options o;
  o.thread_buffer_bytes = 4096;
  o.overflow = overflow_policy::block;
  const int per_producer = static_cast<int>(test::scaled(3000));
  {
    logger log({sink}, o);
    std::vector<std::thread> producers;
    for (int p = 0; p < 4; ++p) {
      producers.emplace_back([&, p] {
        for (int s = 0; s < per_producer; ++s) ASSERT_TRUE(log.try_log(log_level::info, "p{} s{} {}", p, s, "pad"));
      });
    }
    for (auto& t : producers) t.join();
    log.stop();
    const logger_statistics st = log.statistics();
    EXPECT_EQ(st.accepted, 4U * static_cast<std::uint64_t>(per_producer));
    EXPECT_EQ(st.written, st.accepted);
    EXPECT_GT(st.blocked, 0U);
  }
  for (const auto& one : seen) {
    ASSERT_EQ(one.size(), static_cast<std::size_t>(per_producer));
    for (int s = 0; s < per_producer; ++s) ASSERT_EQ(one[static_cast<std::size_t>(s)], s);
  }
}

// The writer parses each format string once (detail::format_cache): the
// text is the same as fmt's for every spec, on the first record of a call
// site (parsed) and on later ones (cached), and with fields the cache does
// not cover (positional) it falls back to fmt::vformat_to.
TEST(LoggerDeferred, ParsedFormatStringsGiveFmtsTextFirstAndLaterTime) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  for (int round = 0; round < 3; ++round) {
    const int i = 40 + round;
    expect_same_text(log, *sink, "user {} logged in from {} on attempt {} in {:.2f} ms", i, std::string("10.0.0.1"), 3,
                     0.25 * i);
    expect_same_text(log, *sink, "{{{}}} }}{{ {{}} [{:*^9}] [{:+08.3f}] [{:#x}] [{:<5}]", i, "mid", -2.5, 255U, true);
    expect_same_text(log, *sink, "{:>4}{:c}{:d}{}", 'a', 66, 'C', 'd');
    expect_same_text(log, *sink, "{} {} {} {} {}", 7L, 8UL, 9LL, 10ULL, -1.5L);
    expect_same_text(log, *sink, "{:e} {:g} {:a} {:E} ", 1e-9, 2.5F, 1.0, 0.5);
    expect_same_text(log, *sink, "{:.3} [{:10.4}] {}", std::string_view("truncate"), "cstring", "");
    expect_same_text(log, *sink, "{1} {0} {1}", 1, "positional");  // not covered: fmt::vformat_to
    expect_same_text(log, *sink, "{:s} {:d} {}", true, false, false);
    expect_same_text(log, *sink, "only the first {} of two", 1, 2);
    expect_same_text(log, *sink, "{}", std::numeric_limits<double>::quiet_NaN());
    // A '}' fill before a dynamic width or precision (a nested field, which
    // the writer cannot format without the argument list), and a '}' fill
    // with a static width.
    expect_same_text(log, *sink, "[{:}>{}}]", 42, 6);
    expect_same_text(log, *sink, "{:}^.{}}", 3.14159, 3);
    expect_same_text(log, *sink, "[{:}>8}] [{:\xC3\xA9<5}]", std::string_view("str"), 7);
  }
  EXPECT_EQ(log.statistics().format_errors, 0U);
}

// A fill is read as {fmt} reads it (any code point before '<', '>' or '^',
// '}' included), so a nested field or a `p` presentation after such a fill
// keeps the call on the caller's thread.
static_assert(!detail::format_is_deferrable("[{:}>{}}]"));
static_assert(!detail::format_is_deferrable("{:}^.{}}"));
static_assert(!detail::format_is_deferrable("{:}<20p}"));
static_assert(!detail::format_is_deferrable("{:\xC3}>{}}"));
static_assert(detail::format_is_deferrable("[{:}>8}] {:p<3} {:%H:%M}"));
static_assert(!detail::format_is_deferrable("{:{}}"));

TEST(LoggerDeferred, APointerPresentationAfterABraceFillShowsTheCallersAddress) {
  auto sink = std::make_shared<recording_sink>();
  logger log({sink}, small_options());
  const char* c_string = "c string";
  expect_same_text(log, *sink, "[{:}<20p}]", c_string);
}

// White-box: the cache is keyed by the format's text and the argument
// types, not by the text's address alone. The same address seen with other
// argument types (identical literals are merged by the linker) or holding
// other text (a format string in a library unloaded and another loaded at
// the same address) is parsed again; many call sites on few slots evict
// each other and still format right.
namespace {
template <typename... A>
std::string format_deferred(detail::format_cache& cache, fmt::string_view format, const A&... args) {
  std::vector<std::byte> bytes(4096);
  std::byte* out = bytes.data();
  ((out = detail::encode_arg(out, detail::encode_view(args))), ...);
  fmt::memory_buffer buffer;
  detail::format_encoded<detail::log_stored_t<const A&>...>(cache, buffer, format, bytes.data());
  return {buffer.data(), buffer.size()};
}
}  // namespace

TEST(LoggerFormatCache, KeyedByTextAndArgumentTypesNotByAddress) {
  detail::format_cache cache;
  char format[] = "a{}b{:>4}c";
  const fmt::string_view view(format, sizeof format - 1);
  EXPECT_EQ(format_deferred(cache, view, 1, 2), "a1b   2c");
  EXPECT_EQ(format_deferred(cache, view, 1, 2), "a1b   2c");                     // cached
  EXPECT_EQ(format_deferred(cache, view, 1.5, std::string("x")), "a1.5b   xc");  // same address, other types
  EXPECT_EQ(format_deferred(cache, view, 3, 4), "a3b   4c");
  std::memcpy(format, "x{}y{:<4}z", sizeof format);  // same address and length, other text
  EXPECT_EQ(format_deferred(cache, view, 3, 4), "x3y4   z");
  std::memcpy(format, "x{0}{0:<4}", sizeof format);  // now a positional format: not covered
  EXPECT_EQ(format_deferred(cache, view, 5, 6), "x55   ");

  // Many call sites, more than the cache has slots: each formats right on
  // every round, evicted or not.
  std::vector<std::string> formats;
  for (int k = 0; k < 300; ++k) formats.push_back(fmt::format("site {} {{}} {{:0{}}}", k, 1 + k % 9));
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 300; ++k) {
      const std::string& f = formats[static_cast<std::size_t>(k)];
      ASSERT_EQ(format_deferred(cache, f, round, k), fmt::format(fmt::runtime(f), round, k)) << f;
    }
  }
}
}  // namespace
}  // namespace thread_system
