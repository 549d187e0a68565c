// thread_worker (pools/thread_worker.hpp): the handle to one worker thread -
// its name, its injector batch, its statistics and latency - before, while
// and after a pool runs it.
#include "thread_system/pools/thread_worker.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <latch>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

// A worker no pool has run: its name as given, zero counters, no samples.
TEST(ThreadWorker, AFreshHandleHasItsNameAndZeroCounters) {
  const ts::thread_worker named{"w"};
  EXPECT_EQ(named.get_name(), "w");
  const ts::worker_statistics s = named.get_statistics();
  EXPECT_EQ(s.jobs_processed, 0U);
  EXPECT_EQ(s.jobs_failed, 0U);
  EXPECT_EQ(s.jobs_cancelled, 0U);
  EXPECT_EQ(s.busy_time.count(), 0);
  EXPECT_EQ(s.parks, 0U);
  EXPECT_EQ(s.steals, 0U);
  EXPECT_EQ(s.busy_since_ns, 0U);
  EXPECT_EQ(named.latency().wait.count, 0U);
  EXPECT_EQ(named.latency().run.count, 0U);
  EXPECT_EQ(ts::thread_worker{}.get_name(), "");
}

// The handle a seed-style caller made is the one get_workers() returns; its
// counters are the jobs it ran, and they stay readable after stop() for as
// long as the pool lives.
TEST(ThreadWorker, TheHandleCountsItsJobsAndOutlivesStop) {
  auto pool = std::make_shared<ts::thread_pool>("handles", ts::test::pool_opts());
  auto worker = std::make_unique<ts::thread_worker>("only");
  const ts::thread_worker* handle = worker.get();
  ASSERT_TRUE(pool->enqueue(std::move(worker)));
  ASSERT_TRUE(pool->start());
  ASSERT_EQ(pool->get_workers().size(), 1U);
  EXPECT_EQ(pool->get_workers().front(), handle);
  constexpr int jobs = 100;
  std::atomic<int> ran{0};
  for (int i = 0; i < jobs; ++i) {
    ASSERT_TRUE(pool->enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // a count
  }
  ASSERT_TRUE(pool->enqueue([] { throw std::runtime_error("counted as failed"); }));
  pool->wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), jobs);
  EXPECT_EQ(handle->get_statistics().jobs_processed, static_cast<std::uint64_t>(jobs + 1));
  EXPECT_EQ(handle->get_statistics().jobs_failed, 1U);
  const ts::stop_report report = pool->stop();
  EXPECT_EQ(report.executed, static_cast<std::uint64_t>(jobs + 1));
  const ts::worker_statistics after = handle->get_statistics();
  EXPECT_EQ(after.jobs_processed, static_cast<std::uint64_t>(jobs + 1));
  EXPECT_EQ(after.busy_since_ns, 0U) << "a stopped worker has no busy stretch in progress";
  EXPECT_EQ(handle->get_name(), "only");
}

namespace {
std::set<std::string> thread_names_of_this_process() {
  std::set<std::string> names;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string n;
      if (std::getline(comm, n)) names.insert(n);
    }
    ::closedir(d);
  }
  return names;
}
}  // namespace

TEST(ThreadWorker, ThreadsAreNamedAfterThePoolOrTheirOwnName) {
  if (!std::filesystem::exists("/proc/self/task")) GTEST_SKIP() << "no /proc on this platform";
  ts::pool_options opt = ts::test::pool_opts();
  opt.name = "namedpool";
  ts::thread_pool pool{2, opt};
  // A worker names itself when its thread starts; give it the time to.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::set<std::string> names;
  do {
    names = thread_names_of_this_process();
    if (names.count("namedpool-0") == 1 && names.count("namedpool-1") == 1) break;
    std::this_thread::sleep_for(1ms);
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(names.count("namedpool-0"), 1U);
  EXPECT_EQ(names.count("namedpool-1"), 1U);
  // A worker given a name keeps it (the OS keeps 15 bytes: the start of
  // the name and its trailing number, see detail/thread_attributes.hpp).
  ASSERT_TRUE(pool.enqueue(std::make_unique<ts::thread_worker>("custom-worker-name-longer-than-15")));
  const std::string truncated = "custom-worke-15";
  EXPECT_TRUE(ts::test::eventually([&] { return thread_names_of_this_process().count(truncated) == 1; }));
  EXPECT_EQ(pool.get_workers().back()->get_name(), "custom-worker-name-longer-than-15");
  EXPECT_EQ(pool.get_workers().front()->get_name(), "") << "a worker the pool made has no name of its own";
}

// avg_processing_time_ns is the mean run time of sampled jobs, not busy time
// (which includes looking for work) divided by jobs.
TEST(ThreadWorker, AverageProcessingTimeIsTheSampledRunTimeOnly) {
  using namespace std::chrono_literals;
  for (const std::uint32_t every : {0U, 1U}) {
    ts::pool_options opt;
    opt.latency_sample_every = every;
    ts::thread_pool pool{1, opt};
    constexpr int jobs = 5;
    for (int i = 0; i < jobs; ++i) ASSERT_TRUE(pool.enqueue([] { std::this_thread::sleep_for(2ms); }));
    pool.wait_idle();
    const ts::worker_statistics s = pool.get_workers().front()->get_statistics();
    ASSERT_EQ(s.jobs_processed, static_cast<std::uint64_t>(jobs));
    if (every == 0) {
      EXPECT_EQ(s.avg_processing_time_ns, 0U) << "nothing was sampled";
    } else {
      EXPECT_GE(s.avg_processing_time_ns, 2'000'000U);  // each job sleeps at least 2 ms
      const ts::histogram_snapshot run = pool.get_workers().front()->latency().run;
      ASSERT_EQ(run.count, static_cast<std::uint64_t>(jobs));
      EXPECT_EQ(s.avg_processing_time_ns, run.sum / run.count);
      EXPECT_LE(s.avg_processing_time_ns, static_cast<std::uint64_t>(s.busy_time.count()) / s.jobs_processed);
    }
  }
}

// thread_worker::set_injector_batch / the seed's set_batch_processing: how
// many jobs a worker takes from the pool's queue per visit.
TEST(ThreadWorker, InjectorBatchIsCheckedAndTheSeedFormClamps) {
  ts::thread_worker w;
  EXPECT_EQ(w.injector_batch(), ts::thread_worker::default_injector_batch);
  for (std::size_t bad : {std::size_t{0}, ts::thread_worker::max_injector_batch + 1}) {
    auto r = w.set_injector_batch(bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
    EXPECT_EQ(w.injector_batch(), ts::thread_worker::default_injector_batch);  // unchanged
  }
  ASSERT_TRUE(w.set_injector_batch(ts::thread_worker::max_injector_batch));
  EXPECT_EQ(w.injector_batch(), ts::thread_worker::max_injector_batch);
  w.set_batch_processing(true, 32);  // the seed guides' "high concurrency" setting
  EXPECT_EQ(w.injector_batch(), 32U);
  EXPECT_TRUE(w.is_batch_processing_enabled());
  w.set_batch_processing(false);
  EXPECT_EQ(w.injector_batch(), 1U);
  EXPECT_FALSE(w.is_batch_processing_enabled());
  w.set_batch_processing(true, 1000);
  EXPECT_EQ(w.injector_batch(), ts::thread_worker::max_injector_batch);
  w.set_batch_processing(true, 0);
  EXPECT_EQ(w.injector_batch(), 1U);
}

// With a batch of 1 a worker leaves every other job in the shared queue; with
// a larger batch it keeps the rest of its visit on its own deque, where a
// second worker can reach them only by stealing. Worker B takes jobs while
// its first job blocks; worker A then runs everything else.
TEST(ThreadWorker, InjectorBatchDecidesHowManyJobsAVisitTakes) {
  for (const std::size_t batch : {std::size_t{1}, std::size_t{32}}) {
    ts::pool_options opt = ts::test::pool_opts("batch");
    opt.queue = ts::pool_queue::mutex;  // hands out a fair share per visit (queued / workers)
    ts::thread_pool pool{2, opt};
    for (ts::thread_worker* w : pool.get_workers()) ASSERT_TRUE(w->set_injector_batch(batch));
    // Occupy both workers.
    std::latch both_started{2};
    std::latch release_a{1};
    std::latch release_b{1};
    std::atomic<int> which{0};
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(pool.enqueue([&] {
        // seq_cst: one blocker gets 0 (B), the other 1 (A).
        const int me = which.fetch_add(1, std::memory_order_seq_cst);
        both_started.count_down();
        (me == 0 ? release_b : release_a).wait();
      }));
    }
    both_started.wait();
    const std::uint64_t steals_before = pool.get_statistics().steals;
    // 40 jobs: the first blocks whoever runs it (B, the only free worker).
    std::latch first_started{1};
    std::latch release_first{1};
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool.enqueue([&] {
      first_started.count_down();
      release_first.wait();
    }));
    for (int i = 0; i < 39; ++i) {
      ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // relaxed: a count
    }
    release_b.count_down();
    // B took its visit's jobs and runs the first one. (Every 61st look a
    // worker takes a single job from the queue for fairness; B has looked
    // only a few times in this fresh pool, so its visit here is a batch.)
    first_started.wait();
    release_a.count_down();
    // A runs the 39 others: from the queue, or by stealing what B's visit took.
    ASSERT_TRUE(ts::test::eventually([&ran] { return ran.load(std::memory_order_relaxed) == 39; }));
    const std::uint64_t steals = pool.get_statistics().steals - steals_before;
    if (batch == 1) {
      EXPECT_EQ(steals, 0U) << "B took one job per visit: nothing to steal";
    } else {
      EXPECT_GE(steals, 1U) << "B's visit took more than one job onto its deque";
    }
    release_first.count_down();
    pool.wait_idle();
  }
}
