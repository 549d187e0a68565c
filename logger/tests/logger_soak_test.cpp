// A soak of the logger under everything at once: short-lived producer
// threads (each gets a thread buffer and leaves it to be reaped), deferred,
// text and caller-formatted calls of varying lengths (some cut at
// max_message_bytes), a buffer small enough to fill, concurrent flush()es, a
// sink that fails every few records (by an error result, by throwing), and
// stop() while producers are still logging.
//
// What must hold:
//   * every accepted call reaches the recording sink exactly once, and each
//     thread's records arrive in the order of its calls;
//   * every refusal is visible and counted: `queue_full` calls are
//     `dropped`, and the "N messages dropped" notices add up to exactly that;
//     `pool_stopped` calls are `rejected`;
//   * accepted == written; each sink failure is counted in `sink_errors`
//     and reaches the error handler once; truncated records are counted;
//   * flush() succeeds until stop() begins, then returns `pool_stopped`.
// A fixed time budget; the per-test watchdog turns a hang into a failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/test_support.hpp"
#include "thread_system/logger/logger.hpp"
#include "thread_system/logger/sinks.hpp"

namespace thread_system {
namespace {

constexpr int max_threads = 16384;
constexpr int calls_per_thread = 400;

// "t<thread> s<sequence> ..." -> the two numbers.
bool parse_tag(std::string_view message, int& thread, int& sequence) {
  return std::sscanf(std::string(message.substr(0, 40)).c_str(), "t%d s%d", &thread, &sequence) == 2;
}

// Written by the writer thread only (sinks run there); read after stop().
struct soak_record {
  std::vector<std::vector<std::uint8_t>> seen =
      std::vector<std::vector<std::uint8_t>>(max_threads, std::vector<std::uint8_t>(calls_per_thread, 0));
  std::vector<int> last = std::vector<int>(max_threads, -1);
  std::uint64_t out_of_order = 0;
  std::uint64_t drop_notices_total = 0;
  std::uint64_t truncated_seen = 0;
  std::uint64_t untagged = 0;
};

// A sink that fails every seventh write: by an error result, or by throwing.
class failing_sink final : public log_sink {
 public:
  result<void> write(const log_entry&) override {
    const std::uint64_t n = ++writes_;
    if (n % 7 != 0) return {};
    ++failures_;
    if (n % 14 == 0) throw std::runtime_error("soak: a sink that throws");
    return make_error(error_code::job_failed, "soak: a sink that fails");
  }
  result<void> flush() override { return {}; }
  [[nodiscard]] std::uint64_t failures() const noexcept { return failures_; }

 private:
  std::uint64_t writes_ = 0;    // writer thread only
  std::uint64_t failures_ = 0;  // writer thread only; read after stop()
};

class LoggerSoak : public testing::TestWithParam<overflow_policy> {};

TEST_P(LoggerSoak, EveryAcceptedCallOnceInOrderAndEveryRefusalCounted) {
  const overflow_policy policy = GetParam();
  soak_record rec;
  auto recording = std::make_shared<callback_sink>([&rec](const log_entry& e) {
    const std::string_view m = e.record().message;
    int t = 0;
    int s = 0;
    if (parse_tag(m, t, s) && t >= 0 && t < max_threads && s >= 0 && s < calls_per_thread) {
      ++rec.seen[static_cast<std::size_t>(t)][static_cast<std::size_t>(s)];
      if (s <= rec.last[static_cast<std::size_t>(t)]) ++rec.out_of_order;
      rec.last[static_cast<std::size_t>(t)] = s;
      if (e.record().truncated) ++rec.truncated_seen;
      return;
    }
    unsigned long long n = 0;
    if (std::sscanf(std::string(m).c_str(), "%llu messages dropped", &n) == 1) {
      rec.drop_notices_total += n;
    } else {
      ++rec.untagged;
    }
  });
  auto failing = std::make_shared<failing_sink>();
  std::atomic<std::uint64_t> handler_calls{0};
  logger_options o;
  o.thread_buffer_bytes = 4096;  // small: calls find it full
  o.overflow = policy;
  o.level = log_level::trace;
  o.max_message_bytes = 300;
  o.error_handler = [&handler_calls](const error&) {
    handler_calls.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  };
  auto log = std::make_unique<logger>(std::vector<std::shared_ptr<log_sink>>{recording, failing}, o);

  // Per producer thread: which calls were accepted (written by that thread,
  // read after the joins).
  std::vector<std::vector<std::uint8_t>> accepted(max_threads, std::vector<std::uint8_t>(calls_per_thread, 0));
  std::atomic<int> next_thread{0};
  std::atomic<std::uint64_t> queue_full_calls{0};
  std::atomic<std::uint64_t> stopped_calls{0};
  std::atomic<std::uint64_t> unexpected{0};
  std::atomic<bool> stop_begun{false};
  std::atomic<bool> done{false};
  const std::string long_text(700, 'x');  // cut at max_message_bytes

  auto produce = [&] {
    const int t = next_thread.fetch_add(1, std::memory_order_relaxed);
    if (t >= max_threads) return;
    std::minstd_rand rng(static_cast<unsigned>(t) + 1);
    for (int s = 0; s < calls_per_thread; ++s) {
      result<void> r;
      switch (rng() % 4) {
        case 0:  // deferred: numbers and a copied string
          r = log->try_log(log_level::info, "t{} s{} deferred {} {} {}", t, s, rng(), std::string_view("text"), 0.5);
          break;
        case 1:  // text, maybe cut
          r = log->try_log_text(log_level::warn, "t" + std::to_string(t) + " s" + std::to_string(s) + " " +
                                                     long_text.substr(0, rng() % long_text.size()));
          break;
        case 2:  // formatted on the caller (a run-time format string)
          r = log->try_log(log_level::error, fmt::runtime("t{} s{} runtime {}"), t, s, rng());
          break;
        default:  // a long deferred string argument, maybe cut
          r = log->try_log(log_level::debug, "t{} s{} {}", t, s, std::string(rng() % 600, 'y'));
      }
      if (r) {
        accepted[static_cast<std::size_t>(t)][static_cast<std::size_t>(s)] = 1;
      } else if (r.error().code() == error_code::queue_full && policy == overflow_policy::drop) {
        queue_full_calls.fetch_add(1, std::memory_order_relaxed);
      } else if (r.error().code() == error_code::pool_stopped) {
        stopped_calls.fetch_add(1, std::memory_order_relaxed);
      } else {
        unexpected.fetch_add(1, std::memory_order_relaxed);
      }
    }
  };

  // Short-lived producers, two or three at a time, until stop().
  std::vector<std::thread> spawners;
  for (int k = 0; k < 3; ++k) {
    spawners.emplace_back([&] {
      while (!done.load(std::memory_order_acquire)) {  // pairs with the release store below
        std::thread(produce).join();
      }
    });
  }
  std::thread flusher([&] {
    while (!done.load(std::memory_order_acquire)) {  // pairs with the release store below
      // acquire: pairs with the release store before stop(); a flush that
      // began before it must succeed.
      const bool before_stop = !stop_begun.load(std::memory_order_acquire);
      const result<void> r = log->flush();
      if (!r && (before_stop || r.error().code() != error_code::pool_stopped)) {
        unexpected.fetch_add(1, std::memory_order_relaxed);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });

  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop_begun.store(true, std::memory_order_release);  // pairs with the flusher's acquire
  log->stop();                                        // while producers still log
  done.store(true, std::memory_order_release);        // pairs with the loops' acquire
  for (auto& s : spawners) s.join();
  flusher.join();

  const logger_statistics st = log->statistics();
  log.reset();

  EXPECT_EQ(unexpected.load(std::memory_order_relaxed), 0u);
  EXPECT_EQ(rec.untagged, 0u);
  EXPECT_EQ(rec.out_of_order, 0u);
  const int threads = std::min(next_thread.load(std::memory_order_relaxed), max_threads);
  std::uint64_t accepted_calls = 0;
  for (int t = 0; t < threads; ++t) {
    for (int s = 0; s < calls_per_thread; ++s) {
      const auto a = accepted[static_cast<std::size_t>(t)][static_cast<std::size_t>(s)];
      accepted_calls += a;
      ASSERT_EQ(int{rec.seen[static_cast<std::size_t>(t)][static_cast<std::size_t>(s)]}, int{a})
          << "times written of call t" << t << " s" << s;
    }
  }
  EXPECT_EQ(st.accepted, accepted_calls);
  EXPECT_EQ(st.written, accepted_calls);
  EXPECT_EQ(st.dropped, queue_full_calls.load(std::memory_order_relaxed));
  EXPECT_EQ(rec.drop_notices_total, st.dropped) << "the 'messages dropped' notices do not add up";
  EXPECT_EQ(st.rejected, stopped_calls.load(std::memory_order_relaxed));
  EXPECT_EQ(st.truncated, rec.truncated_seen);
  EXPECT_EQ(st.sink_errors, failing->failures());
  EXPECT_EQ(handler_calls.load(std::memory_order_relaxed), st.sink_errors);
  if (policy == overflow_policy::block) {
    EXPECT_EQ(st.dropped, 0u);
  }
  EXPECT_GT(accepted_calls, 0u);
  EXPECT_GT(threads, 1);
}

INSTANTIATE_TEST_SUITE_P(BothPolicies, LoggerSoak, testing::Values(overflow_policy::block, overflow_policy::drop),
                         [](const testing::TestParamInfo<overflow_policy>& param_info) {
                           return std::string(param_info.param == overflow_policy::block ? "block" : "drop");
                         });

}  // namespace
}  // namespace thread_system
