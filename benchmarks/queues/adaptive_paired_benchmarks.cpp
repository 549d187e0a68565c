// The adaptive queue against its two fixed strategies, measured in pairs.
//
// Goal (docs/PERFORMANCE.md): adaptive_job_queue in ADAPTIVE mode never
// worse than 0.9x the better of its two strategies on the same workload. On
// a shared 2-core machine the same queue's throughput spans 1.5-2x between
// separate benchmark runs, so comparing medians of separate runs (as the
// pc/ and contention/ tables do) leaves a 0.9 threshold to chance. Here
// every round runs the same workload on each variant back to back, in an
// order that changes from round to round (see bm_adaptive_paired), and the
// figure is the median over rounds of the per-round ratio: drift of the
// machine's load between rounds cancels out, and every variant runs as
// often first as last, and after each other variant as often.
//
// Variants (built once per benchmark run and kept across rounds, so the
// adaptive queue keeps what it has learned):
//   adaptive         adaptive_job_queue(ADAPTIVE)
//   mutex_mode       adaptive_job_queue(FORCE_MUTEX)     - its two strategies
//   lockfree_mode    adaptive_job_queue(FORCE_LOCKFREE)
//   job_queue        job_queue                           - the queues behind them
//   lockfree_queue   lockfree_queue
//   job_queue twin   a second job_queue                  - controls: same type,
//   adaptive twin    a second adaptive_job_queue(ADAPTIVE) same code
// Each queue sits alone in page-aligned memory, all at the same offset into
// their page, and that offset moves by 7 cache lines from one benchmark run
// to the next (see `placed`).
// Counters. The ratios are medians over the run's rounds of per-round time
// ratios; for the vs_* ones > 1 means the adaptive queue moved more jobs
// per second:
//   vs_better_mode   min(t_mutex_mode, t_lockfree_mode) / t_adaptive (the goal)
//   vs_mutex_mode, vs_lockfree_mode
//   vs_better_queue  min(t_job_queue, t_lockfree_queue) / t_adaptive: the
//                    goal's ratio plus what routing through
//                    adaptive_job_queue costs over the bare queues
//   vs_job_queue, vs_lockfree_queue
//   twin_job_queue   t_job_queue / t_job_queue_twin and
//   twin_adaptive    t_adaptive / t_adaptive_twin (> 1: the twin moved more
//                    jobs per second): what the method reads between two
//                    instances of one queue, the resolution of every other
//                    ratio here (the two ADAPTIVE queues learn on their own,
//                    so they compare alike only while both stay on one
//                    queue: see twin_switches)
//   switches         the adaptive queue's switches during the run
//   twin_switches    the adaptive twin's
//   on_lockfree      1 if the adaptive queue ended the run on the lock-free queue
//   page_offset      where in their page this run placed the queues
// The iteration time is the adaptive queue's time for the round.
//
// Each workload's loop is a function of its own per queue type (noinline):
// whether a loop is inlined into its caller, and how, is left to the
// compiler's heuristics otherwise, and differs between queue types; code
// placed differently alone moved single-thread ratios by 10-30%.
//
// Workloads (the same three kinds as queue_benchmarks.cpp):
//   pair/ops:N                 one thread, N push-then-pop pairs
//   pc/P:p/C:c/ops:N           p producers push N jobs in total, c consumers
//                              pop (and run) them; timed from a start barrier
//                              until every job was consumed
//   contention/threads:n/ops:N n threads, each doing N/n push-then-pop pairs
// The threads are started once per benchmark run and serve every variant's
// turn; each turn releases them together with a barrier and ends at a second
// one. A turn's time runs from the first thread's start to the last thread's
// end, read by the threads themselves. Waiting loops yield, as in
// queue_benchmarks.cpp.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "thread_system/core/job_function.hpp"
#include "thread_system/queues/adaptive_job_queue.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"

namespace ts = thread_system;

namespace {

using clock_type = std::chrono::steady_clock;

struct tiny_job {
  std::uint64_t payload;
  void operator()() const noexcept { benchmark::DoNotOptimize(payload); }
};
static_assert(ts::job_function::stored_inline<tiny_job>);

template <typename Q>
THREAD_SYSTEM_ALWAYS_INLINE bool push(Q& q, std::uint64_t i) {
  return static_cast<bool>(q.try_push(ts::job_function{tiny_job{i}}));
}

enum class kind { pair, pc, contention };

struct workload {
  kind what;
  std::size_t producers;  // pc: producers; contention: threads; pair: 1
  std::size_t consumers;  // pc only
  std::size_t ops;        // jobs (pc) or push+pop pairs (pair, contention)
};

// One thread, `ops` push-then-pop pairs.
template <typename Q>
[[gnu::noinline]] double run_pair(Q& q, std::size_t ops) {
  ts::job_function out;
  const auto start = clock_type::now();
  for (std::size_t i = 0; i < ops; ++i) {
    bool pushed = push(q, i);
    bool popped = q.try_pop(out);
    benchmark::DoNotOptimize(pushed);
    benchmark::DoNotOptimize(popped);
  }
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// A queue alone in a page-aligned block of its own, constructed at byte
// `offset` of the block's first page. Where a queue falls within a 4 KiB
// page matters on the development machine: in ad-hoc single-thread
// push/pop loops (not in the repository), two instances of the same queue
// type allocated with plain `new` measured up to 0.76x of each other in
// one process and 1.0x in the next, while instances at the same page
// offset stayed within a few percent of each other. (A likely cause: a
// load whose address matches an earlier store's modulo 4 KiB waits for
// that store.) So every variant of a benchmark run is placed at the same
// offset, and the offset changes from run to run, so that no queue keeps a
// lucky or unlucky placement; the twin counters show what is left.
template <typename Q>
class placed {
  static_assert(alignof(Q) <= 64, "offsets move in steps of one 64-byte line");

 public:
  static constexpr std::size_t page = 4096;
  template <typename... Args>
  explicit placed(std::size_t offset, Args&&... args)
      : block_(static_cast<std::byte*>(std::aligned_alloc(page, block_size(offset)))) {
    if (block_ == nullptr) throw std::bad_alloc();
    try {
      queue = new (block_ + offset) Q(std::forward<Args>(args)...);
    } catch (...) {
      std::free(block_);
      throw;
    }
  }
  placed(const placed&) = delete;
  placed& operator=(const placed&) = delete;
  ~placed() {
    queue->~Q();
    std::free(block_);
  }
  Q* queue;

 private:
  // Whole pages, with the queue's last line alone in them.
  static std::size_t block_size(std::size_t offset) { return (offset + sizeof(Q) + 64 + page - 1) / page * page; }
  std::byte* block_;
};

// The page offset of the next benchmark run's queues: steps of 7 cache
// lines, so successive runs (workloads, repetitions) cover all 64 line
// offsets of a page before one repeats.
std::size_t next_page_offset() {
  static std::size_t runs = 0;  // benchmark runs are sequential (one main thread)
  return (runs++ * 7 % 64) * 64;
}

// The seven variants (see the header comment).
struct variants {
  static constexpr std::size_t count = 7;  // prime: see bm_adaptive_paired
  enum : std::size_t {
    adaptive,
    mutex_mode,
    lockfree_mode,
    bare_job_queue,
    bare_lockfree_queue,
    job_queue_twin,
    adaptive_twin,
  };
  explicit variants(std::size_t offset)
      : page_offset(offset),
        adaptive_queue(offset, ts::queue_strategy::ADAPTIVE),
        mutex_mode_queue(offset, ts::queue_strategy::FORCE_MUTEX),
        lockfree_mode_queue(offset, ts::queue_strategy::FORCE_LOCKFREE),
        job_queue_a(offset),
        lockfree_a(offset),
        job_queue_b(offset),
        adaptive_b(offset, ts::queue_strategy::ADAPTIVE) {}

  const std::size_t page_offset;
  placed<ts::adaptive_job_queue> adaptive_queue;
  placed<ts::adaptive_job_queue> mutex_mode_queue;
  placed<ts::adaptive_job_queue> lockfree_mode_queue;
  placed<ts::job_queue> job_queue_a;
  placed<ts::lockfree_queue> lockfree_a;
  placed<ts::job_queue> job_queue_b;
  placed<ts::adaptive_job_queue> adaptive_b;

  // Calls f(queue) with variant `v`'s queue (each call site is compiled
  // for each queue type, so every queue runs its own inlined code; a twin
  // runs the very code of its original).
  template <typename F>
  THREAD_SYSTEM_ALWAYS_INLINE void with(std::size_t v, F&& f) {
    switch (v) {
      case adaptive:
        f(*adaptive_queue.queue);
        break;
      case mutex_mode:
        f(*mutex_mode_queue.queue);
        break;
      case lockfree_mode:
        f(*lockfree_mode_queue.queue);
        break;
      case bare_job_queue:
        f(*job_queue_a.queue);
        break;
      case bare_lockfree_queue:
        f(*lockfree_a.queue);
        break;
      case job_queue_twin:
        f(*job_queue_b.queue);
        break;
      default:
        f(*adaptive_b.queue);
        break;
    }
  }
};

// A producer's share of a pc run: `share` jobs.
template <typename Q>
[[gnu::noinline]] void produce(Q& q, std::size_t share) {
  for (std::size_t i = 0; i < share; ++i) {
    while (!push(q, i)) std::this_thread::yield();  // (unbounded queues: never refused)
  }
}

// A consumer of a pc run: pops and runs jobs until `consumed` reaches `ops`.
// It publishes its count each time it finds the queue empty, so the last
// job's consumer publishes on its next (failing) pop.
template <typename Q>
[[gnu::noinline]] void consume(Q& q, std::atomic<std::uint64_t>& consumed, std::size_t ops) {
  ts::job_function job;
  std::uint64_t local = 0;
  for (;;) {
    if (q.try_pop(job)) {
      job();
      ++local;
      continue;
    }
    if (local != 0) {
      consumed.fetch_add(local, std::memory_order_relaxed);  // a count; the barrier orders the rest
      local = 0;
    }
    if (consumed.load(std::memory_order_relaxed) >= ops) return;  // a count, see above
    std::this_thread::yield();
  }
}

// A contention thread's share: `share` push-then-pop pairs.
template <typename Q>
[[gnu::noinline]] void push_pop_pairs(Q& q, std::size_t share) {
  ts::job_function out;
  std::uint64_t retries = 0;
  for (std::size_t i = 0; i < share; ++i) {
    while (!push(q, i)) std::this_thread::yield();
    while (!q.try_pop(out)) {  // another thread took ours; one is queued for us soon
      if ((++retries & 63) == 0) std::this_thread::yield();
    }
  }
}

// The benchmark's threads, started once per run and reused for every
// variant's turn: each turn, the main thread names the variant, releases
// them with a barrier and waits for them at a second one.
class crew {
 public:
  crew(variants& queues, const workload& w)
      : queues_(queues), w_(w), sync_(static_cast<std::ptrdiff_t>(size(w) + 1)), spans_(size(w)) {
    threads_.reserve(size(w));
    for (std::size_t t = 0; t < size(w); ++t) threads_.emplace_back([this, t] { loop(t); });
  }
  crew(const crew&) = delete;
  crew& operator=(const crew&) = delete;
  ~crew() {
    quit_ = true;  // read by the threads after the barrier below
    sync_.arrive_and_wait();
    for (auto& t : threads_) t.join();
  }

  // Runs the workload once on variant `v`; returns the seconds from the
  // first thread's start to the last thread's end, as the threads
  // themselves read the clock. (Not the main thread's clock around the
  // barriers: with more threads than cores the main thread may get a CPU
  // only after the others finished, or long after, and its readings would
  // then say nothing about the run.)
  double run(std::size_t v) {
    variant_ = v;                                   // the barrier publishes it
    consumed_.store(0, std::memory_order_relaxed);  // ordered before the threads' start by the barrier
    sync_.arrive_and_wait();                        // start
    sync_.arrive_and_wait();                        // done: the threads' readings are visible
    clock_type::time_point first = spans_[0].start;
    clock_type::time_point last = spans_[0].end;
    for (const auto& turn : spans_) {
      first = std::min(first, turn.start);
      last = std::max(last, turn.end);
    }
    return std::chrono::duration<double>(last - first).count();
  }

 private:
  static std::size_t size(const workload& w) { return w.what == kind::pc ? w.producers + w.consumers : w.producers; }

  void loop(std::size_t t) {
    for (;;) {
      sync_.arrive_and_wait();  // start
      if (quit_) return;
      spans_[t].start = clock_type::now();
      queues_.with(variant_, [&](auto& q) { work(q, t); });
      spans_[t].end = clock_type::now();
      sync_.arrive_and_wait();  // done
    }
  }

  template <typename Q>
  void work(Q& q, std::size_t t) {
    const std::size_t sharers = w_.producers;  // producers (pc) or threads (contention)
    const std::size_t share = t < sharers ? w_.ops / sharers + (t < w_.ops % sharers ? 1 : 0) : 0;
    if (w_.what == kind::contention) {
      push_pop_pairs(q, share);
    } else if (t < w_.producers) {
      produce(q, share);
    } else {
      consume(q, consumed_, w_.ops);
    }
  }

  variants& queues_;
  const workload w_;
  std::barrier<> sync_;
  // Each thread's start and end of its work in the current turn, on lines
  // of their own; written by that thread, read by the main thread after the
  // "done" barrier.
  struct alignas(64) work_span {
    clock_type::time_point start;
    clock_type::time_point end;
  };
  std::vector<work_span> spans_;
  std::vector<std::thread> threads_;
  std::size_t variant_ = 0;  // written by the main thread between barriers
  bool quit_ = false;        // likewise
  alignas(64) std::atomic<std::uint64_t> consumed_{0};
};

// One run of the workload on variant `v`.
double run_once(variants& queues, crew* threads, const workload& w, std::size_t v) {
  if (w.what != kind::pair) return threads->run(v);
  double seconds = 0;
  queues.with(v, [&](auto& q) { seconds = run_pair(q, w.ops); });
  return seconds;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bm_adaptive_paired(benchmark::State& state, workload w) {
  auto queues = std::make_unique<variants>(next_page_offset());
  std::unique_ptr<crew> threads;
  if (w.what != kind::pair) threads = std::make_unique<crew>(*queues, w);
  constexpr std::size_t count = variants::count;
  // Untimed warm-up: every queue reaches its working-set size.
  for (std::size_t v = 0; v < count; ++v) run_once(*queues, threads.get(), w, v);

  // Per-round ratios (see the header comment for their direction).
  struct ratio {
    const char* name;
    std::vector<double> rounds;
  };
  std::array<ratio, 8> ratios{{{"vs_better_mode", {}},
                               {"vs_mutex_mode", {}},
                               {"vs_lockfree_mode", {}},
                               {"vs_better_queue", {}},
                               {"vs_job_queue", {}},
                               {"vs_lockfree_queue", {}},
                               {"twin_job_queue", {}},
                               {"twin_adaptive", {}}}};
  std::size_t round = 0;
  for (auto _ : state) {
    std::array<double, count> t{};
    for (std::size_t k = 0; k < count; ++k) {
      // Rotating order with a stride that changes every `count` rounds:
      // `count` is prime, so every stride gives a permutation, and over
      // count * (count - 1) rounds each variant runs in each position and
      // right after each other variant equally often (what ran just before
      // - a lock-free run that left a large node pool, say - is no longer
      // always the same for a given variant).
      const std::size_t stride = 1 + (round / count) % (count - 1);
      const std::size_t v = (round + k * stride) % count;
      t[v] = std::max(run_once(*queues, threads.get(), w, v), 1e-12);
    }
    ++round;
    state.SetIterationTime(t[variants::adaptive]);
    const double a = t[variants::adaptive];
    const double mutex_mode = t[variants::mutex_mode];
    const double lockfree_mode = t[variants::lockfree_mode];
    const double job_queue = t[variants::bare_job_queue];
    const double lockfree_queue = t[variants::bare_lockfree_queue];
    ratios[0].rounds.push_back(std::min(mutex_mode, lockfree_mode) / a);
    ratios[1].rounds.push_back(mutex_mode / a);
    ratios[2].rounds.push_back(lockfree_mode / a);
    ratios[3].rounds.push_back(std::min(job_queue, lockfree_queue) / a);
    ratios[4].rounds.push_back(job_queue / a);
    ratios[5].rounds.push_back(lockfree_queue / a);
    ratios[6].rounds.push_back(job_queue / t[variants::job_queue_twin]);
    ratios[7].rounds.push_back(a / t[variants::adaptive_twin]);
  }
  threads.reset();
  for (auto& r : ratios) state.counters[r.name] = median(std::move(r.rounds));
  const auto statistics = queues->adaptive_queue.queue->get_statistics();
  state.counters["switches"] = static_cast<double>(statistics.switches);
  state.counters["twin_switches"] = static_cast<double>(queues->adaptive_b.queue->get_statistics().switches);
  state.counters["on_lockfree"] = statistics.current_strategy == ts::queue_strategy::FORCE_LOCKFREE ? 1.0 : 0.0;
  state.counters["page_offset"] = static_cast<double>(queues->page_offset);
  state.SetItemsProcessed(static_cast<std::int64_t>(w.ops) * state.iterations());
}

// Rounds per run: enough for a median of per-round ratios while the slowest
// variant (the lock-free queue, 5-10x slower under contention on 2 cores)
// keeps a run of the 1M-job workloads to a few seconds.
int register_paired() {
  auto add = [](const std::string& name, workload w, benchmark::IterationCount rounds) {
    benchmark::RegisterBenchmark(("adaptive_paired/" + name).c_str(),
                                 [w](benchmark::State& state) { bm_adaptive_paired(state, w); })
        ->Iterations(rounds)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  };
  add("pair/ops:100000", {kind::pair, 1, 0, 100'000}, 31);
  for (const std::size_t ops : {10'000, 1'000'000}) {
    for (const std::size_t n : {1, 2, 4, 8}) {
      add("pc/P:" + std::to_string(n) + "/C:" + std::to_string(n) + "/ops:" + std::to_string(ops),
          {kind::pc, n, n, ops}, ops > 100'000 ? 7 : 51);
    }
  }
  for (const std::size_t n : {1, 2, 4, 8, 16}) {
    add("contention/threads:" + std::to_string(n) + "/ops:200000", {kind::contention, n, 0, 200'000}, 21);
  }
  return 0;
}

[[maybe_unused]] const int registered = register_paired();

}  // namespace
