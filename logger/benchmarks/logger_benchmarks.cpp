// The async logger against spdlog (async_logger and the synchronous logger),
// reproducing the seed's logger tables: single thread with 17/123/1024-char
// messages, 1-16 producer threads, bursts of 10 and 100, formatted messages,
// per-call latency (mean, p99).
//
// Fairness (the same on both sides):
//   * Buffer: 8192 entries. Thread System: 8192 slots of 128 bytes (a
//     message of up to 72 bytes takes one slot, 123 bytes two, 1024 bytes
//     nine); spdlog: thread_pool(8192 messages, 1 worker thread).
//   * Overflow policy: block on both.
//   * Sink: a counting sink that does not format and does not write
//     (Thread System: null_sink; spdlog: a base_sink<null_mutex> whose
//     sink_it_ only counts), so disk and formatting of the output line do not
//     dominate. logger_devnull/ adds a real file sink on /dev/null on both
//     sides (the line is formatted and fwrite'n; Thread System's
//     flush_when_idle is off there, as spdlog does not flush either).
//   * Every call passes a source location (spdlog: source_loc{__FILE__,
//     __LINE__, __func__}; Thread System captures it implicitly).
//   * Timing is wall clock, end to end: from the first call until the sink
//     has counted every message of the iteration (both sides polled the same
//     way), so a logger that only queues fast but drains slowly does not win.
//   * The producer threads are started once per benchmark run and released
//     each iteration by a barrier (thread creation is not timed).
//   * spdlog is the Debian 1.10 package built against fmt 9, the {fmt}
//     Thread System's logger uses.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "thread_system/logger/logger.hpp"
#include "thread_system/logger/sinks.hpp"

#if defined(THREAD_SYSTEM_HAVE_SPDLOG)
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#endif

namespace {

using namespace thread_system;

constexpr std::size_t queue_entries = 8192;
constexpr std::size_t messages_per_iteration = 20000;

std::string message_of_length(std::size_t n) {
  std::string s;
  s.reserve(n);
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + i % 26));
  return s;
}

// Waits (yielding) until `count()` reaches `target`.
template <typename F>
void wait_for_count(F count, std::uint64_t target) {
  while (count() < target) std::this_thread::yield();
}

// N threads started once; run() releases them for one round of `body` and
// returns when all have finished it.
class producer_crew {
 public:
  producer_crew(int threads, std::function<void(int)> body)
      : body_(std::move(body)), start_(threads + 1), done_(threads + 1) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i] {
        for (;;) {
          start_.arrive_and_wait();
          if (quit_.load(std::memory_order_acquire)) return;  // pairs with the release in the destructor
          body_(i);
          done_.arrive_and_wait();
        }
      });
    }
  }
  ~producer_crew() {
    quit_.store(true, std::memory_order_release);  // read by the threads after the barrier
    start_.arrive_and_wait();
    for (auto& t : threads_) t.join();
  }
  producer_crew(const producer_crew&) = delete;
  producer_crew& operator=(const producer_crew&) = delete;

  void run() {
    start_.arrive_and_wait();
    done_.arrive_and_wait();
  }

 private:
  std::function<void(int)> body_;
  std::barrier<> start_;
  std::barrier<> done_;
  std::atomic<bool> quit_{false};
  std::vector<std::thread> threads_;
};

// ---------------------------------------------------------------------------
// the two loggers behind one interface
// ---------------------------------------------------------------------------

logger_options ts_options(bool flush_when_idle = true) {
  logger_options o;
  o.name = "bench_logger";
  o.capacity = queue_entries;
  o.overflow = overflow_policy::block;
  o.level = log_level::info;
  o.flush_when_idle = flush_when_idle;
  return o;
}

struct ts_side {
  std::shared_ptr<null_sink> counter = std::make_shared<null_sink>();
  std::unique_ptr<logger> log;
  explicit ts_side(bool devnull = false) {
    std::vector<std::shared_ptr<log_sink>> sinks{counter};
    if (devnull) {
      auto f = file_sink::create("/dev/null");
      if (!f) throw error_exception(f.error());
      sinks.insert(sinks.begin(), *f);
    }
    log = std::make_unique<logger>(std::move(sinks), ts_options(!devnull));
  }
  void text(const std::string& m) { log->log_text(log_level::info, m); }
  void formatted(int user, const std::string& ip, int attempt, double ms) {
    log->info("user {} logged in from {} on attempt {} in {:.2f} ms", user, ip, attempt, ms);
  }
  std::uint64_t count() const { return counter->records(); }
  void report(benchmark::State& state) const {
    state.counters["producer_sleeps"] = static_cast<double>(log->statistics().blocked);
  }
};

#if defined(THREAD_SYSTEM_HAVE_SPDLOG)
class counting_sink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }  // polled snapshot

 protected:
  void sink_it_(const spdlog::details::log_msg& /*msg*/) override {
    // relaxed: single writer (spdlog's worker); the poller only compares.
    count_.store(count_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void flush_() override {}

 private:
  std::atomic<std::uint64_t> count_{0};
};

class counting_sink_mt final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }  // polled snapshot

 protected:
  void sink_it_(const spdlog::details::log_msg& /*msg*/) override {
    count_.fetch_add(1, std::memory_order_relaxed);  // under base_sink's mutex; relaxed for the poller
  }
  void flush_() override {}

 private:
  std::atomic<std::uint64_t> count_{0};
};

#define TS_BENCH_LOC \
  spdlog::source_loc { __FILE__, __LINE__, static_cast<const char*>(__func__) }

struct spdlog_async_side {
  std::shared_ptr<counting_sink> counter = std::make_shared<counting_sink>();
  std::shared_ptr<spdlog::details::thread_pool> pool = std::make_shared<spdlog::details::thread_pool>(queue_entries, 1);
  std::shared_ptr<spdlog::async_logger> log;
  explicit spdlog_async_side(bool devnull = false) {
    std::vector<spdlog::sink_ptr> sinks{counter};
    if (devnull) sinks.insert(sinks.begin(), std::make_shared<spdlog::sinks::basic_file_sink_st>("/dev/null"));
    log = std::make_shared<spdlog::async_logger>("bench_async", sinks.begin(), sinks.end(), pool,
                                                 spdlog::async_overflow_policy::block);
    log->set_level(spdlog::level::info);
  }
  ~spdlog_async_side() {
    log.reset();
    pool.reset();  // joins its worker after the queued messages
  }
  spdlog_async_side(const spdlog_async_side&) = delete;
  spdlog_async_side& operator=(const spdlog_async_side&) = delete;
  void text(const std::string& m) { log->log(TS_BENCH_LOC, spdlog::level::info, m); }
  void formatted(int user, const std::string& ip, int attempt, double ms) {
    log->log(TS_BENCH_LOC, spdlog::level::info, "user {} logged in from {} on attempt {} in {:.2f} ms", user, ip,
             attempt, ms);
  }
  std::uint64_t count() const { return counter->count(); }
  void report(benchmark::State& /*state*/) const {}
};

struct spdlog_sync_side {
  std::shared_ptr<counting_sink_mt> counter = std::make_shared<counting_sink_mt>();
  std::shared_ptr<spdlog::logger> log;
  explicit spdlog_sync_side(bool devnull = false) {
    std::vector<spdlog::sink_ptr> sinks{counter};
    if (devnull) sinks.insert(sinks.begin(), std::make_shared<spdlog::sinks::basic_file_sink_mt>("/dev/null"));
    log = std::make_shared<spdlog::logger>("bench_sync", sinks.begin(), sinks.end());
    log->set_level(spdlog::level::info);
  }
  void text(const std::string& m) { log->log(TS_BENCH_LOC, spdlog::level::info, m); }
  void formatted(int user, const std::string& ip, int attempt, double ms) {
    log->log(TS_BENCH_LOC, spdlog::level::info, "user {} logged in from {} on attempt {} in {:.2f} ms", user, ip,
             attempt, ms);
  }
  std::uint64_t count() const { return counter->count(); }
  void report(benchmark::State& /*state*/) const {}
};
#endif

// ---------------------------------------------------------------------------
// workloads
// ---------------------------------------------------------------------------

// One thread, text messages of `chars` characters; 20000 per iteration.
template <typename Side>
void single_thread(benchmark::State& state, bool devnull) {
  Side side(devnull);
  const std::string message = message_of_length(static_cast<std::size_t>(state.range(0)));
  std::uint64_t target = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < messages_per_iteration; ++i) side.text(message);
    target += messages_per_iteration;
    wait_for_count([&] { return side.count(); }, target);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(target));
  side.report(state);
  state.counters["msgs_per_s"] = benchmark::Counter(static_cast<double>(target), benchmark::Counter::kIsRate);
}

// `threads` producers share 20000 123-character messages per iteration.
template <typename Side>
void many_threads(benchmark::State& state) {
  Side side;
  const int threads = static_cast<int>(state.range(0));
  const std::string message = message_of_length(123);
  const std::size_t per_thread = messages_per_iteration / static_cast<std::size_t>(threads);
  producer_crew crew(threads, [&](int) {
    for (std::size_t i = 0; i < per_thread; ++i) side.text(message);
  });
  std::uint64_t target = 0;
  for (auto _ : state) {
    crew.run();
    target += per_thread * static_cast<std::size_t>(threads);
    wait_for_count([&] { return side.count(); }, target);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(target));
  side.report(state);
  state.counters["msgs_per_s"] = benchmark::Counter(static_cast<double>(target), benchmark::Counter::kIsRate);
}

// A burst of `burst` 123-character messages, then wait until they are all
// written (the writer goes idle between bursts).
template <typename Side>
void bursts(benchmark::State& state) {
  Side side;
  const auto burst = static_cast<std::size_t>(state.range(0));
  const std::string message = message_of_length(123);
  std::uint64_t target = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < burst; ++i) side.text(message);
    target += burst;
    wait_for_count([&] { return side.count(); }, target);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(target));
  side.report(state);
  state.counters["msgs_per_s"] = benchmark::Counter(static_cast<double>(target), benchmark::Counter::kIsRate);
}

// Formatted messages: an int, a string, an int and a double per call.
template <typename Side>
void formatted(benchmark::State& state) {
  Side side;
  const std::string ip = "192.168.100.200";
  std::uint64_t target = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < messages_per_iteration; ++i) {
      side.formatted(static_cast<int>(i), ip, static_cast<int>(i % 5), static_cast<double>(i) * 0.25);
    }
    target += messages_per_iteration;
    wait_for_count([&] { return side.count(); }, target);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(target));
  side.report(state);
  state.counters["msgs_per_s"] = benchmark::Counter(static_cast<double>(target), benchmark::Counter::kIsRate);
}

// Per-call latency of a 123-character message: 1000 calls per iteration,
// each timed with steady_clock, then the writer drains (untimed). The buffer
// never fills, so this is the cost of the call itself (no blocking).
template <typename Side>
void call_latency(benchmark::State& state) {
  Side side;
  const std::string message = message_of_length(123);
  constexpr std::size_t calls = 1000;
  std::vector<double> samples;
  samples.reserve(calls * 64);
  std::uint64_t target = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < calls; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      side.text(message);
      const auto t1 = std::chrono::steady_clock::now();
      if (samples.size() < samples.capacity())
        samples.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    target += calls;
    state.PauseTiming();
    wait_for_count([&] { return side.count(); }, target);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(target));
  if (!samples.empty()) {
    std::sort(samples.begin(), samples.end());
    const double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
    state.counters["mean_ns"] = mean;
    state.counters["p50_ns"] = samples[samples.size() / 2];
    state.counters["p99_ns"] = samples[std::min(samples.size() - 1, samples.size() * 99 / 100)];
  }
}

void lengths(benchmark::internal::Benchmark* b) {
  for (int chars : {17, 123, 1024}) b->Arg(chars);
  b->ArgName("chars")->UseRealTime()->Unit(benchmark::kMillisecond);
}
void thread_counts(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2, 4, 8, 16}) b->Arg(t);
  b->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);
}
void burst_sizes(benchmark::internal::Benchmark* b) {
  for (int n : {10, 100}) b->Arg(n);
  b->ArgName("burst")->UseRealTime()->Unit(benchmark::kMicrosecond);
}

template <typename Side>
void register_all(const char* lib) {
  const std::string l(lib);
  benchmark::RegisterBenchmark(("logger_single/" + l).c_str(), [](benchmark::State& s) {
    single_thread<Side>(s, false);
  })->Apply(lengths);
  benchmark::RegisterBenchmark(("logger_devnull/" + l).c_str(),
                               [](benchmark::State& s) { single_thread<Side>(s, true); })
      ->Arg(123)
      ->ArgName("chars")
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("logger_threads/" + l).c_str(), many_threads<Side>)->Apply(thread_counts);
  benchmark::RegisterBenchmark(("logger_burst/" + l).c_str(), bursts<Side>)->Apply(burst_sizes);
  benchmark::RegisterBenchmark(("logger_formatted/" + l).c_str(), formatted<Side>)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(("logger_latency/" + l).c_str(), call_latency<Side>)->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all<ts_side>("thread_system");
#if defined(THREAD_SYSTEM_HAVE_SPDLOG)
  register_all<spdlog_async_side>("spdlog_async");
  register_all<spdlog_sync_side>("spdlog_sync");
  benchmark::AddCustomContext("have_spdlog", "1");
#else
  benchmark::AddCustomContext("have_spdlog", "0");
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
