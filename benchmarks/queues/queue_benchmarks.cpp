// Queue-level benchmarks: each Thread System queue next to two peers, all
// carrying the same element type (thread_system::job_function, 64 bytes), so
// the comparison is like for like:
//   * job_queue, two_lock_job_queue, bounded_queue, lockfree_queue (and sharded_queue /
//     adaptive_job_queue / two_lock_adaptive_job_queue when their headers exist);
//   * moodycamel::ConcurrentQueue<job_function> (THREAD_SYSTEM_HAVE_MOODYCAMEL,
//     set by CMake when the header is found), used without producer/consumer
//     tokens: enqueue / try_dequeue, enqueue_bulk / try_dequeue_bulk;
//   * "mutex+deque": a plain std::mutex around std::deque<job_function>, the
//     baseline any queue must beat (named mutex_deque in benchmark names so
//     that --benchmark_filter regexes need no escaping).
//
// Benchmark names are "<workload>/<queue>/<arguments>"; scripts/queue-ratios.py
// turns the JSON output into a table of medians and ratios.
//
// Timing (see /work/shared/BENCHMARKING.md):
//   * Single-threaded latency, batch, producer/consumer and memory use
//     UseManualTime: every iteration measures only its timed region with
//     steady_clock and reports it with state.SetIterationTime(); set-up
//     (refilling, draining, starting threads) happens outside that region.
//   * Producer/consumer threads are started once per benchmark run, before
//     the timing loop, and parked on a std::barrier. Each iteration: all
//     threads arrive at a "ready" barrier, the clock starts, a "go" barrier
//     releases them, and the clock stops when every thread has arrived at the
//     "done" barrier, i.e. after every item was consumed. The wake-up of the
//     parked threads is therefore inside the timed region (a real cost of a
//     hand-off; it matters for 10K ops, hardly for 1M).
//   * The contention benchmark uses Google Benchmark's own threads
//     (->Threads(n)), which start together behind the library's barrier, and
//     UseRealTime (wall clock).
//   * Waiting loops (empty queue, full bounded queue) call
//     std::this_thread::yield(), the same for every queue: with more threads
//     than cores a pure spin would starve the thread being waited for.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "../workloads.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/queues/bounded_queue.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"
#include "thread_system/queues/queue_concept.hpp"
#include "thread_system/queues/two_lock_job_queue.hpp"

#if __has_include("thread_system/queues/sharded_queue.hpp")
#include "thread_system/queues/sharded_queue.hpp"
#define THREAD_SYSTEM_BENCH_SHARDED 1
#endif
#if __has_include("thread_system/queues/adaptive_job_queue.hpp")
#include "thread_system/queues/adaptive_job_queue.hpp"
#define THREAD_SYSTEM_BENCH_ADAPTIVE 1
#endif

#if defined(THREAD_SYSTEM_HAVE_MOODYCAMEL)
#if __has_include(<concurrentqueue/moodycamel/concurrentqueue.h>)
#include <concurrentqueue/moodycamel/concurrentqueue.h>
#elif __has_include(<concurrentqueue/concurrentqueue.h>)
#include <concurrentqueue/concurrentqueue.h>
#else
#include <concurrentqueue.h>
#endif
#endif

namespace ts = thread_system;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_between(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The job every benchmark queues: 8 bytes of payload, stored inline in the
// job_function (no allocation), running it does nothing observable.
struct tiny_job {
  std::uint64_t payload;
  void operator()() const noexcept { benchmark::DoNotOptimize(payload); }
};
static_assert(ts::job_function::stored_inline<tiny_job>);

ts::job_function make_job(std::uint64_t i) { return ts::job_function{tiny_job{i}}; }

// ---------------------------------------------------------------------------
// Adapters: one interface for every queue. Their calls are forced inline,
// for every queue alike, so the shim adds no call to any queue's operation.
// Each adapter keeps its queue on cache lines of its own (aligned, with the
// last line padded out), wherever the adapter lives - a stack frame next to
// the harness's counters, or a heap chunk next to someone else's - so no
// queue is measured with a neighbour's writes on its lines.
//   explicit A(std::size_t max_queued)  // most jobs queued at once (bounded capacity)
//   bool push(job_function&&)           // false: refused (full); the job is kept
//   bool pop(job_function&)
//   bool push_batch(std::span<job_function>)   // all or none
//   std::size_t pop_batch(std::span<job_function>)
// ---------------------------------------------------------------------------

template <typename Q>
Q make_native_queue(std::size_t max_queued) {
  if constexpr (std::is_same_v<Q, ts::bounded_queue>) {
    return Q(std::max<std::size_t>(max_queued, 2));
  } else {
    return Q();  // each queue in its default configuration
  }
}

template <ts::job_queue_model Q>
class native_adapter {
 public:
  explicit native_adapter(std::size_t max_queued) : queue_(make_native_queue<Q>(max_queued)) {}
  THREAD_SYSTEM_ALWAYS_INLINE bool push(ts::job_function&& job) {
    return static_cast<bool>(queue_.try_push(std::move(job)));
  }
  THREAD_SYSTEM_ALWAYS_INLINE bool pop(ts::job_function& out) { return queue_.try_pop(out); }
  THREAD_SYSTEM_ALWAYS_INLINE bool push_batch(std::span<ts::job_function> jobs) {
    return static_cast<bool>(queue_.push_batch(jobs));
  }
  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_batch(std::span<ts::job_function> out) { return queue_.pop_batch(out); }

 private:
  alignas(64) Q queue_;
  [[maybe_unused]] alignas(64) char end_ = 0;  // nothing else starts on the queue's last line
};

struct job_queue_adapter : native_adapter<ts::job_queue> {
  static constexpr const char* name = "job_queue";
  using native_adapter::native_adapter;
};
struct two_lock_job_queue_adapter : native_adapter<ts::two_lock_job_queue> {
  static constexpr const char* name = "two_lock_job_queue";
  using native_adapter::native_adapter;
};
struct bounded_queue_adapter : native_adapter<ts::bounded_queue> {
  static constexpr const char* name = "bounded_queue";
  using native_adapter::native_adapter;
};
struct lockfree_queue_adapter : native_adapter<ts::lockfree_queue> {
  static constexpr const char* name = "lockfree_queue";
  using native_adapter::native_adapter;
};
#if defined(THREAD_SYSTEM_BENCH_SHARDED)
struct sharded_queue_adapter : native_adapter<ts::sharded_queue> {
  static constexpr const char* name = "sharded_queue";
  using native_adapter::native_adapter;
};
#endif
#if defined(THREAD_SYSTEM_BENCH_ADAPTIVE)
struct adaptive_queue_adapter : native_adapter<ts::adaptive_job_queue> {
  static constexpr const char* name = "adaptive_job_queue";
  using native_adapter::native_adapter;
};
// Over the two-lock mutex side: the pools' adaptive injector.
struct two_lock_adaptive_queue_adapter : native_adapter<ts::two_lock_adaptive_job_queue> {
  static constexpr const char* name = "two_lock_adaptive_job_queue";
  using native_adapter::native_adapter;
};
#endif

// The baseline: one std::mutex, one std::deque, one lock per call (batch
// calls lock once per batch, like job_queue).
class mutex_deque_adapter {
 public:
  static constexpr const char* name = "mutex_deque";
  explicit mutex_deque_adapter(std::size_t /*max_queued*/) {}
  THREAD_SYSTEM_ALWAYS_INLINE bool push(ts::job_function&& job) {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
    return true;
  }
  THREAD_SYSTEM_ALWAYS_INLINE bool pop(ts::job_function& out) {
    std::lock_guard lock(mutex_);
    if (jobs_.empty()) return false;
    out = std::move(jobs_.front());
    jobs_.pop_front();
    return true;
  }
  THREAD_SYSTEM_ALWAYS_INLINE bool push_batch(std::span<ts::job_function> jobs) {
    std::lock_guard lock(mutex_);
    for (auto& job : jobs) jobs_.push_back(std::move(job));
    return true;
  }
  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_batch(std::span<ts::job_function> out) {
    std::lock_guard lock(mutex_);
    const std::size_t n = std::min(out.size(), jobs_.size());
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = std::move(jobs_.front());
      jobs_.pop_front();
    }
    return n;
  }

 private:
  alignas(64) std::mutex mutex_;
  std::deque<ts::job_function> jobs_;
  [[maybe_unused]] alignas(64) char end_ = 0;  // see the adapters' comment
};

#if defined(THREAD_SYSTEM_HAVE_MOODYCAMEL)
// moodycamel::ConcurrentQueue<job_function> without tokens (implicit
// producers), in its default initial size; enqueue() allocates blocks as
// needed, so it is unbounded like job_queue and lockfree_queue.
class moodycamel_adapter {
 public:
  static constexpr const char* name = "moodycamel";
  explicit moodycamel_adapter(std::size_t /*max_queued*/) {}
  THREAD_SYSTEM_ALWAYS_INLINE bool push(ts::job_function&& job) { return queue_.enqueue(std::move(job)); }
  THREAD_SYSTEM_ALWAYS_INLINE bool pop(ts::job_function& out) { return queue_.try_dequeue(out); }
  THREAD_SYSTEM_ALWAYS_INLINE bool push_batch(std::span<ts::job_function> jobs) {
    return queue_.enqueue_bulk(std::make_move_iterator(jobs.begin()), jobs.size());
  }
  THREAD_SYSTEM_ALWAYS_INLINE std::size_t pop_batch(std::span<ts::job_function> out) {
    return queue_.try_dequeue_bulk(out.begin(), out.size());
  }

 private:
  alignas(64) moodycamel::ConcurrentQueue<ts::job_function> queue_;
  [[maybe_unused]] alignas(64) char end_ = 0;  // see the adapters' comment
};
#endif

// ---------------------------------------------------------------------------
// Single-threaded latency: one thread, `ops_per_iteration` operations timed
// together (so the two clock reads cost < 0.1 ns per op); the untimed part
// refills or drains so every iteration starts from the same state.
// ns_per_op = total timed ns / total operations.
// ---------------------------------------------------------------------------
constexpr std::size_t ops_per_iteration = 1024;

template <typename A>
void drain(A& queue) {
  ts::job_function out;
  while (queue.pop(out)) {
  }
}

template <typename A>
void bm_enqueue_latency(benchmark::State& state) {
  A queue(ops_per_iteration);
  double total = 0;
  std::uint64_t ops = 0;
  for (auto _ : state) {
    const auto start = clock_type::now();
    for (std::size_t i = 0; i < ops_per_iteration; ++i) {
      bool ok = queue.push(make_job(i));
      benchmark::DoNotOptimize(ok);
    }
    const auto stop = clock_type::now();
    drain(queue);
    state.SetIterationTime(seconds_between(start, stop));
    total += seconds_between(start, stop);
    ops += ops_per_iteration;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(ops));
  state.counters["ns_per_op"] = ops == 0 ? 0.0 : total * 1e9 / static_cast<double>(ops);
}

template <typename A>
void bm_dequeue_latency(benchmark::State& state) {
  A queue(ops_per_iteration);
  double total = 0;
  std::uint64_t ops = 0;
  ts::job_function out;
  for (auto _ : state) {
    for (std::size_t i = 0; i < ops_per_iteration; ++i) {
      if (!queue.push(make_job(i))) state.SkipWithError("push refused");
    }
    const auto start = clock_type::now();
    for (std::size_t i = 0; i < ops_per_iteration; ++i) {
      bool ok = queue.pop(out);
      benchmark::DoNotOptimize(ok);
      benchmark::DoNotOptimize(out);
    }
    const auto stop = clock_type::now();
    state.SetIterationTime(seconds_between(start, stop));
    total += seconds_between(start, stop);
    ops += ops_per_iteration;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(ops));
  state.counters["ns_per_op"] = ops == 0 ? 0.0 : total * 1e9 / static_cast<double>(ops);
}

// One push immediately followed by one pop (queue stays near empty).
template <typename A>
void bm_pair_latency(benchmark::State& state) {
  A queue(ops_per_iteration);
  double total = 0;
  std::uint64_t ops = 0;
  ts::job_function out;
  for (auto _ : state) {
    const auto start = clock_type::now();
    for (std::size_t i = 0; i < ops_per_iteration; ++i) {
      bool pushed = queue.push(make_job(i));
      bool popped = queue.pop(out);
      benchmark::DoNotOptimize(pushed);
      benchmark::DoNotOptimize(popped);
      benchmark::DoNotOptimize(out);
    }
    const auto stop = clock_type::now();
    state.SetIterationTime(seconds_between(start, stop));
    total += seconds_between(start, stop);
    ops += ops_per_iteration;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(ops));
  state.counters["ns_per_op"] = ops == 0 ? 0.0 : total * 1e9 / static_cast<double>(ops);
}

// ---------------------------------------------------------------------------
// Batch push/pop: `jobs_per_iteration` jobs pushed in batches of `batch`,
// then popped in batches of `batch`; push and pop are timed separately
// (push_ns_per_job, pop_ns_per_job), the iteration time is their sum.
// Refilling the batch array with fresh jobs is untimed.
// ---------------------------------------------------------------------------
constexpr std::size_t jobs_per_batch_iteration = 8192;

template <typename A>
void bm_batch(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  const std::size_t batches = jobs_per_batch_iteration / batch;
  A queue(jobs_per_batch_iteration);
  std::vector<ts::job_function> in(jobs_per_batch_iteration);  // batches side by side
  std::vector<ts::job_function> out(batch);
  double push_total = 0;
  double pop_total = 0;
  std::uint64_t jobs = 0;
  std::uint64_t popped_total = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < jobs_per_batch_iteration; ++i) in[i] = make_job(i);
    const auto push_start = clock_type::now();
    for (std::size_t b = 0; b < batches; ++b) {
      bool ok = queue.push_batch(std::span<ts::job_function>(in).subspan(b * batch, batch));
      benchmark::DoNotOptimize(ok);
    }
    const auto push_stop = clock_type::now();
    std::size_t popped = 0;
    std::size_t empty_polls = 0;
    const auto pop_start = clock_type::now();
    // moodycamel may return a partial batch (it walks its sub-queues), so pop
    // until every job pushed in this iteration is back.
    while (popped < jobs_per_batch_iteration && empty_polls < 1000) {
      const std::size_t n = queue.pop_batch(out);
      benchmark::DoNotOptimize(out.data());
      popped += n;
      empty_polls += n == 0 ? 1 : 0;
    }
    const auto pop_stop = clock_type::now();
    if (popped != jobs_per_batch_iteration) state.SkipWithError("batch: not every job came back");
    popped_total += popped;
    state.SetIterationTime(seconds_between(push_start, push_stop) + seconds_between(pop_start, pop_stop));
    push_total += seconds_between(push_start, push_stop);
    pop_total += seconds_between(pop_start, pop_stop);
    jobs += jobs_per_batch_iteration;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(popped_total));
  const double n = jobs == 0 ? 1.0 : static_cast<double>(jobs);
  state.counters["push_ns_per_job"] = push_total * 1e9 / n;
  state.counters["pop_ns_per_job"] = pop_total * 1e9 / n;
  state.counters["ns_per_job"] = (push_total + pop_total) * 1e9 / n;
  state.counters["batch"] = static_cast<double>(batch);
}

// ---------------------------------------------------------------------------
// Producer/consumer throughput: P producers push `ops` jobs in total, C
// consumers pop (and run) them; timed from the "go" barrier until every job
// was consumed (see the header comment for the barrier protocol).
// bounded_queue gets a capacity of min(ops, 65536) jobs; a producer that finds
// it full yields and retries (full_retries counts those).
// ---------------------------------------------------------------------------
constexpr std::size_t pc_bounded_capacity = 65536;

template <typename A>
void bm_producer_consumer(benchmark::State& state) {
  const auto producers = static_cast<std::size_t>(state.range(0));
  const auto consumers = static_cast<std::size_t>(state.range(1));
  const auto ops = static_cast<std::size_t>(state.range(2));
  A queue(std::min(ops, pc_bounded_capacity));

  std::barrier<> sync(static_cast<std::ptrdiff_t>(producers + consumers + 1));
  // Each shared counter on a line of its own (consumers poll `consumed`).
  alignas(64) std::atomic<bool> quit{false};
  alignas(64) std::atomic<std::uint64_t> consumed{0};
  alignas(64) std::atomic<std::uint64_t> full_retries{0};
  alignas(64) std::atomic<std::uint64_t> empty_polls{0};

  auto producer = [&](std::size_t index) {
    const std::size_t share = ops / producers + (index < ops % producers ? 1 : 0);
    for (;;) {
      sync.arrive_and_wait();                            // ready
      sync.arrive_and_wait();                            // go
      if (quit.load(std::memory_order_relaxed)) return;  // set before "go" by the main thread
      std::uint64_t retries = 0;
      for (std::size_t i = 0; i < share; ++i) {
        ts::job_function job = make_job(i);
        while (!queue.push(std::move(job))) {  // full (bounded_queue only): the job is kept
          ++retries;
          std::this_thread::yield();
        }
      }
      full_retries.fetch_add(retries, std::memory_order_relaxed);
      sync.arrive_and_wait();  // done
    }
  };
  auto consumer = [&] {
    ts::job_function job;
    for (;;) {
      sync.arrive_and_wait();  // ready
      sync.arrive_and_wait();  // go
      if (quit.load(std::memory_order_relaxed)) return;
      std::uint64_t local = 0;
      std::uint64_t polls = 0;
      // Stop only when the shared count says every job was consumed: no
      // reliance on any queue's "false means empty" guarantee. A consumer
      // publishes its count each time it finds the queue empty, so the last
      // job's consumer publishes on its next (failing) pop.
      for (;;) {
        if (queue.pop(job)) {
          job();
          ++local;
          continue;
        }
        ++polls;
        if (local != 0) {
          consumed.fetch_add(local, std::memory_order_relaxed);
          local = 0;
        }
        if (consumed.load(std::memory_order_relaxed) >= ops) break;
        std::this_thread::yield();
      }
      empty_polls.fetch_add(polls, std::memory_order_relaxed);
      sync.arrive_and_wait();  // done
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(producers + consumers);
  for (std::size_t p = 0; p < producers; ++p) threads.emplace_back(producer, p);
  for (std::size_t c = 0; c < consumers; ++c) threads.emplace_back(consumer);

  // One untimed warm-up round: the queues reach their working-set size
  // (job_queue's ring, moodycamel's blocks, lockfree_queue's node pool).
  sync.arrive_and_wait();
  sync.arrive_and_wait();
  sync.arrive_and_wait();
  consumed.store(0, std::memory_order_relaxed);
  full_retries.store(0, std::memory_order_relaxed);
  empty_polls.store(0, std::memory_order_relaxed);

  std::uint64_t items = 0;
  for (auto _ : state) {
    consumed.store(0, std::memory_order_relaxed);  // ordered before "go" by the barrier
    sync.arrive_and_wait();                        // ready: every thread parked or arriving
    const auto start = clock_type::now();
    sync.arrive_and_wait();  // go
    sync.arrive_and_wait();  // done: every job consumed
    const auto stop = clock_type::now();
    state.SetIterationTime(seconds_between(start, stop));
    items += consumed.load(std::memory_order_relaxed);
  }
  quit.store(true, std::memory_order_relaxed);
  sync.arrive_and_wait();  // ready
  sync.arrive_and_wait();  // go: threads see quit and return
  for (auto& t : threads) t.join();

  state.SetItemsProcessed(static_cast<std::int64_t>(items));
  const auto iterations = static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["producers"] = static_cast<double>(producers);
  state.counters["consumers"] = static_cast<double>(consumers);
  state.counters["oversubscribed"] = producers + consumers > std::thread::hardware_concurrency() ? 1 : 0;
  state.counters["full_retries"] =
      static_cast<double>(full_retries.load(std::memory_order_relaxed)) / iterations;  // threads joined: a count
  state.counters["empty_polls"] =
      static_cast<double>(empty_polls.load(std::memory_order_relaxed)) / iterations;  // threads joined: a count
}

// ---------------------------------------------------------------------------
// Contention: n threads (Google Benchmark's), each doing push-then-pop pairs
// on one shared queue; items = pairs. A thread's pop retries until it gets a
// job (not necessarily its own): between its push and its pop the queue holds
// at least one job, but bounded_queue may report empty while another
// producer's claimed cell is still being written; pop_retries counts those
// retries per thread (push_retries: see below), so every counted pair
// really is one push plus one pop.
// ---------------------------------------------------------------------------
template <typename A>
void bm_contention(benchmark::State& state) {
  static std::unique_ptr<A> shared;  // one per queue type; set up by thread 0
  if (state.thread_index() == 0) shared = std::make_unique<A>(4096);
  // The loop's start is a barrier across the benchmark threads, so every
  // thread sees `shared` set. At most n jobs are queued at once, yet
  // bounded_queue can refuse a push with queue_full when a consumer that
  // claimed a cell one lap (capacity positions) earlier has not released it
  // yet (documented; frequent when threads outnumber cores): the push is
  // retried, counted in push_retries.
  std::uint64_t pop_retries = 0;
  std::uint64_t push_retries = 0;
  ts::job_function out;
  std::uint64_t i = 0;
  for (auto _ : state) {
    ts::job_function job = make_job(++i);
    while (!shared->push(std::move(job))) {  // refused: the job is kept
      ++push_retries;
      if ((push_retries & 63) == 0) std::this_thread::yield();
    }
    while (!shared->pop(out)) {
      ++pop_retries;
      if ((pop_retries & 63) == 0) std::this_thread::yield();  // let a descheduled writer finish
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["pop_retries"] = benchmark::Counter(static_cast<double>(pop_retries), benchmark::Counter::kAvgThreads);
  state.counters["push_retries"] =
      benchmark::Counter(static_cast<double>(push_retries), benchmark::Counter::kAvgThreads);
  state.counters["oversubscribed"] =
      benchmark::Counter(static_cast<unsigned>(state.threads()) > std::thread::hardware_concurrency() ? 1.0 : 0.0,
                         benchmark::Counter::kAvgThreads);
  // The loop's end is also a barrier: no thread uses `shared` any more.
  if (state.thread_index() == 0) shared.reset();
}

// ---------------------------------------------------------------------------
// Memory per queued job: resident memory (bench::resident_bytes) before constructing the queue and after
// filling it with `count` tiny jobs; (after - before) / count. So it includes
// the queue's own structures (bounded_queue: a ring of exactly bit_ceil(count)
// cells, allocated up front; job_queue: its doubled ring). malloc_trim(0)
// runs before each reading so memory freed by earlier benchmarks (or by a
// ring's growth) is not counted. RSS moves in pages (4 KiB), so for 100 or
// 1K jobs the figure is coarse (+-4096/count bytes per page); trust 10K and
// 100K. One iteration per run; use repetitions for a spread.
// ---------------------------------------------------------------------------
void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

template <typename A>
void bm_memory(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0));
  double bytes_per_job = 0;
  for (auto _ : state) {
    release_free_memory();
    const double before = thread_system::bench::resident_bytes();
    const auto start = clock_type::now();
    {
      auto queue = std::make_unique<A>(count);
      for (std::size_t i = 0; i < count; ++i) {
        if (!queue->push(make_job(i))) state.SkipWithError("push refused");
      }
      const auto stop = clock_type::now();
      release_free_memory();
      const double after = thread_system::bench::resident_bytes();
      bytes_per_job = (after - before) / static_cast<double>(count);
      benchmark::DoNotOptimize(queue.get());
      state.SetIterationTime(seconds_between(start, stop));
    }
    release_free_memory();
  }
  state.counters["bytes_per_job"] = bytes_per_job;
  state.counters["jobs"] = static_cast<double>(count);
}

// ---------------------------------------------------------------------------
// Registration: grouped by workload, the queues next to each other, so a run
// without random interleaving still runs A B C ... for each configuration.
// For repetitions, --benchmark_enable_random_interleaving=true interleaves
// repetitions of different benchmarks (BENCHMARKING.md: "interleaved").
// ---------------------------------------------------------------------------
template <typename... A>
struct queue_list {};

using all_queues =
    queue_list<job_queue_adapter, two_lock_job_queue_adapter, bounded_queue_adapter, lockfree_queue_adapter,
#if defined(THREAD_SYSTEM_BENCH_SHARDED)
               sharded_queue_adapter,
#endif
#if defined(THREAD_SYSTEM_BENCH_ADAPTIVE)
               adaptive_queue_adapter, two_lock_adaptive_queue_adapter,
#endif
#if defined(THREAD_SYSTEM_HAVE_MOODYCAMEL)
               moodycamel_adapter,
#endif
               mutex_deque_adapter>;

template <typename Configure, typename... A>
void for_each_queue(queue_list<A...>, Configure configure) {
  (configure(static_cast<A*>(nullptr)), ...);
}

std::string name_of(const char* workload, const char* queue) { return std::string(workload) + "/" + queue; }

void register_all() {
  // Single-threaded latency.
  for_each_queue(all_queues{}, [](auto* tag) {
    using A = std::remove_pointer_t<decltype(tag)>;
    benchmark::RegisterBenchmark(name_of("latency_enqueue", A::name).c_str(), bm_enqueue_latency<A>)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  });
  for_each_queue(all_queues{}, [](auto* tag) {
    using A = std::remove_pointer_t<decltype(tag)>;
    benchmark::RegisterBenchmark(name_of("latency_dequeue", A::name).c_str(), bm_dequeue_latency<A>)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  });
  for_each_queue(all_queues{}, [](auto* tag) {
    using A = std::remove_pointer_t<decltype(tag)>;
    benchmark::RegisterBenchmark(name_of("latency_pair", A::name).c_str(), bm_pair_latency<A>)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  });
  // Batch.
  for (const std::int64_t batch : {8, 32, 128, 512, 1024}) {
    for_each_queue(all_queues{}, [batch](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      benchmark::RegisterBenchmark(name_of("batch", A::name).c_str(), bm_batch<A>)
          ->ArgName("batch")
          ->Arg(batch)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    });
  }
  // Producer/consumer.
  for (const std::int64_t ops : {10'000, 1'000'000}) {
    for (const std::int64_t threads : {1, 2, 4, 8}) {
      for_each_queue(all_queues{}, [ops, threads](auto* tag) {
        using A = std::remove_pointer_t<decltype(tag)>;
        benchmark::RegisterBenchmark(name_of("pc", A::name).c_str(), bm_producer_consumer<A>)
            ->ArgNames({"P", "C", "ops"})
            ->Args({threads, threads, ops})
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      });
    }
  }
  // Contention.
  for (const int threads : {1, 2, 4, 8, 16}) {
    for_each_queue(all_queues{}, [threads](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      benchmark::RegisterBenchmark(name_of("contention", A::name).c_str(), bm_contention<A>)
          ->Threads(threads)
          ->UseRealTime()
          ->Unit(benchmark::kNanosecond);
    });
  }
  // Memory.
  for (const std::int64_t count : {100, 1'000, 10'000, 100'000}) {
    for_each_queue(all_queues{}, [count](auto* tag) {
      using A = std::remove_pointer_t<decltype(tag)>;
      benchmark::RegisterBenchmark(name_of("memory", A::name).c_str(), bm_memory<A>)
          ->ArgName("jobs")
          ->Arg(count)
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
