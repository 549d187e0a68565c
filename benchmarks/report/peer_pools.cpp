// The report's peer benchmarks: one set of workloads, run over Thread System
// and its peers in the same process, each given the same number of worker
// threads (see /work/shared/BENCHMARKING.md):
//
//   thread_system  thread_system::thread_pool (enqueue)
//   onetbb         tbb::task_arena(n, 0).enqueue, global_control(n + 1) so
//                  oneTBB does not cap itself below n workers
//   boost_asio     boost::asio::thread_pool(n) + post
//   openmp         #pragma omp parallel num_threads(n) / single / task: the
//                  thread creating the tasks is one of the n (so producers:1
//                  only, and the fork of the team is part of every figure)
//   std_async      std::async(std::launch::async): one thread per job, no
//                  pool; small job counts; registered with workers:n only
//   naive          a std::mutex + std::condition_variable + std::deque of
//                  std::function pool written below (the seed's "Custom (naive)")
//
// Benchmark names: <workload>/<library>/<param>:<value>/...
//   throughput/<lib>/job_ns:J/workers:W/producers:P  jobs/s, wall clock from
//       the first submit until the last job finished (a counter the jobs
//       increment; the submitting thread waits on it by yielding, the same
//       for every library). Extra producers are threads parked on a barrier
//       (their wake-up is inside the timed region).
//   latency/<lib>/workers:W          submit->start on an idle pool (p50/p95/p99/max ns, and the
//                                    process's CPU over the test, % of a core); <lib> also
//                                    thread_system_idle_wait (pool_options::idle_wait 1 ms)
//   create/<lib>/workers:W           construct + start + stop/join (own-thread pools only)
//   memory_per_worker/<lib>/workers:W  RSS delta / W with all W threads alive (stacks included)
//   idle_cpu/<lib>/workers:W         CPU% of the whole process over 0.5 s with an idle pool
//   queued_bytes/<lib>/jobs:N        RSS delta / N with N jobs queued behind a blocked worker
//   long_jobs/<lib>/job_us:J/workers:W  W x 4 jobs of J us (1 ms, 10 ms): efficiency against
//       the ideal J x 4 and the workers' CPU; the caller sleeps on the count
//   million/<lib>/workers:W          1 000 000 empty jobs from one producer: wall time and the
//       CPU of the process minus the submitting thread's (the workers')
//   startup/<lib>/workers:W          construct -> first job started, -> all W workers in a job
//   startup_memory/<lib>/workers:8   RSS delta and time at each start-up stage (created, first
//       job, all workers in a job, after 100 000 jobs)
//   alloc_jobs/<lib>/bytes:B/workers:W  jobs that malloc B bytes, touch each page, free; jobs/s
//       and the p50/p99 run time of a sampled job
//
// Which configurations are registered depends on THREAD_SYSTEM_REPORT_MODE
// (smoke | quick | full, default quick); scripts/report.py sets it. Memory,
// start-up memory, idle CPU and queued bytes are meant to run one benchmark per process (the
// driver does that), so threads and heap left by earlier runs do not count.
// RSS is read from /proc/self/smaps_rollup (bench::resident_bytes): VmRSS is
// approximate on current kernels.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "../workloads.hpp"
#include "thread_system/pools/thread_pool.hpp"

#if defined(THREAD_SYSTEM_HAVE_TBB)
#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#endif
#if defined(THREAD_SYSTEM_HAVE_BOOST_ASIO)
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#endif
#if defined(THREAD_SYSTEM_HAVE_OPENMP)
#include <omp.h>
#endif

namespace ts = thread_system;
namespace tb = thread_system::bench;

namespace {

// ---- helpers ------------------------------------------------------------------

using counter_t = std::atomic<std::uint64_t>;

void wait_for_count(const counter_t& counter, std::uint64_t target) {
  while (counter.load(std::memory_order_acquire) < target) std::this_thread::yield();
}

bool wait_for_count_for(const counter_t& counter, std::uint64_t target, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (counter.load(std::memory_order_acquire) < target) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

/// CPU seconds of the calling thread.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

std::size_t hardware_threads() { return std::max<std::size_t>(2, std::thread::hardware_concurrency()); }

/// A gate that jobs block on (used to hold workers busy while measuring).
struct gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [this] { return open; });
  }
  void release() {
    {
      std::lock_guard lock(m);
      open = true;
    }
    cv.notify_all();
  }
};

// ---- the pools: one interface ---------------------------------------------------
//   explicit P(std::size_t workers);
//   template <class F> bool submit(F&& f);  // false: refused
//   static constexpr const char* name;
//   static constexpr bool owns_threads;     // threads created/joined by this object

struct thread_system_pool {
  static constexpr const char* name = "thread_system";
  static constexpr bool owns_threads = true;
  explicit thread_system_pool(std::size_t n, const ts::pool_options& options = {}) : pool{n, options} {}
  template <typename F>
  bool submit(F&& f) {
    return static_cast<bool>(pool.enqueue(std::forward<F>(f)));
  }
  ts::thread_pool pool;
};

// Thread System with pool_options::idle_wait = 1 ms (latency rows only):
// workers still poll, yielding, when the next sample comes 500 us after the
// last - the trade OpenMP's spinning team makes; the rows' cpu_percent
// shows its price.
struct thread_system_idle_wait_pool : thread_system_pool {
  static constexpr const char* name = "thread_system_idle_wait";
  explicit thread_system_idle_wait_pool(std::size_t n) : thread_system_pool(n, options()) {}
  static ts::pool_options options() {
    ts::pool_options o;
    o.idle_wait = std::chrono::milliseconds(1);
    return o;
  }
};

#if defined(THREAD_SYSTEM_HAVE_TBB)
struct onetbb_pool {
  static constexpr const char* name = "onetbb";
  static constexpr bool owns_threads = false;  // workers live in oneTBB's global market
  explicit onetbb_pool(std::size_t n)
      : limit{tbb::global_control::max_allowed_parallelism, n + 1}, arena{static_cast<int>(n), 0} {
    arena.initialize();
  }
  template <typename F>
  bool submit(F&& f) {
    arena.enqueue(std::forward<F>(f));
    return true;
  }
  tbb::global_control limit;
  tbb::task_arena arena;
};
#endif

#if defined(THREAD_SYSTEM_HAVE_BOOST_ASIO)
struct boost_asio_pool {
  static constexpr const char* name = "boost_asio";
  static constexpr bool owns_threads = true;
  explicit boost_asio_pool(std::size_t n) : pool{n} {}
  ~boost_asio_pool() { pool.join(); }
  boost_asio_pool(const boost_asio_pool&) = delete;
  boost_asio_pool& operator=(const boost_asio_pool&) = delete;
  template <typename F>
  bool submit(F&& f) {
    boost::asio::post(pool, std::forward<F>(f));
    return true;
  }
  boost::asio::thread_pool pool;
};
#endif

/// The seed's "Custom (naive)": one mutex, one condition variable, a deque of
/// std::function; notify_one per job.
class naive_pool {
 public:
  static constexpr const char* name = "naive";
  static constexpr bool owns_threads = true;
  explicit naive_pool(std::size_t n) {
    threads_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
  }
  ~naive_pool() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  naive_pool(const naive_pool&) = delete;
  naive_pool& operator=(const naive_pool&) = delete;
  template <typename F>
  bool submit(F&& f) {
    {
      std::lock_guard lock(m_);
      jobs_.emplace_back(std::forward<F>(f));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stop_ and nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

/// std::async: a thread per job. The futures are kept until clear() (their
/// destructors join), which the benchmark calls after the last job ran.
class std_async_pool {
 public:
  // The interface every peer has; this one is driven by its own benchmarks.
  [[maybe_unused]] static constexpr const char* name = "std_async";
  [[maybe_unused]] static constexpr bool owns_threads = false;
  explicit std_async_pool(std::size_t /*n*/) {}
  template <typename F>
  bool submit(F&& f) {
    auto fut = std::async(std::launch::async, std::forward<F>(f));
    std::lock_guard lock(m_);
    futures_.push_back(std::move(fut));
    return true;
  }
  void clear() {
    std::lock_guard lock(m_);
    futures_.clear();
  }

 private:
  std::mutex m_;
  std::vector<std::future<void>> futures_;
};

template <typename P>
void settle(P& pool) {
  if constexpr (std::is_same_v<P, std_async_pool>) pool.clear();
}

/// Makes every worker of `pool` start (all `n` run a job at once), so the
/// threads exist and their stacks are touched before anything is measured.
template <typename P>
bool start_all_workers(P& pool, std::size_t n) {
  gate g;
  counter_t started{0};
  counter_t finished{0};
  for (std::size_t i = 0; i < n; ++i) {
    pool.submit([&] {
      started.fetch_add(1, std::memory_order_acq_rel);
      g.wait();
      finished.fetch_add(1, std::memory_order_acq_rel);
    });
  }
  const bool all = wait_for_count_for(started, n, std::chrono::seconds(5));
  g.release();
  wait_for_count(finished, n);
  return all;
}

// ---- producers ---------------------------------------------------------------------

/// `count - 1` extra producer threads parked on a barrier; run() releases
/// them and runs share 0 on the calling thread.
class producer_team {
 public:
  producer_team(std::size_t count, std::function<void(std::size_t)> body)
      : body_(std::move(body)), barrier_(static_cast<std::ptrdiff_t>(count)) {
    for (std::size_t p = 1; p < count; ++p) {
      threads_.emplace_back([this, p] {
        for (;;) {
          barrier_.arrive_and_wait();
          if (stop_.load(std::memory_order_acquire)) return;
          body_(p);
        }
      });
    }
  }
  ~producer_team() {
    stop_.store(true, std::memory_order_release);
    if (!threads_.empty()) barrier_.arrive_and_wait();
    for (auto& t : threads_) t.join();
  }
  producer_team(const producer_team&) = delete;
  producer_team& operator=(const producer_team&) = delete;
  void run() {
    if (!threads_.empty()) barrier_.arrive_and_wait();
    body_(0);
  }

 private:
  std::function<void(std::size_t)> body_;
  std::barrier<> barrier_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// ---- workloads ------------------------------------------------------------------------

void throughput_counters(benchmark::State& state, std::uint64_t ran, std::size_t workers, std::size_t producers,
                         std::uint64_t job_ns) {
  state.SetItemsProcessed(static_cast<std::int64_t>(ran));
  state.counters["workers"] = static_cast<double>(workers);
  state.counters["producers"] = static_cast<double>(producers);
  state.counters["job_ns"] = static_cast<double>(job_ns);
  state.counters["oversubscribed"] = workers + (producers > 1 ? producers : 0) > hardware_threads() ? 1 : 0;
}

template <typename P>
void bm_throughput(benchmark::State& state, std::size_t workers, std::uint64_t job_ns, std::size_t producers,
                   std::uint64_t jobs) {
  P pool(workers);
  start_all_workers(pool, workers);  // warm-up: threads started, not timed
  settle(pool);
  counter_t done{0};
  std::atomic<bool> refused{false};
  const std::uint64_t per_producer = jobs / producers;
  const std::uint64_t per_iteration = per_producer * producers;
  producer_team team(producers, [&](std::size_t) {
    for (std::uint64_t i = 0; i < per_producer; ++i) {
      if (!pool.submit([&done, job_ns] {
            tb::spin_for_ns(job_ns);
            done.fetch_add(1, std::memory_order_release);
          })) {
        refused.store(true, std::memory_order_relaxed);  // read after the producers are joined
        done.fetch_add(1, std::memory_order_release);
      }
    }
  });
  std::uint64_t target = 0;
  for (auto _ : state) {
    target += per_iteration;
    team.run();
    wait_for_count(done, target);
    settle(pool);
  }
  if (refused.load(std::memory_order_relaxed)) state.SkipWithError("a job was refused");  // producers joined
  throughput_counters(state, done.load(std::memory_order_acquire), workers, producers,
                      job_ns);  // pairs with the jobs' release increments
}

/// The counters of a latency row: percentiles of `samples` (sorted here), and the CPU the
/// whole process used from `cpu_before` / `wall_before` on, in % of one
/// core (what keeping workers awake between samples costs).
void latency_counters(benchmark::State& state, std::vector<double>& samples, std::size_t workers, double cpu_before,
                      std::chrono::steady_clock::time_point wall_before) {
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
  state.counters["p50_ns"] = tb::percentile(samples, 50);
  state.counters["p95_ns"] = tb::percentile(samples, 95);
  state.counters["p99_ns"] = tb::percentile(samples, 99);
  state.counters["max_ns"] = tb::percentile(samples, 100);
  state.counters["cpu_percent"] = wall > 0 ? (process_cpu_seconds() - cpu_before) / wall * 100.0 : 0.0;
  state.counters["workers"] = static_cast<double>(workers);
}

template <typename P>
void bm_latency(benchmark::State& state, std::size_t workers) {
  P pool(workers);
  start_all_workers(pool, workers);
  settle(pool);
  std::vector<double> samples;
  const double cpu_before = process_cpu_seconds();
  const auto wall_before = std::chrono::steady_clock::now();
  for (auto _ : state) {
    state.PauseTiming();
    settle(pool);
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // the workers park
    state.ResumeTiming();
    counter_t started_at{0};
    const std::uint64_t submitted_at = tb::now_ns();
    pool.submit([&started_at] { started_at.store(tb::now_ns(), std::memory_order_release); });
    while (started_at.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    samples.push_back(static_cast<double>(started_at.load(std::memory_order_relaxed) - submitted_at));
  }
  latency_counters(state, samples, workers, cpu_before, wall_before);
  settle(pool);
}

template <typename P>
void bm_create(benchmark::State& state, std::size_t workers) {
  for (auto _ : state) {
    P pool(workers);
    benchmark::DoNotOptimize(&pool);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["workers"] = static_cast<double>(workers);
}

template <typename P>
void bm_memory_per_worker(benchmark::State& state, std::size_t workers) {
  double per_worker = 0;
  double idle_pool = 0;  // the whole pool, idle, all workers having run a job
  bool all_started = true;
  if constexpr (P::owns_threads) {
    // Warm-up, not measured: a 1-worker pool of the same library runs a job
    // and is destroyed, so its code pages and one-time initialisation are
    // resident before the measurement (they are not per worker). Not for
    // oneTBB: its first pool starts the process-wide thread pool it reuses.
    // The warm job is the measured job: it blocks on a gate the caller opens
    // after it started, so the sleeping and waking code of the gate is
    // resident too (otherwise its first use, in the measured pool, counted a
    // page of libc code per fault-around, divided by W, for every library).
    P warm(1);
    gate warm_gate;
    counter_t warm_started{0};
    counter_t ran{0};
    warm.submit([&] {
      warm_started.fetch_add(1, std::memory_order_acq_rel);  // pairs with wait_for_count
      warm_gate.wait();
      ran.fetch_add(1, std::memory_order_release);  // pairs with wait_for_count
    });
    wait_for_count(warm_started, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let it block (not required)
    warm_gate.release();
    wait_for_count(ran, 1);
    settle(warm);
  }
  for (auto _ : state) {
    trim_heap();
    const double before = tb::resident_bytes();
    auto pool = std::make_unique<P>(workers);
    gate g;
    counter_t started{0};
    counter_t finished{0};
    for (std::size_t i = 0; i < workers; ++i) {
      pool->submit([&] {
        started.fetch_add(1, std::memory_order_acq_rel);
        g.wait();
        finished.fetch_add(1, std::memory_order_acq_rel);
      });
    }
    all_started = wait_for_count_for(started, workers, std::chrono::seconds(5));
    const double after = tb::resident_bytes();
    g.release();
    wait_for_count(finished, started.load(std::memory_order_seq_cst));  // seq_cst: pairs with the writers' RMW/store
    std::this_thread::sleep_for(std::chrono::milliseconds(50));         // the workers go idle (park)
    idle_pool = tb::resident_bytes() - before;
    pool.reset();
    per_worker = (after - before) / static_cast<double>(workers);
  }
  if (!all_started) state.SkipWithError("not every worker started within 5 s");
  state.counters["rss_per_worker_bytes"] = per_worker;
  state.counters["idle_pool_bytes"] = idle_pool;
  state.counters["workers"] = static_cast<double>(workers);
}

template <typename P>
void bm_idle_cpu(benchmark::State& state, std::size_t workers) {
  double percent = 0;
  for (auto _ : state) {
    P pool(workers);
    start_all_workers(pool, workers);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double before = process_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    percent = (process_cpu_seconds() - before) / 0.5 * 100.0;
  }
  state.counters["cpu_percent"] = percent;
  state.counters["workers"] = static_cast<double>(workers);
}

template <typename P>
void bm_queued_bytes(benchmark::State& state, std::uint64_t jobs) {
  double per_job = 0;
  for (auto _ : state) {
    P pool(1);
    gate g;
    counter_t started{0};
    counter_t done{0};
    pool.submit([&] {
      started.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      g.wait();
    });
    wait_for_count(started, 1);
    trim_heap();
    const double before = tb::resident_bytes();
    for (std::uint64_t i = 0; i < jobs; ++i) pool.submit([&done] { done.fetch_add(1, std::memory_order_release); });
    const double after = tb::resident_bytes();
    g.release();
    wait_for_count(done, jobs);
    per_job = (after - before) / static_cast<double>(jobs);
  }
  state.counters["bytes_per_job"] = per_job;
  state.counters["jobs"] = static_cast<double>(jobs);
}

/// Wall and worker CPU time of a timed region: the CPU of the whole process
/// minus the calling thread's, so a caller that waits by yielding does not
/// count (the pools' workers, and oneTBB's market threads, do).
class cpu_meter {
 public:
  void start() {
    cpu0_ = process_cpu_seconds() - thread_cpu_seconds();
    t0_ = std::chrono::steady_clock::now();
  }
  void stop() {
    wall_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    cpu_ += process_cpu_seconds() - thread_cpu_seconds() - cpu0_;
  }
  [[nodiscard]] double wall_seconds() const { return wall_; }
  [[nodiscard]] double cpu_seconds() const { return cpu_; }

 private:
  double cpu0_ = 0;
  double wall_ = 0;
  double cpu_ = 0;
  std::chrono::steady_clock::time_point t0_{};
};

constexpr std::uint64_t long_jobs_per_worker = 4;

/// Jobs of 1 ms / 10 ms (the guides' "1ms-10ms: individual jobs" range):
/// W x 4 of them from one producer, which then sleeps on the count (an atomic
/// wait, so it takes no core from the workers). Efficiency = the ideal time
/// (4 jobs x J per worker) / the measured time.
template <typename P>
void bm_long_jobs(benchmark::State& state, std::size_t workers, std::uint64_t job_us) {
  P pool(workers);
  start_all_workers(pool, workers);
  settle(pool);
  counter_t done{0};
  const std::uint64_t jobs = long_jobs_per_worker * workers;
  const std::uint64_t job_ns = job_us * 1000;
  std::uint64_t target = 0;
  cpu_meter meter;
  for (auto _ : state) {
    target += jobs;
    meter.start();
    for (std::uint64_t i = 0; i < jobs; ++i) {
      pool.submit([&done, job_ns] {
        tb::spin_for_ns(job_ns);
        done.fetch_add(1, std::memory_order_release);  // pairs with the acquire loads below
        done.notify_all();
      });
    }
    for (std::uint64_t v = done.load(std::memory_order_acquire); v < target; v = done.load(std::memory_order_acquire)) {
      done.wait(v, std::memory_order_acquire);
    }
    meter.stop();
    settle(pool);
  }
  const double ideal = static_cast<double>(state.iterations() * long_jobs_per_worker * job_ns) * 1e-9;
  state.SetItemsProcessed(static_cast<std::int64_t>(done.load(std::memory_order_acquire)));
  state.counters["efficiency"] = meter.wall_seconds() > 0 ? ideal / meter.wall_seconds() : 0;
  state.counters["cpu_percent"] = meter.wall_seconds() > 0 ? meter.cpu_seconds() / meter.wall_seconds() * 100 : 0;
  state.counters["workers"] = static_cast<double>(workers);
  state.counters["job_us"] = static_cast<double>(job_us);
}

/// The guides' "Time (1M jobs)" table: 1 000 000 empty jobs from one
/// producer (divided by the mode's scale), the caller yielding until the last
/// one ran. Reports the wall time and the workers' CPU over it.
template <typename P>
void bm_million(benchmark::State& state, std::size_t workers, std::uint64_t jobs) {
  P pool(workers);
  start_all_workers(pool, workers);
  settle(pool);
  counter_t done{0};
  std::uint64_t target = 0;
  cpu_meter meter;
  for (auto _ : state) {
    target += jobs;
    meter.start();
    for (std::uint64_t i = 0; i < jobs; ++i) {
      pool.submit([&done] { done.fetch_add(1, std::memory_order_release); });  // pairs with wait_for_count
    }
    wait_for_count(done, target);
    meter.stop();
    settle(pool);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(done.load(std::memory_order_acquire)));
  state.counters["run_ns"] = meter.wall_seconds() * 1e9 / static_cast<double>(state.iterations());
  state.counters["cpu_percent"] = meter.wall_seconds() > 0 ? meter.cpu_seconds() / meter.wall_seconds() * 100 : 0;
  state.counters["workers"] = static_cast<double>(workers);
  state.counters["jobs"] = static_cast<double>(jobs);
}

/// Start-up profile: from the constructor's call until the first job starts,
/// and until all W workers are inside a job at once (each job waits for the
/// others, so W distinct threads). Medians over the iterations; the pool's
/// destruction is not timed.
template <typename P>
void bm_startup(benchmark::State& state, std::size_t workers) {
  std::vector<double> first;
  std::vector<double> all;
  bool timed_out = false;
  for (auto _ : state) {
    counter_t first_at{0};
    counter_t started{0};
    gate g;
    const std::uint64_t t0 = tb::now_ns();
    {
      P pool(workers);
      for (std::size_t i = 0; i < workers; ++i) {
        pool.submit([&] {
          std::uint64_t expected = 0;
          // relaxed CAS: only the first job's time is kept; read after the join below.
          first_at.compare_exchange_strong(expected, tb::now_ns(), std::memory_order_relaxed);
          started.fetch_add(1, std::memory_order_acq_rel);  // pairs with wait_for_count_for
          g.wait();
        });
      }
      timed_out = !wait_for_count_for(started, workers, std::chrono::seconds(5)) || timed_out;
      all.push_back(static_cast<double>(tb::now_ns() - t0));
      state.SetIterationTime(static_cast<double>(tb::now_ns() - t0) * 1e-9);
      g.release();
    }  // joined: first_at is visible
    first.push_back(static_cast<double>(first_at.load(std::memory_order_relaxed) - t0));
  }
  if (timed_out) state.SkipWithError("not every worker started within 5 s");
  state.counters["first_job_ns"] = tb::percentile(first, 50);
  state.counters["all_workers_ns"] = tb::percentile(all, 50);
  state.counters["workers"] = static_cast<double>(workers);
}

/// The guides' start-up memory profile: RSS (minus RSS before the
/// constructor's call) and time since that call at each stage: the
/// constructor returned; the first job ran; all W workers are inside a job at
/// once; 100 000 empty jobs later (steady state). One iteration per process.
template <typename P>
void bm_startup_memory(benchmark::State& state, std::size_t workers) {
  constexpr std::uint64_t steady_jobs = 100'000;
  bool timed_out = false;
  for (auto _ : state) {
    trim_heap();
    const double before = tb::resident_bytes();
    const std::uint64_t t0 = tb::now_ns();
    auto stage = [&](const char* name) {
      const double elapsed = static_cast<double>(tb::now_ns() - t0);
      state.counters[std::string(name) + "_rss"] = tb::resident_bytes() - before;
      state.counters[std::string(name) + "_ns"] = elapsed;
    };
    auto pool = std::make_unique<P>(workers);
    stage("created");
    counter_t done{0};
    pool->submit([&done] { done.fetch_add(1, std::memory_order_release); });  // pairs with wait_for_count
    wait_for_count(done, 1);
    stage("first_job");
    gate g;
    counter_t started{0};
    for (std::size_t i = 0; i < workers; ++i) {
      pool->submit([&] {
        started.fetch_add(1, std::memory_order_acq_rel);  // pairs with wait_for_count_for
        g.wait();
        done.fetch_add(1, std::memory_order_release);  // pairs with wait_for_count
      });
    }
    timed_out = !wait_for_count_for(started, workers, std::chrono::seconds(5));
    stage("all_workers");
    g.release();
    wait_for_count(done, 1 + started.load(std::memory_order_acquire));
    for (std::uint64_t i = 0; i < steady_jobs; ++i) {
      pool->submit([&done] { done.fetch_add(1, std::memory_order_release); });  // pairs with wait_for_count
    }
    wait_for_count(done, 1 + workers + steady_jobs);
    stage("steady");
    pool.reset();
  }
  if (timed_out) state.SkipWithError("not every worker started within 5 s");
  state.counters["workers"] = static_cast<double>(workers);
}

/// The guides' "Memory Allocation Impact": each job mallocs `bytes`, writes
/// one byte per 4 KiB page, and frees them. Every `stride`-th job of the timed
/// rounds also records its own run time (malloc to free, two clock reads), for
/// the table's p99 column: the allocator's tail as a job sees it.
template <typename P>
void bm_alloc_jobs(benchmark::State& state, std::size_t workers, std::size_t bytes, std::uint64_t jobs) {
  P pool(workers);
  start_all_workers(pool, workers);
  settle(pool);
  // The jobs capture a pointer to this and their index (16 bytes).
  struct shared_state {
    // Its own cache line: every job increments it, and a job's clock must not
    // time a miss on a line the other workers just wrote.
    alignas(64) counter_t done{0};
    alignas(64) std::atomic<bool> failed{false};
    std::size_t bytes = 0;
    std::uint64_t stride = 1;
    double* run_ns = nullptr;  // one slot per sampled job; null in the warm-up round
  } shared;
  shared.bytes = bytes;
  shared.stride = std::max<std::uint64_t>(1, jobs / 2000);  // about 2000 samples per round
  std::vector<double> slots((jobs + shared.stride - 1) / shared.stride);
  std::vector<double> samples;
  std::uint64_t target = 0;
  // One untimed round first: every worker's malloc arena exists, and glibc's
  // dynamic mmap threshold has seen these sizes (the timed rounds measure the
  // steady state, for every library alike).
  auto round = [&] {
    target += jobs;
    for (std::uint64_t i = 0; i < jobs; ++i) {
      pool.submit([s = &shared, i] {
        const bool sampled = s->run_ns != nullptr && i % s->stride == 0;
        const std::size_t size = s->bytes;  // read before the clock
        const std::uint64_t start = sampled ? tb::now_ns() : 0;
        if (size != 0) {
          auto* p = static_cast<unsigned char*>(std::malloc(size));
          if (p == nullptr) {
            s->failed.store(true, std::memory_order_relaxed);  // read after the loop
          } else {
            for (std::size_t at = 0; at < size; at += 4096) p[at] = static_cast<unsigned char>(at);
            benchmark::DoNotOptimize(p);
            std::free(p);
          }
        }
        // The slot is read after wait_for_count(), which this job's release increment below publishes it to.
        if (sampled) s->run_ns[i / s->stride] = static_cast<double>(tb::now_ns() - start);
        s->done.fetch_add(1, std::memory_order_release);  // pairs with wait_for_count
      });
    }
    wait_for_count(shared.done, target);
    settle(pool);
  };
  round();
  shared.run_ns = slots.data();  // no job runs now: the warm-up round has finished
  for (auto _ : state) {
    round();
    state.PauseTiming();
    samples.insert(samples.end(), slots.begin(), slots.end());
    state.ResumeTiming();
  }
  if (shared.failed.load(std::memory_order_relaxed)) state.SkipWithError("malloc failed");
  state.SetItemsProcessed(
      static_cast<std::int64_t>(shared.done.load(std::memory_order_acquire) - jobs));  // without the warm-up
  state.counters["workers"] = static_cast<double>(workers);
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["run_p50_ns"] = tb::percentile(samples, 50);
  state.counters["run_p99_ns"] = tb::percentile(samples, 99);
}

// ---- OpenMP: the same workloads with a team of n ----------------------------------------

#if defined(THREAD_SYSTEM_HAVE_OPENMP)
void omp_throughput(benchmark::State& state, std::size_t workers, std::uint64_t job_ns, std::uint64_t jobs) {
  omp_set_dynamic(0);
  const int n = static_cast<int>(workers);
  counter_t done{0};
  std::uint64_t target = 0;
#pragma omp parallel num_threads(n)
  {}  // warm-up: the team exists
  for (auto _ : state) {
    target += jobs;
#pragma omp parallel num_threads(n)
#pragma omp single
    {
      for (std::uint64_t i = 0; i < jobs; ++i) {
#pragma omp task shared(done) firstprivate(job_ns)
        {
          tb::spin_for_ns(job_ns);
          done.fetch_add(1, std::memory_order_release);
        }
      }
    }
    wait_for_count(done, target);
  }
  throughput_counters(state, done.load(std::memory_order_acquire), workers, 1,
                      job_ns);  // pairs with the jobs' release increments
}

void omp_latency(benchmark::State& state, std::size_t workers) {
  omp_set_dynamic(0);
  const int n = static_cast<int>(workers);
  std::vector<double> samples;
#pragma omp parallel num_threads(n)
  {}
  const double cpu_before = process_cpu_seconds();
  const auto wall_before = std::chrono::steady_clock::now();
  for (auto _ : state) {
    state.PauseTiming();
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    state.ResumeTiming();
    counter_t started_at{0};
    const std::uint64_t submitted_at = tb::now_ns();
#pragma omp parallel num_threads(n)
#pragma omp single
    {
#pragma omp task shared(started_at)
      started_at.store(tb::now_ns(), std::memory_order_release);
    }
    samples.push_back(static_cast<double>(started_at.load(std::memory_order_relaxed) - submitted_at));
  }
  latency_counters(state, samples, workers, cpu_before, wall_before);
}

void omp_memory_per_worker(benchmark::State& state, std::size_t workers) {
  omp_set_dynamic(0);
  double per_worker = 0;
  double idle_pool = 0;
  for (auto _ : state) {
    trim_heap();
    const double before = tb::resident_bytes();
    double after = 0;
#pragma omp parallel num_threads(static_cast<int>(workers))
    {
#pragma omp barrier
#pragma omp master
      after = tb::resident_bytes();
#pragma omp barrier
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the team goes idle
    idle_pool = tb::resident_bytes() - before;
    per_worker = (after - before) / static_cast<double>(workers);
  }
  state.counters["rss_per_worker_bytes"] = per_worker;
  state.counters["idle_pool_bytes"] = idle_pool;
  state.counters["workers"] = static_cast<double>(workers);
}

void omp_idle_cpu(benchmark::State& state, std::size_t workers) {
  omp_set_dynamic(0);
  double percent = 0;
  for (auto _ : state) {
#pragma omp parallel num_threads(static_cast<int>(workers))
    {}
    const double before = process_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    percent = (process_cpu_seconds() - before) / 0.5 * 100.0;
  }
  state.counters["cpu_percent"] = percent;
  state.counters["workers"] = static_cast<double>(workers);
}
#endif

// ---- registration -------------------------------------------------------------------------

enum class mode { smoke, quick, full };

mode report_mode() {
  const char* m = std::getenv("THREAD_SYSTEM_REPORT_MODE");
  if (m == nullptr) return mode::quick;
  const std::string s(m);
  if (s == "smoke") return mode::smoke;
  if (s == "full") return mode::full;
  return mode::quick;
}

struct plan {
  std::vector<std::uint64_t> job_ns;
  std::vector<std::size_t> workers;
  std::vector<std::size_t> producers;         // matrix with empty jobs (seed 004)
  bool producers_for_every_job_size = false;  // full: the whole job x workers x producers cube
  std::uint64_t scale = 1;                    // job counts are divided by this
  int latency_iterations = 1000;
  std::vector<std::size_t> memory_workers;
  std::vector<std::size_t> idle_workers;
  std::uint64_t million_jobs = 1'000'000;  // the 1M-job table
  int startup_iterations = 20;
};

plan make_plan_for(mode m, std::size_t hw) {
  switch (m) {
    case mode::smoke:
      return plan{{0, 1000}, {1, 2}, {1, 2}, false, 10, 100, {hw}, {hw}, 100'000, 5};
    case mode::full:
      return plan{{0, 1000, 10000, 100000}, {1, 2, 4, 8}, {1, 2, 4, 8}, true, 1, 2000, {1, 4, 8, 16}, {hw, 8}};
    case mode::quick:
      break;
  }
  return plan{{0, 1000, 10000, 100000}, {1, 2, 4, 8}, {1, 2, 4, 8}, false, 2, 1000, {1, 4, 8, 16}, {8}};
}

plan make_plan(mode m) {
  const std::size_t hw = hardware_threads();
  plan p = make_plan_for(m, hw);
  // The core count is always a worker count: the comparison table and
  // std::async (a thread per job, measured at the core count) need its rows
  // on a machine whose count is not in the list (6, 12, 16 cores...).
  if (std::find(p.workers.begin(), p.workers.end(), hw) == p.workers.end()) {
    p.workers.insert(std::upper_bound(p.workers.begin(), p.workers.end(), hw), hw);
  }
  return p;
}

/// Jobs per timed iteration: about 20 ms of work for one worker.
std::uint64_t jobs_for(std::uint64_t job_ns, std::uint64_t scale, bool one_thread_per_job) {
  std::uint64_t jobs = job_ns == 0 ? 100'000 : std::max<std::uint64_t>(200, 20'000'000 / job_ns);
  if (one_thread_per_job) jobs = std::min<std::uint64_t>(jobs, 1'000);
  return std::max<std::uint64_t>(jobs / scale, 8);
}

std::string arg(const char* key, std::uint64_t v) { return std::string("/") + key + ":" + std::to_string(v); }

template <typename... P>
struct pool_list {};

using queue_pools = pool_list<thread_system_pool,
#if defined(THREAD_SYSTEM_HAVE_TBB)
                              onetbb_pool,
#endif
#if defined(THREAD_SYSTEM_HAVE_BOOST_ASIO)
                              boost_asio_pool,
#endif
                              naive_pool>;

template <typename F, typename... P>
void for_each_pool(pool_list<P...>, F f) {
  (f(static_cast<P*>(nullptr)), ...);
}

void register_throughput(const plan& p, std::uint64_t job_ns, std::size_t workers, std::size_t producers) {
  const std::string tail = arg("job_ns", job_ns) + arg("workers", workers) + arg("producers", producers);
  for_each_pool(queue_pools{}, [&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    const std::uint64_t jobs = jobs_for(job_ns, p.scale, false);
    benchmark::RegisterBenchmark((std::string("throughput/") + P::name + tail).c_str(),
                                 [=](benchmark::State& s) { bm_throughput<P>(s, workers, job_ns, producers, jobs); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  });
#if defined(THREAD_SYSTEM_HAVE_OPENMP)
  if (producers == 1) {
    const std::uint64_t jobs = jobs_for(job_ns, p.scale, false);
    benchmark::RegisterBenchmark((std::string("throughput/openmp") + tail).c_str(),
                                 [=](benchmark::State& s) { omp_throughput(s, workers, job_ns, jobs); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
#endif
  if (workers == hardware_threads()) {
    const std::uint64_t jobs = jobs_for(job_ns, p.scale, true);
    benchmark::RegisterBenchmark(
        (std::string("throughput/std_async") + tail).c_str(),
        [=](benchmark::State& s) { bm_throughput<std_async_pool>(s, workers, job_ns, producers, jobs); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

void register_all() {
  const plan p = make_plan(report_mode());
  const std::size_t hw = hardware_threads();

  // Throughput: job size x workers with one producer, then the producer x
  // worker matrix (empty jobs; every job size in full mode).
  for (const auto job_ns : p.job_ns) {
    for (const auto workers : p.workers) {
      for (const auto producers : p.producers) {
        if (producers != 1 && job_ns != 0 && !p.producers_for_every_job_size) continue;
        register_throughput(p, job_ns, workers, producers);
      }
    }
  }

  // Latency on an idle pool of hw workers.
  for_each_pool(queue_pools{}, [&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    benchmark::RegisterBenchmark((std::string("latency/") + P::name + arg("workers", hw)).c_str(),
                                 [=](benchmark::State& s) { bm_latency<P>(s, hw); })
        ->Iterations(p.latency_iterations)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  });
#if defined(THREAD_SYSTEM_HAVE_OPENMP)
  benchmark::RegisterBenchmark((std::string("latency/openmp") + arg("workers", hw)).c_str(),
                               [=](benchmark::State& s) { omp_latency(s, hw); })
      ->Iterations(p.latency_iterations)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
#endif
  benchmark::RegisterBenchmark((std::string("latency/thread_system_idle_wait") + arg("workers", hw)).c_str(),
                               [=](benchmark::State& s) { bm_latency<thread_system_idle_wait_pool>(s, hw); })
      ->Iterations(p.latency_iterations)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark((std::string("latency/std_async") + arg("workers", hw)).c_str(),
                               [=](benchmark::State& s) { bm_latency<std_async_pool>(s, hw); })
      ->Iterations(std::max(10, p.latency_iterations / 4))
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);

  // Creation (pools that own their threads).
  for (const std::size_t workers : {1, 2, 4, 8, 16}) {
    for_each_pool(queue_pools{}, [&](auto* tag) {
      using P = std::remove_pointer_t<decltype(tag)>;
      if constexpr (P::owns_threads) {
        benchmark::RegisterBenchmark((std::string("create/") + P::name + arg("workers", workers)).c_str(),
                                     [=](benchmark::State& s) { bm_create<P>(s, workers); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    });
  }

  // Memory per worker, idle CPU, bytes per queued job: one iteration each.
  for (const auto workers : p.memory_workers) {
    for_each_pool(queue_pools{}, [&](auto* tag) {
      using P = std::remove_pointer_t<decltype(tag)>;
      benchmark::RegisterBenchmark((std::string("memory_per_worker/") + P::name + arg("workers", workers)).c_str(),
                                   [=](benchmark::State& s) { bm_memory_per_worker<P>(s, workers); })
          ->Iterations(1)
          ->UseRealTime();
    });
#if defined(THREAD_SYSTEM_HAVE_OPENMP)
    benchmark::RegisterBenchmark((std::string("memory_per_worker/openmp") + arg("workers", workers)).c_str(),
                                 [=](benchmark::State& s) { omp_memory_per_worker(s, workers); })
        ->Iterations(1)
        ->UseRealTime();
#endif
  }
  for (const auto workers : p.idle_workers) {
    for_each_pool(queue_pools{}, [&](auto* tag) {
      using P = std::remove_pointer_t<decltype(tag)>;
      benchmark::RegisterBenchmark((std::string("idle_cpu/") + P::name + arg("workers", workers)).c_str(),
                                   [=](benchmark::State& s) { bm_idle_cpu<P>(s, workers); })
          ->Iterations(1)
          ->UseRealTime();
    });
#if defined(THREAD_SYSTEM_HAVE_OPENMP)
    benchmark::RegisterBenchmark((std::string("idle_cpu/openmp") + arg("workers", workers)).c_str(),
                                 [=](benchmark::State& s) { omp_idle_cpu(s, workers); })
        ->Iterations(1)
        ->UseRealTime();
#endif
  }
  // Long jobs (1 ms, 10 ms), 1M jobs with CPU, allocating jobs: hw workers.
  for_each_pool(queue_pools{}, [&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    for (const std::uint64_t job_us : {1'000, 10'000}) {
      benchmark::RegisterBenchmark(
          (std::string("long_jobs/") + P::name + arg("job_us", job_us) + arg("workers", hw)).c_str(),
          [=](benchmark::State& s) { bm_long_jobs<P>(s, hw, job_us); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark((std::string("million/") + P::name + arg("workers", hw)).c_str(),
                                 [=](benchmark::State& s) { bm_million<P>(s, hw, p.million_jobs); })
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    for (const std::size_t bytes : {0, 512, 64 << 10, 512 << 10, 2 << 20}) {
      // About the same work per iteration: 100 000 jobs below a page, fewer above.
      const std::uint64_t jobs = std::max<std::uint64_t>(
          (bytes < 4096 ? 100'000 : std::max<std::uint64_t>(500, 200'000'000 / bytes)) / p.scale, 50);
      benchmark::RegisterBenchmark(
          (std::string("alloc_jobs/") + P::name + arg("bytes", bytes) + arg("workers", hw)).c_str(),
          [=](benchmark::State& s) { bm_alloc_jobs<P>(s, hw, bytes, jobs); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  });

  // Start-up profile (pools that own their threads).
  std::vector<std::size_t> startup_workers{1, hw};
  if (hw < 8) startup_workers.push_back(8);
  for (const std::size_t workers : startup_workers) {
    for_each_pool(queue_pools{}, [&](auto* tag) {
      using P = std::remove_pointer_t<decltype(tag)>;
      if constexpr (P::owns_threads) {
        benchmark::RegisterBenchmark((std::string("startup/") + P::name + arg("workers", workers)).c_str(),
                                     [=](benchmark::State& s) { bm_startup<P>(s, workers); })
            ->Iterations(p.startup_iterations)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    });
  }

  // Start-up memory profile: one process per benchmark (see the driver).
  for_each_pool(queue_pools{}, [&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    if constexpr (P::owns_threads) {
      benchmark::RegisterBenchmark((std::string("startup_memory/") + P::name + arg("workers", 8)).c_str(),
                                   [=](benchmark::State& s) { bm_startup_memory<P>(s, 8); })
          ->Iterations(1)
          ->UseRealTime();
    }
  });
  const std::uint64_t queued = 100'000;
  for_each_pool(queue_pools{}, [&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    benchmark::RegisterBenchmark((std::string("queued_bytes/") + P::name + arg("jobs", queued)).c_str(),
                                 [=](benchmark::State& s) { bm_queued_bytes<P>(s, queued); })
        ->Iterations(1)
        ->UseRealTime();
  });
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("report_mode", std::getenv("THREAD_SYSTEM_REPORT_MODE") != nullptr
                                                 ? std::getenv("THREAD_SYSTEM_REPORT_MODE")
                                                 : "quick");
  // The core count the comparison rows were planned for (their worker
  // counts): the renderer looks the rows up by it.
  benchmark::AddCustomContext("hardware_threads", std::to_string(hardware_threads()));
#if defined(THREAD_SYSTEM_HAVE_TBB)
  benchmark::AddCustomContext("have_onetbb", "1");
#endif
#if defined(THREAD_SYSTEM_HAVE_BOOST_ASIO)
  benchmark::AddCustomContext("have_boost_asio", "1");
#endif
#if defined(THREAD_SYSTEM_HAVE_OPENMP)
  benchmark::AddCustomContext("have_openmp", "1");
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
