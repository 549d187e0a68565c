// The async logger against spdlog (async_logger and the synchronous logger)
// and against plain console output (stdio, one write per line: the seed's
// "Console Output" baseline), reproducing the seed's logger tables: single
// thread with 17/123/1024-char messages, 1-16 producer threads, bursts of 10
// and 100, formatted messages,
// per-call latency (mean, p50, p99, p99.9) of a text and of a formatted call,
// and the writer thread's cost per record (issue #22).
//
// Fairness (the same on both sides):
//   * Buffer: Thread System: one 1 MiB buffer per producer thread
//     (logger_options::thread_buffer_bytes); spdlog: one queue of 8192 messages
//     (thread_pool(8192, 1 worker thread)), shared by all producers.
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
//     Two exceptions, described at their functions: logger_latency*/ times
//     each call on the producer (a TSC timer), logger_writer/ times only the
//     writer thread's work.
//   * The producer threads are started once per benchmark run and released
//     each iteration by a barrier (thread creation is not timed).
//   * spdlog is the Debian 1.10 package built against fmt 9, the {fmt}
//     Thread System's logger uses.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "thread_system/logger/logger.hpp"
#include "thread_system/logger/sinks.hpp"

#if defined(THREAD_SYSTEM_HAVE_SPDLOG)
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#endif

namespace {

using namespace thread_system;

[[maybe_unused]] constexpr std::size_t queue_entries =
    8192;  // spdlog's queue (unused without spdlog)  // spdlog's queue (messages)
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
  o.thread_buffer_bytes = std::size_t{1} << 20;  // 1 MiB per producer thread (see the header comment)
  o.overflow = overflow_policy::block;
  o.level = log_level::info;
  o.flush_when_idle = flush_when_idle;
  return o;
}

// The two calls every workload makes, shared by the sides below.
void ts_text(logger& log, const std::string& m) { log.log_text(log_level::info, m); }
void ts_formatted(logger& log, int user, const std::string& ip, int attempt, double ms) {
  log.info("user {} logged in from {} on attempt {} in {:.2f} ms", user, ip, attempt, ms);
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
  void text(const std::string& m) { ts_text(*log, m); }
  void formatted(int user, const std::string& ip, int attempt, double ms) { ts_formatted(*log, user, ip, attempt, ms); }
  std::uint64_t count() const { return counter->records(); }
  void report(benchmark::State& state) const {
    state.counters["producer_sleeps"] = static_cast<double>(log->statistics().blocked);
  }
};

// The guides' "Console Output" baseline: what a program does without a
// logger. Each call formats the line (wall-clock time, level, text) on the
// calling thread with {fmt} and writes it to a line-buffered stdio stream, so
// one write(2) per line as on a terminal. The stream is /dev/null (a real
// terminal costs more); stdio's stream lock serialises the threads.
struct console_side {
  std::FILE* out = nullptr;
  std::atomic<std::uint64_t> lines{0};
  explicit console_side(bool /*devnull*/ = false) : out(std::fopen("/dev/null", "w")) {
    if (out == nullptr) throw std::runtime_error("cannot open /dev/null");
    (void)std::setvbuf(out, nullptr, _IOLBF, 4096);  // line buffered, like a terminal
  }
  ~console_side() { (void)std::fclose(out); }
  console_side(const console_side&) = delete;
  console_side& operator=(const console_side&) = delete;
  void text(const std::string& m) {
    fmt::print(out, "[{:%F %T}] [info] {}\n", std::chrono::system_clock::now(), m);
    lines.fetch_add(1, std::memory_order_relaxed);  // polled snapshot; the count is all that is read
  }
  void formatted(int user, const std::string& ip, int attempt, double ms) {
    fmt::print(out, "[{:%F %T}] [info] user {} logged in from {} on attempt {} in {:.2f} ms\n",
               std::chrono::system_clock::now(), user, ip, attempt, ms);
    lines.fetch_add(1, std::memory_order_relaxed);  // as above
  }
  std::uint64_t count() const { return lines.load(std::memory_order_relaxed); }
  void report(benchmark::State& /*state*/) const {}
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

void spdlog_text(spdlog::logger& log, const std::string& m) { log.log(TS_BENCH_LOC, spdlog::level::info, m); }
void spdlog_formatted(spdlog::logger& log, int user, const std::string& ip, int attempt, double ms) {
  log.log(TS_BENCH_LOC, spdlog::level::info, "user {} logged in from {} on attempt {} in {:.2f} ms", user, ip, attempt,
          ms);
}

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
  void text(const std::string& m) { spdlog_text(*log, m); }
  void formatted(int user, const std::string& ip, int attempt, double ms) {
    spdlog_formatted(*log, user, ip, attempt, ms);
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
  void text(const std::string& m) { spdlog_text(*log, m); }
  void formatted(int user, const std::string& ip, int attempt, double ms) {
    spdlog_formatted(*log, user, ip, attempt, ms);
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

// Until `target` records are written: the sink's count is polled (spdlog's
// async flush() only queues a flush; the synchronous sides have written
// them when the calls return) ...
template <typename Side>
void wait_written(const Side& side, std::uint64_t target) {
  wait_for_count([&] { return side.count(); }, target);
}
// ... except for Thread System's logger, whose flush() returns once they
// are (the calling thread writes what the writer thread has not begun).
void wait_written(const ts_side& side, std::uint64_t target) {
  if (!side.log->flush()) throw std::runtime_error("flush failed");
  wait_for_count([&] { return side.count(); }, target);
}

// A burst of `burst` 123-character messages, then wait until they are all
// written (the writer goes idle between bursts): Thread System's logger by
// flush(), which returns when they are; spdlog's async flush() only queues a
// flush, so its count is polled, as is that of the synchronous sides (which
// have written them when the calls return).
template <typename Side>
void bursts(benchmark::State& state) {
  Side side;
  const auto burst = static_cast<std::size_t>(state.range(0));
  const std::string message = message_of_length(123);
  std::uint64_t target = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < burst; ++i) side.text(message);
    target += burst;
    wait_written(side, target);
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

// ---------------------------------------------------------------------------
// per-call latency
// ---------------------------------------------------------------------------

// The latency timer. steady_clock::now() costs ~27 ns on the test VM, more
// than a ~20 ns log call, so on x86-64 calls are timed with the TSC:
// lfence; rdtsc; lfence at both ends (the fences keep the timed call's
// instructions between the two reads), converted to ns with the ratio of TSC
// ticks to steady_clock ns over the benchmark's run (tick_calibration).
// Elsewhere the ticks are steady_clock ns (the ratio comes out as 1). The
// same timer on every side.
#if defined(__x86_64__)
inline std::uint64_t timer_ticks() noexcept {
  // Compiler barrier only (no other thread involved): the compiler must not
  // move the timed call's memory accesses across the read.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  _mm_lfence();
  const std::uint64_t t = __rdtsc();
  _mm_lfence();
  std::atomic_signal_fence(std::memory_order_seq_cst);  // as above
  return t;
}
#else
inline std::uint64_t timer_ticks() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}
#endif

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The timer's resolution in ticks: the greatest common divisor of the
// differences between consecutive reads that occur in at least 1% of 100000
// reads. The TSC of AMD's Zen cores advances in steps of ~10 ns (here 21
// ticks), so every sample is a multiple of a step; a timer that advances
// every tick gives 1.
std::uint64_t timer_step_ticks() {
  constexpr std::size_t reads = 100000;
  std::vector<std::uint64_t> diffs(reads);
  std::uint64_t previous = timer_ticks();
  for (auto& d : diffs) {
    const std::uint64_t t = timer_ticks();
    d = t - previous;
    previous = t;
  }
  std::sort(diffs.begin(), diffs.end());
  std::uint64_t step = 0;
  for (auto run = diffs.begin(); run != diffs.end();) {
    const auto next = std::upper_bound(run, diffs.end(), *run);
    if (*run > 0 && static_cast<std::size_t>(next - run) >= reads / 100) step = std::gcd(step, *run);
    run = next;
  }
  return step > 0 ? step : 1;
}

// Ticks per steady_clock nanosecond, measured from construction to the
// ticks_per_ns() call.
class tick_calibration {
 public:
  tick_calibration() : ns0_(steady_ns()), ticks0_(timer_ticks()) {}
  [[nodiscard]] double ticks_per_ns() const {
    const std::uint64_t ticks = timer_ticks() - ticks0_;
    const std::int64_t ns = steady_ns() - ns0_;
    return ns > 0 && ticks > 0 ? static_cast<double>(ticks) / static_cast<double>(ns) : 1.0;
  }

 private:
  std::int64_t ns0_;
  std::uint64_t ticks0_;
};

// Per-call latency: 1000 calls per iteration, each timed on the producer with
// timer_ticks(), then the writer drains (untimed). The buffer never fills, so
// this is the cost of the call itself (no blocking). Before the first
// iteration (untimed) 32 such batches run and drain, so every side's buffer
// has been written through once and no first-touch page fault lands in the
// percentiles. Each timed call is preceded by an empty timed pair (two
// timer reads with nothing between); the median of those is the timer's own
// cost, reported as timer_ns and subtracted from every call's sample (clamped
// at 0) before mean_ns, p50_ns, p99_ns and p999_ns are taken. timer_step_ns:
// the timer's resolution (timer_step_ticks(); the samples are multiples of
// it). Samples: the calls of the run's first 128 iterations.
template <typename Side, typename Call>
void call_latency(benchmark::State& state, Side& side, Call call) {
  constexpr std::size_t calls = 1000;
  constexpr std::size_t warmup_batches = 32;
  constexpr std::size_t sampled_iterations = 128;
  std::vector<std::uint64_t> call_ticks;
  std::vector<std::uint64_t> empty_ticks;
  call_ticks.reserve(calls * sampled_iterations);
  empty_ticks.reserve(calls * sampled_iterations);
  std::uint64_t target = 0;
  for (std::size_t b = 0; b < warmup_batches; ++b) {
    for (std::size_t i = 0; i < calls; ++i) call(i);
    target += calls;
    wait_for_count([&] { return side.count(); }, target);
  }
  const std::uint64_t warmup = target;
  const tick_calibration calibration;
  std::size_t iterations = 0;
  for (auto _ : state) {
    const bool sample = iterations++ < sampled_iterations;
    for (std::size_t i = 0; i < calls; ++i) {
      const std::uint64_t e0 = timer_ticks();
      const std::uint64_t e1 = timer_ticks();
      const std::uint64_t t0 = timer_ticks();
      call(i);
      const std::uint64_t t1 = timer_ticks();
      if (sample) {
        empty_ticks.push_back(e1 - e0);
        call_ticks.push_back(t1 - t0);
      }
    }
    target += calls;
    state.PauseTiming();
    wait_for_count([&] { return side.count(); }, target);
    state.ResumeTiming();
  }
  const double ticks_per_ns = calibration.ticks_per_ns();
  state.SetItemsProcessed(static_cast<std::int64_t>(target - warmup));
  if (call_ticks.empty()) return;
  const auto middle = empty_ticks.begin() + static_cast<std::ptrdiff_t>(empty_ticks.size() / 2);
  std::nth_element(empty_ticks.begin(), middle, empty_ticks.end());
  const std::uint64_t overhead = *middle;
  std::vector<double> samples;
  samples.reserve(call_ticks.size());
  for (const std::uint64_t t : call_ticks) {
    samples.push_back(static_cast<double>(t > overhead ? t - overhead : 0) / ticks_per_ns);
  }
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  state.counters["mean_ns"] = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  state.counters["p50_ns"] = samples[n / 2];
  state.counters["p99_ns"] = samples[std::min(n - 1, n * 99 / 100)];
  state.counters["p999_ns"] = samples[std::min(n - 1, n * 999 / 1000)];
  state.counters["timer_ns"] = static_cast<double>(overhead) / ticks_per_ns;
  state.counters["timer_step_ns"] = static_cast<double>(timer_step_ticks()) / ticks_per_ns;
}

// A 123-character text message.
template <typename Side>
void text_latency(benchmark::State& state) {
  Side side;
  const std::string message = message_of_length(123);
  call_latency(state, side, [&](std::size_t) { side.text(message); });
}

// The formatted workload's call: an int, a string, an int and a double.
template <typename Side>
void formatted_latency(benchmark::State& state) {
  Side side;
  const std::string ip = "192.168.100.200";
  call_latency(state, side, [&](std::size_t i) {
    side.formatted(static_cast<int>(i), ip, static_cast<int>(i % 5), static_cast<double>(i) * 0.25);
  });
}

// ---------------------------------------------------------------------------
// the writer thread's cost per record
// ---------------------------------------------------------------------------

// Holds a logger's writer thread inside its sink: the first record the sink
// receives after arm() waits in pass() until open(). The benchmark thread
// queues records meanwhile, then opens the gate and times until count()
// reaches them: only the writer works in that window. If the gate stays
// closed for 5 s (the producer blocked on a full buffer, which the record
// count is chosen to avoid) the writer goes on and timed_out() says so.
class writer_gate {
 public:
  // Benchmark thread, while the writer is idle (every earlier record counted).
  void arm() {
    held_.store(false, std::memory_order_relaxed);  // published by the release store of armed_ below
    open_.store(false, std::memory_order_relaxed);  // as held_
    armed_.store(true, std::memory_order_release);  // pairs with the acquire load in pass()
  }
  // Benchmark thread: returns once the writer waits in pass().
  void wait_held() const {
    while (!held_.load(std::memory_order_acquire)) std::this_thread::yield();  // pairs with the release in pass()
  }
  // Benchmark thread: lets the writer go on.
  void open() {
    open_.store(true, std::memory_order_release);  // pairs with the acquire load in pass()
  }
  // Benchmark thread: records counted so far.
  [[nodiscard]] std::uint64_t records() const {
    return records_.load(std::memory_order_acquire);  // pairs with the release in count(); orders timed_out()
  }
  // Benchmark thread, after records() reached the iteration's count.
  [[nodiscard]] bool timed_out() const {
    return timed_out_.load(std::memory_order_relaxed);  // ordered by records()' acquire
  }

  // Writer thread, first thing in the sink's write: waits if armed.
  void pass() {
    if (!armed_.load(std::memory_order_acquire)) return;  // pairs with the release in arm()
    armed_.store(false, std::memory_order_relaxed);       // only this thread clears it; arm() runs when idle
    held_.store(true, std::memory_order_release);         // pairs with the acquire in wait_held()
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (std::uint32_t spins = 1; !open_.load(std::memory_order_acquire); ++spins) {  // pairs with open()'s release
      if (spins % 1024 == 0 && std::chrono::steady_clock::now() > deadline) {
        timed_out_.store(true, std::memory_order_relaxed);  // published by count()'s release
        break;
      }
      std::this_thread::yield();
    }
  }
  // Writer thread, last thing in the sink's write.
  void count() {
    // release: single writer; pairs with the acquire in records().
    records_.store(records_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

 private:
  std::atomic<bool> armed_{false};
  std::atomic<bool> held_{false};
  std::atomic<bool> open_{false};
  std::atomic<bool> timed_out_{false};
  std::atomic<std::uint64_t> records_{0};
};

// Thread System's gated sink: counts; with format_line it also formats the
// record's text line (log_entry::line()), as a file or console sink would.
class ts_gated_sink final : public log_sink {
 public:
  ts_gated_sink(writer_gate& gate, bool format_line) : gate_(gate), format_line_(format_line) {}
  result<void> write(const log_entry& entry) override {
    gate_.pass();
    if (format_line_) {
      std::size_t bytes = entry.line().size();
      benchmark::DoNotOptimize(bytes);
    }
    gate_.count();
    return {};
  }
  result<void> flush() override { return {}; }

 private:
  writer_gate& gate_;
  bool format_line_;
};

struct ts_writer_side {
  writer_gate gate;
  std::unique_ptr<logger> log;  // destroyed first: its sink refers to gate
  explicit ts_writer_side(bool format_line) {
    std::vector<std::shared_ptr<log_sink>> sinks{std::make_shared<ts_gated_sink>(gate, format_line)};
    log = std::make_unique<logger>(std::move(sinks), ts_options());
  }
  void text(const std::string& m) { ts_text(*log, m); }
  void formatted(int user, const std::string& ip, int attempt, double ms) { ts_formatted(*log, user, ip, attempt, ms); }
};

#if defined(THREAD_SYSTEM_HAVE_SPDLOG)
// spdlog's gated sink, as ts_gated_sink. With format_line the pattern mirrors
// Thread System's line (UTC, microseconds, level, thread id, file:line).
class spdlog_gated_sink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  spdlog_gated_sink(writer_gate& gate, bool format_line) : gate_(gate), format_line_(format_line) {
    set_formatter_(std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%fZ [%l] [%t] [%s:%#] %v",
                                                               spdlog::pattern_time_type::utc));
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    gate_.pass();
    if (format_line_) {
      spdlog::memory_buf_t line;
      formatter_->format(msg, line);
      std::size_t bytes = line.size();
      benchmark::DoNotOptimize(bytes);
    }
    gate_.count();
  }
  void flush_() override {}

 private:
  writer_gate& gate_;
  bool format_line_;
};

struct spdlog_writer_side {
  writer_gate gate;
  std::shared_ptr<spdlog::details::thread_pool> pool = std::make_shared<spdlog::details::thread_pool>(queue_entries, 1);
  std::shared_ptr<spdlog::async_logger> log;
  explicit spdlog_writer_side(bool format_line) {
    log = std::make_shared<spdlog::async_logger>("bench_writer", std::make_shared<spdlog_gated_sink>(gate, format_line),
                                                 pool, spdlog::async_overflow_policy::block);
    log->set_level(spdlog::level::info);
  }
  ~spdlog_writer_side() {
    log.reset();
    pool.reset();  // joins its worker after the queued messages; then the sink (refers to gate) is gone
  }
  spdlog_writer_side(const spdlog_writer_side&) = delete;
  spdlog_writer_side& operator=(const spdlog_writer_side&) = delete;
  void text(const std::string& m) { spdlog_text(*log, m); }
  void formatted(int user, const std::string& ip, int attempt, double ms) {
    spdlog_formatted(*log, user, ip, attempt, ms);
  }
};
#endif

// Records queued per iteration while the writer is held. They must fit the
// buffer with the writer stopped: spdlog's queue holds 8192 messages; Thread
// System's 1 MiB holds 4001 123-char records with room to spare.
constexpr std::size_t writer_records = 4000;

// The writer thread's cost per record (decode + format + sink call): per
// iteration one record closes the gate (the sink holds the writer in it),
// the benchmark thread queues 4000 more (untimed), opens the gate and times,
// with steady_clock, until the sink has counted all 4001. kind:0 123-char
// text, kind:1 the formatted workload's call; line:0 the sink only counts
// (as in the other rows), line:1 it also formats the text line. Manual time:
// the reported time is the timed window only; ns_per_record = window / 4000.
template <typename Side>
void writer_throughput(benchmark::State& state) {
  const bool formatted_call = state.range(0) == 1;
  Side side(state.range(1) == 1);
  const std::string message = message_of_length(123);
  const std::string ip = "192.168.100.200";
  auto call = [&](std::size_t i) {
    if (formatted_call) {
      side.formatted(static_cast<int>(i), ip, static_cast<int>(i % 5), static_cast<double>(i) * 0.25);
    } else {
      side.text(message);
    }
  };
  std::uint64_t target = 0;
  double timed_ns = 0;
  std::uint64_t timed_records = 0;
  for (auto _ : state) {
    side.gate.arm();
    call(0);
    side.gate.wait_held();
    for (std::size_t i = 1; i <= writer_records; ++i) call(i);
    target += writer_records + 1;
    const auto t0 = std::chrono::steady_clock::now();
    side.gate.open();
    wait_for_count([&] { return side.gate.records(); }, target);
    const auto t1 = std::chrono::steady_clock::now();
    if (side.gate.timed_out()) {
      state.SkipWithError("the writer was held for 5 s: the records did not fit the buffer");
      break;
    }
    const std::chrono::duration<double, std::nano> window = t1 - t0;
    state.SetIterationTime(window.count() * 1e-9);
    timed_ns += window.count();
    timed_records += writer_records;
  }
  if (timed_records > 0) state.counters["ns_per_record"] = timed_ns / static_cast<double>(timed_records);
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
  benchmark::RegisterBenchmark(("logger_latency/" + l).c_str(), text_latency<Side>)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(("logger_latency_formatted/" + l).c_str(), formatted_latency<Side>)
      ->Unit(benchmark::kMicrosecond);
}

template <typename Side>
void register_writer(const char* lib) {
  benchmark::RegisterBenchmark(("logger_writer/" + std::string(lib)).c_str(), writer_throughput<Side>)
      ->ArgsProduct({{0, 1}, {0, 1}})
      ->ArgNames({"kind", "line"})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all<ts_side>("thread_system");
  register_writer<ts_writer_side>("thread_system");
  register_all<console_side>("console");
#if defined(THREAD_SYSTEM_HAVE_SPDLOG)
  register_all<spdlog_async_side>("spdlog_async");
  register_all<spdlog_sync_side>("spdlog_sync");
  register_writer<spdlog_writer_side>("spdlog_async");  // spdlog sync has no writer thread
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
