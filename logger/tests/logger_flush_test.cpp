// The logger's flush(): what it waits for, flushes from many threads at
// once, the flush level, and flush() writing the records on the calling
// thread (logger_options::flush_on_caller): which threads call the sinks,
// one at a time, and what each flush then guarantees.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
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
using test::recording_sink;
using test::scaled;

TEST(LoggerFlush, FlushReturnsAfterEverythingBeforeItReachedTheSinks) {
  auto sink = std::make_shared<recording_sink>();
  logger_options o = options_with(32768, overflow_policy::block);
  o.flush_when_idle = false;
  logger log({sink}, o);
  const int rounds = static_cast<int>(scaled(2000));
  for (int i = 0; i < rounds; ++i) {
    log.info("r{}", i);
    const int flushes_before = sink->flushes();
    ASSERT_TRUE(log.flush());
    const auto messages = sink->messages();
    ASSERT_EQ(messages.size(), static_cast<std::size_t>(i) + 1);
    ASSERT_EQ(messages.back(), fmt::format("r{}", i));
    ASSERT_GT(sink->flushes(), flushes_before);
  }
}

TEST(LoggerFlush, ConcurrentFlushesFromManyThreads) {
  auto sink = std::make_shared<null_sink>();
  logger log({sink}, options_with(8192, overflow_policy::block));
  constexpr int threads_n = 4;
  const int per = static_cast<int>(scaled(2000));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::atomic<std::uint64_t> total{0};
  for (int t = 0; t < threads_n; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < per; ++i) {
        log.info("x {}", i);
        total.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
        if (i % 16 == 0) {
          const std::uint64_t mine_seen = total.load(std::memory_order_relaxed);
          (void)mine_seen;
          if (!log.flush()) failures.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(log.flush());
  EXPECT_EQ(sink->records(), static_cast<std::uint64_t>(threads_n) * static_cast<std::uint64_t>(per));
  EXPECT_EQ(failures.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
}

TEST(LoggerFlush, FlushLevelFlushesAfterSevereRecords) {
  auto sink = std::make_shared<recording_sink>();
  logger_options o = options_with(8192, overflow_policy::block);
  o.flush_when_idle = false;
  o.flush_level = log_level::error;
  logger log({sink}, o);
  log.error("boom");
  // No flush() call: the writer flushes after the error record by itself.
  for (int i = 0; i < 10000 && sink->flushes() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(sink->flushes(), 1);
}

// With flush_on_caller (the default), a flush() on a thread that is no
// logger's writer writes what is pending itself unless the writer thread is
// already writing it; whichever thread writes, the record is in the sink when
// flush() returns. The writer thread usually gets to a record later than the
// flush that follows it at once; the loop stops at the first record written
// on this thread (a time budget, not a count, bounds it).
TEST(LoggerFlush, OnCallerTheCallingThreadWritesThePendingRecords) {
  std::atomic<std::uint64_t> written{0};
  std::atomic<std::uint64_t> written_here{0};
  const std::thread::id me = std::this_thread::get_id();
  auto sink = std::make_shared<callback_sink>([&](const log_entry&) {
    // relaxed: test counters; flush() orders the sink's calls before its return.
    written.fetch_add(1, std::memory_order_relaxed);
    if (std::this_thread::get_id() == me) written_here.fetch_add(1, std::memory_order_relaxed);
  });
  logger log({sink}, options_with(1 << 16, overflow_policy::block));
  ASSERT_TRUE(log.options().flush_on_caller);  // the default
  test::round_budget budget(scaled(100'000), 1, std::chrono::seconds(10));
  std::size_t i = 0;
  for (; budget.next(i); ++i) {
    log.info("r{}", i);
    ASSERT_TRUE(log.flush());
    ASSERT_EQ(written.load(std::memory_order_relaxed), i + 1);  // relaxed: see the sink
    if (written_here.load(std::memory_order_relaxed) != 0) break;
  }
  EXPECT_GT(written_here.load(std::memory_order_relaxed), 0U) << "in " << i << " flushes";
}

// Without it, only the writer thread calls the sinks, and flush() waits.
TEST(LoggerFlush, WithoutFlushOnCallerOnlyTheWriterThreadCallsTheSinks) {
  std::atomic<std::uint64_t> written{0};
  std::atomic<std::uint64_t> written_here{0};
  std::mutex threads_mutex;
  std::set<std::thread::id> writing_threads;
  const std::thread::id me = std::this_thread::get_id();
  const auto note = [&] {
    if (std::this_thread::get_id() == me) written_here.fetch_add(1, std::memory_order_relaxed);  // as above
    const std::lock_guard lock(threads_mutex);
    writing_threads.insert(std::this_thread::get_id());
  };
  auto sink = std::make_shared<callback_sink>([&](const log_entry&) {
    note();
    written.fetch_add(1, std::memory_order_relaxed);  // as above
  });
  logger_options o = options_with(1 << 16, overflow_policy::block);
  o.flush_on_caller = false;
  logger log({sink}, o);
  const std::size_t rounds = scaled(2000);
  for (std::size_t i = 0; i < rounds; ++i) {
    log.info("r{}", i);
    ASSERT_TRUE(log.flush());
    ASSERT_EQ(written.load(std::memory_order_relaxed), i + 1);  // relaxed: see the sink
  }
  EXPECT_EQ(written_here.load(std::memory_order_relaxed), 0U);
  const std::lock_guard lock(threads_mutex);
  EXPECT_EQ(writing_threads.size(), 1U);
}

// Several threads log and flush at once while the writer thread drains: the
// sink is never called by two threads at once, each producer's records
// arrive once and in order, and a flush returns only after the records its
// thread logged before it were written. A sink that logs into the logger
// while a caller writes for it is refused as on the writer thread (it never
// waits for room: the buffer is tiny and the policy blocks).
TEST(LoggerFlush, ThreadsFlushingAtOnceCallTheSinkOneAtATimeInOrder) {
  constexpr int producers = 4;
  std::array<std::atomic<int>, producers> last_seen{};
  for (auto& l : last_seen) l.store(-1, std::memory_order_relaxed);  // before the threads start
  std::atomic<bool> inside{false};
  std::atomic<int> overlaps{0};
  std::atomic<int> written_by_producers{0};  // sink calls on a producer's thread (inside its flush())
  thread_local bool tl_producer = false;
  std::atomic<int> out_of_order{0};
  logger* self = nullptr;
  auto sink = std::make_shared<callback_sink>([&](const log_entry& e) {
    // acq_rel / release: the flag orders nothing else; the exchange only
    // detects two threads inside write() at once.
    if (inside.exchange(true, std::memory_order_acq_rel)) overlaps.fetch_add(1, std::memory_order_relaxed);
    if (tl_producer) written_by_producers.fetch_add(1, std::memory_order_relaxed);  // a test counter
    int producer = 0;
    int sequence = 0;
    if (std::sscanf(std::string(e.record().message).c_str(), "p%d s%d", &producer, &sequence) == 2) {
      auto& last = last_seen[static_cast<std::size_t>(producer)];
      // relaxed load (sink calls are ordered by the logger); release store:
      // pairs with the producers' acquire load after their flush().
      if (last.load(std::memory_order_relaxed) + 1 != sequence) out_of_order.fetch_add(1, std::memory_order_relaxed);
      last.store(sequence, std::memory_order_release);
      if (sequence % 64 == 0) self->info("from the sink");  // refused or accepted, never waits
    }
    inside.store(false, std::memory_order_release);
  });
  logger log({sink}, options_with(4096, overflow_policy::block));
  self = &log;
  std::atomic<int> late{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      tl_producer = true;
      test::round_budget budget(scaled(20'000), 500, std::chrono::seconds(5));
      for (std::size_t i = 0; budget.next(i); ++i) {
        const int s = static_cast<int>(i);
        if (!log.try_log(log_level::info, "p{} s{}", p, s))
          failed.fetch_add(1, std::memory_order_relaxed);  // test counter
        if (i % 8 != 0) continue;
        if (!log.flush()) failed.fetch_add(1, std::memory_order_relaxed);  // test counter
        // acquire: pairs with the sink's release store.
        if (last_seen[static_cast<std::size_t>(p)].load(std::memory_order_acquire) < s) {
          late.fetch_add(1, std::memory_order_relaxed);  // test counter
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(log.flush());
  log.stop();
  EXPECT_EQ(overlaps.load(std::memory_order_relaxed), 0);
  EXPECT_EQ(out_of_order.load(std::memory_order_relaxed), 0);
  EXPECT_EQ(late.load(std::memory_order_relaxed), 0);
  EXPECT_EQ(failed.load(std::memory_order_relaxed), 0);
  // Hundreds of flushes: some found the role free (the caller path ran).
  EXPECT_GT(written_by_producers.load(std::memory_order_relaxed), 0);
  const logger_statistics s = log.statistics();
  EXPECT_EQ(s.written, s.accepted);
}

// A producer keeps the writer thread in full batches, round after round
// (it takes the role back right after each). A flush() that does not get
// the role within its spin waits for the writer thread, which serves it in
// its next round: it returns while the flood goes on. (A caller used to
// sleep in the role's lock() instead, where it never looks at its ticket:
// woken by each unlock, it could lose the race to the writer thread's next
// try_lock every time and sleep on until the flood ended. Found by review;
// on this machine the woken thread usually won the race while the writer
// was still in the wake-up system call, so this test did not catch it.)
// The flood stops when the flushes are done or after 20 s; the test fails
// if the flushes took that long.
TEST(LoggerFlush, AFlushIsNotStarvedByAWriterThatIsNeverIdle) {
  // A slow sink (~0.5 us a record): a round of the writer thread over a
  // full batch outlasts the flusher's spin for the role.
  auto sink = std::make_shared<callback_sink>([](const log_entry&) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(500);
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  // drop: the producer never sleeps, so every batch is full.
  logger log({sink}, options_with(1 << 20, overflow_policy::drop));
  std::atomic<bool> done{false};
  std::atomic<bool> flooding{false};
  std::thread producer([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    // acquire: pairs with the release store below (nothing else is read).
    for (int i = 0; !done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until; ++i) {
      log.info("flood {}", i);
      if (i == 10'000) flooding.store(true, std::memory_order_release);  // pairs with the acquire below
    }
  });
  while (!flooding.load(std::memory_order_acquire)) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(log.flush());
  const auto took = std::chrono::steady_clock::now() - t0;
  done.store(true, std::memory_order_release);
  producer.join();
  // Each flush waits for at most what the producer queued before it (1 MiB,
  // about 4000 records, 2 ms of the sink): 50 flushes, well under a second.
  // 15 s means the flushes waited for the flood's end.
  EXPECT_LT(took, std::chrono::seconds(15));
}

// stop() on one thread while another logs and flushes (and so may hold the
// writer's role): nothing hangs, every flush succeeds (after the stop at
// once), and the stopped logger's statistics are final: accepted ==
// written. A time budget bounds the logging thread's rounds.
TEST(LoggerFlush, StopWhileAnotherThreadFlushes) {
  for (int round = 0; round < 20; ++round) {
    auto sink = std::make_shared<null_sink>();
    logger log({sink}, options_with(8192, overflow_policy::block));
    std::atomic<bool> started{false};
    std::atomic<int> failed_flushes{0};
    std::thread t([&] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
        const result<void> logged = log.try_log(log_level::info, "r{}", i);
        if (!log.flush()) failed_flushes.fetch_add(1, std::memory_order_relaxed);  // a test counter
        started.store(true, std::memory_order_release);                            // pairs with the acquire below
        if (!logged && logged.error().code() == error_code::pool_stopped) break;   // the stop has begun
      }
    });
    while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(50 * round));
    log.stop();
    t.join();
    EXPECT_EQ(failed_flushes.load(std::memory_order_relaxed), 0) << "round " << round;
    const logger_statistics s = log.statistics();
    EXPECT_EQ(s.written, s.accepted) << "round " << round;
    EXPECT_EQ(sink->records(), s.written) << "round " << round;
  }
}

}  // namespace
}  // namespace thread_system
