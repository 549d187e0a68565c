// The seed guides' code examples (000, 001, 003 in the project's seeds),
// compiled as written with only the namespace changed (`using namespace
// thread_system;`, or the seed namespace aliased to it), and run. Each block
// is marked with the guide sections it comes from. Blocks elsewhere: the
// lock-free pool examples in lockfree_pools_test.cpp, the logger's in
// logger/tests/log_module_test.cpp. Blocks no compiler accepts as written
// (and their ports), and the platform sections, are listed in
// docs/SEED_COMPATIBILITY.md.
#include "thread_system/compat/lockfree_pools.hpp"
#include "thread_system/thread_system.hpp"

// The guides ignore results the library marks [[nodiscard]], compare an int
// with hardware_concurrency() and declare an alias they do not use: for their
// users warnings, not errors. Their code is compiled here as written.
#pragma GCC diagnostic ignored "-Wunused-result"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-local-typedefs"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ts = thread_system;

namespace {

// A job that counts one run (read after the pool stopped).
std::unique_ptr<ts::job> counting_job(std::atomic<int>& ran) {
  return std::make_unique<ts::callback_job>([&ran]() -> ts::result_void {
    ran.fetch_add(1, std::memory_order_relaxed);
    return {};
  });
}

// ---- 000 and 003 "Usage Recommendations" / 001 "Configuration Guidelines" ----------

void guide_adaptive_configuration() {
  using namespace thread_system;
  // Adaptive behavior (recommended)
  adaptive_job_queue queue(adaptive_job_queue::queue_strategy::ADAPTIVE);

  // Force specific strategy when needed
  adaptive_job_queue mutex_queue(adaptive_job_queue::queue_strategy::FORCE_MUTEX);
  adaptive_job_queue lockfree_queue(adaptive_job_queue::queue_strategy::FORCE_LOCKFREE);

  EXPECT_EQ(queue.current_strategy(), queue_strategy::FORCE_MUTEX);  // ADAPTIVE starts on the mutex queue
  EXPECT_EQ(mutex_queue.current_strategy(), queue_strategy::FORCE_MUTEX);
  EXPECT_EQ(lockfree_queue.current_strategy(), queue_strategy::FORCE_LOCKFREE);
}

void guide_high_performance_queue() {
  using namespace thread_system;
  // For high-performance scenarios
  using high_perf_queue = lockfree_mpmc_queue;

  // For adaptive behavior
  adaptive_job_queue queue(adaptive_job_queue::queue_strategy::ADAPTIVE);
  EXPECT_TRUE(queue.empty_approx());
}

// ---- "Job Batching for Performance" (000, 001, 003) ----------------------------------

namespace thread_module = thread_system;  // the seed's namespace

std::atomic<int> batched_ran{0};
std::unique_ptr<thread_module::job> create_job(int value) {
  return std::make_unique<ts::callback_job>([value]() -> ts::result_void {
    batched_ran.fetch_add(value, std::memory_order_relaxed);  // read after stop()
    return {};
  });
}

void guide_job_batching(const std::shared_ptr<ts::thread_pool>& pool, const std::vector<int>& data, int batch_size) {
  // Efficient job batching
  std::vector<std::unique_ptr<thread_module::job>> jobs;
  jobs.reserve(batch_size);

  for (int i = 0; i < batch_size; ++i) {
    jobs.push_back(create_job(data[i]));
  }

  pool->enqueue_batch(std::move(jobs));
}

// ---- 003 "4b. Adaptive Queue configuration" ------------------------------------------

auto create_optimal_pool(const std::string& name, size_t expected_concurrency, bool priority_sensitive)
    -> std::shared_ptr<ts::typed_thread_pool_t<ts::job_types>> {
  using namespace thread_system;

  // Create typed thread pool with adaptive queue strategy
  auto pool = std::make_shared<typed_thread_pool_t<job_types>>(name);

  // Configure adaptive queue strategy based on expected usage
  if (expected_concurrency > 4 || priority_sensitive) {
    // High contention - adaptive queue will automatically optimize
    pool->set_queue_strategy(queue_strategy::ADAPTIVE);
  }

  // Add specialized workers for each priority
  auto realtime_worker = std::make_unique<typed_thread_worker_t<job_types>>();
  realtime_worker->set_responsibilities({job_types::RealTime});
  pool->add_worker(std::move(realtime_worker));

  auto batch_worker = std::make_unique<typed_thread_worker_t<job_types>>();
  batch_worker->set_responsibilities({job_types::Batch});
  pool->add_worker(std::move(batch_worker));

  auto background_worker = std::make_unique<typed_thread_worker_t<job_types>>();
  background_worker->set_responsibilities({job_types::Background});
  pool->add_worker(std::move(background_worker));

  // Universal worker for load balancing
  auto universal_worker = std::make_unique<typed_thread_worker_t<job_types>>();
  universal_worker->set_responsibilities({job_types::RealTime, job_types::Batch, job_types::Background});
  pool->add_worker(std::move(universal_worker));

  return pool;
}

// ---- 000/001 "4b. Lock-Free vs Mutex Pool Selection", ported as
// docs/SEED_COMPATIBILITY.md says (both branches return the base type). ------------

template <typename PoolType>
auto create_selected_pool(const std::string& name, size_t expected_concurrency, bool priority_sensitive)
    -> std::shared_ptr<ts::typed_thread_pool> {
  using namespace thread_system;
  if (expected_concurrency > 4 || priority_sensitive) {
    // Use lock-free for high contention or priority-sensitive scenarios
    auto pool = std::make_shared<typed_lockfree_thread_pool>(name);

    // Add specialized workers for each priority
    std::vector<std::unique_ptr<typed_lockfree_thread_worker>> workers;
    workers.push_back(std::make_unique<typed_lockfree_thread_worker>(std::vector<job_types>{job_types::RealTime},
                                                                     "RealTime Specialist"));
    workers.push_back(
        std::make_unique<typed_lockfree_thread_worker>(std::vector<job_types>{job_types::Batch}, "Batch Specialist"));
    workers.push_back(std::make_unique<typed_lockfree_thread_worker>(std::vector<job_types>{job_types::Background},
                                                                     "Background Specialist"));

    // Add universal workers for load balancing
    workers.push_back(
        std::make_unique<typed_lockfree_thread_worker>(typed_thread_pool_module::all_types(), "Universal Worker"));

    pool->enqueue_batch(std::move(workers));
    return pool;
  } else {
    // Use mutex-based for simple scenarios
    auto pool = std::make_shared<typed_thread_pool>(name);

    std::vector<std::unique_ptr<typed_thread_worker>> workers;
    size_t worker_count = std::thread::hardware_concurrency();
    for (size_t i = 0; i < worker_count; ++i) {
      workers.push_back(std::make_unique<typed_thread_worker>(typed_thread_pool_module::all_types()));
    }

    pool->enqueue_batch(std::move(workers));
    return pool;
  }
}

// ---- "Cache-Line Alignment", "Memory Pool Implementation", "Diagnostic Tools"
// (000, 001, 003): standard C++ only, compiled as written. -----------------------

// Prevent false sharing
struct alignas(64) WorkerData {
  std::atomic<uint64_t> processed_jobs{0};
  std::atomic<uint64_t> execution_time{0};
  char padding[64 - 2 * sizeof(std::atomic<uint64_t>)];
};

template <typename JobType, size_t PoolSize = 1024>
class JobPool {
 public:
  auto acquire() -> std::unique_ptr<JobType> {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pool_.empty()) {
      auto job = std::move(pool_.back());
      pool_.pop_back();
      return job;
    }
    return std::make_unique<JobType>();
  }

  auto release(std::unique_ptr<JobType> job) -> void {
    if (!job) return;
    job->reset();

    std::lock_guard<std::mutex> lock(mutex_);
    if (pool_.size() < PoolSize) {
      pool_.push_back(std::move(job));
    }
  }

 private:
  std::vector<std::unique_ptr<JobType>> pool_;
  std::mutex mutex_;
};

// As written in the guides: their atomics use the default (seq_cst) order,
// which this project's own code names explicitly; kept verbatim here.
class PerformanceMonitor {
 public:
  struct Metrics {
    std::atomic<uint64_t> jobs_submitted{0};
    std::atomic<uint64_t> jobs_completed{0};
    std::atomic<uint64_t> total_execution_time{0};
    std::atomic<uint32_t> current_queue_depth{0};
    std::atomic<uint32_t> peak_queue_depth{0};
  };

  auto get_throughput() const -> double {
    auto duration = std::chrono::steady_clock::now() - start_time_;
    auto seconds = std::chrono::duration<double>(duration).count();
    return metrics_.jobs_completed.load() / seconds;
  }

  auto get_average_latency() const -> double {
    uint64_t completed = metrics_.jobs_completed.load();
    if (completed == 0) return 0.0;
    return static_cast<double>(metrics_.total_execution_time.load()) / completed;
  }

 private:
  Metrics metrics_;
  std::chrono::steady_clock::time_point start_time_{std::chrono::steady_clock::now()};
};

// ---- Ports of the two blocks no compiler accepts as written (see
// docs/SEED_COMPATIBILITY.md): std::max<unsigned> for std::max(1u, uint16_t),
// RealTime/Batch/Background for the undefined High/Normal/Low, and the
// add_type_workers helper the guides call without defining it. -----------------

enum class WorkloadType { CpuBound, MemoryBound, IoBlocking, Mixed, RealTime };

uint16_t determine_optimal_thread_count(WorkloadType workload) {
  uint16_t hardware_threads = std::thread::hardware_concurrency();

  switch (workload) {
    case WorkloadType::CpuBound:
      return hardware_threads;

    case WorkloadType::MemoryBound:
      return std::max<unsigned>(1u, hardware_threads / 2);

    case WorkloadType::IoBlocking:
      return hardware_threads * 2;

    case WorkloadType::Mixed:
      return static_cast<uint16_t>(hardware_threads * 1.5);

    case WorkloadType::RealTime:
      return hardware_threads - 1;  // Reserve one core for OS
  }

  return hardware_threads;
}

struct WorkloadProfile {
  double high_type_ratio;
  double normal_type_ratio;
  double low_type_ratio;
};

void add_type_workers(const std::shared_ptr<ts::typed_thread_pool>& pool, ts::job_types type, unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    ASSERT_TRUE(pool->enqueue(std::make_unique<ts::typed_thread_worker>(std::vector<ts::job_types>{type})));
  }
}

void configure_type_pool(std::shared_ptr<ts::typed_thread_pool> pool, const WorkloadProfile& profile) {
  using namespace thread_system;
  const uint16_t hw_threads = std::thread::hardware_concurrency();

  // Allocate workers based on workload distribution
  uint16_t high_workers = static_cast<uint16_t>(hw_threads * profile.high_type_ratio);
  uint16_t normal_workers = static_cast<uint16_t>(hw_threads * profile.normal_type_ratio);
  uint16_t low_workers = static_cast<uint16_t>(hw_threads * profile.low_type_ratio);

  // Ensure at least one worker per type
  high_workers = std::max<unsigned>(1u, high_workers);
  normal_workers = std::max<unsigned>(1u, normal_workers);
  low_workers = std::max<unsigned>(1u, low_workers);

  // Create type-specific workers
  add_type_workers(pool, job_types::RealTime, high_workers);
  add_type_workers(pool, job_types::Batch, normal_workers);
  add_type_workers(pool, job_types::Background, low_workers);
}

struct reusable_job {
  int state = 0;
  void reset() { state = 0; }
};

}  // namespace

TEST(GuideExamples, AdaptiveQueueConfiguration) {
  guide_adaptive_configuration();
  guide_high_performance_queue();
}

TEST(GuideExamples, JobBatchingRunsEveryJob) {
  batched_ran.store(0, std::memory_order_relaxed);
  auto pool = std::make_shared<ts::thread_pool>("Batching");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(pool->enqueue(std::make_unique<ts::thread_worker>()));
  ASSERT_TRUE(pool->start());
  guide_job_batching(pool, {1, 2, 3, 4}, 4);
  const auto report = pool->stop();
  EXPECT_EQ(report.executed, 4U);
  EXPECT_EQ(batched_ran.load(std::memory_order_relaxed), 10);
}

TEST(GuideExamples, AdaptiveTypedPoolConfiguration) {
  // Usage examples (003: at namespace scope; here inside the test)
  auto high_concurrency_pool = create_optimal_pool("HighConcurrency", 8, true);

  auto simple_pool = create_optimal_pool("Simple", 2, false);

  EXPECT_EQ(high_concurrency_pool->get_workers().size(), 4U);
  EXPECT_EQ(simple_pool->get_workers().size(), 4U);
  ASSERT_TRUE(high_concurrency_pool->start());
  std::atomic<int> ran{0};
  for (auto t : {ts::job_types::RealTime, ts::job_types::Batch, ts::job_types::Background}) {
    ASSERT_TRUE(high_concurrency_pool->enqueue(t, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  }
  high_concurrency_pool->stop();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 3);
}

TEST(GuideExamples, LockfreeOrMutexTypedPoolSelection) {
  // Usage examples (000/001: at namespace scope; here inside the test)
  auto high_concurrency_pool = create_selected_pool<ts::typed_lockfree_thread_pool>("HighConcurrency", 8, true);
  auto simple_pool = create_selected_pool<ts::typed_thread_pool>("Simple", 2, false);

  EXPECT_EQ(high_concurrency_pool->get_workers().size(), 4U);
  EXPECT_EQ(simple_pool->get_workers().size(), std::size_t{std::thread::hardware_concurrency()});
  for (auto* pool : {high_concurrency_pool.get(), simple_pool.get()}) {
    ASSERT_TRUE(pool->start());
    std::atomic<int> ran{0};
    ASSERT_TRUE(pool->enqueue(ts::job_types::Batch, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
    pool->stop();
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);
  }
}

TEST(GuideExamples, StandardLibraryOnlyBlocks) {
  static_assert(sizeof(WorkerData) == 64);
  WorkerData data;
  data.processed_jobs.fetch_add(1, std::memory_order_relaxed);
  EXPECT_EQ(data.processed_jobs.load(std::memory_order_relaxed), 1U);

  JobPool<reusable_job> jobs;
  auto job = jobs.acquire();
  job->state = 5;
  reusable_job* first = job.get();
  jobs.release(std::move(job));
  auto again = jobs.acquire();
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(again->state, 0);

  const PerformanceMonitor monitor;
  EXPECT_EQ(monitor.get_average_latency(), 0.0);
  EXPECT_EQ(monitor.get_throughput(), 0.0);
}

// 003 "Usage recommendations", 1-3, as written inside each test.
TEST(GuideExamples, GeneralApplication) {
  using namespace thread_system;
  // Use standard thread pool with adaptive queues
  auto pool = std::make_shared<thread_pool>("MyPool");

  // Add workers (hardware_concurrency for CPU-bound)
  for (int i = 0; i < std::thread::hardware_concurrency(); ++i) {
    pool->enqueue(std::make_unique<thread_worker>());
  }
  pool->start();

  std::atomic<int> ran{0};
  ASSERT_TRUE(pool->enqueue(counting_job(ran)));
  EXPECT_EQ(pool->worker_count(), std::size_t{std::thread::hardware_concurrency()});
  pool->stop();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);
}

TEST(GuideExamples, PrioritySensitiveApplication) {
  using namespace thread_system;
  // Use typed thread pool with adaptive queues
  auto pool = std::make_shared<typed_thread_pool_t<job_types>>("PriorityPool");

  // Add specialized workers
  for (auto priority : {job_types::RealTime, job_types::Batch, job_types::Background}) {
    auto worker = std::make_unique<typed_thread_worker_t<job_types>>();
    worker->set_responsibilities({priority});
    pool->enqueue(std::move(worker));
  }

  // Add universal workers for load balancing
  for (int i = 0; i < 2; ++i) {
    auto worker = std::make_unique<typed_thread_worker_t<job_types>>();
    worker->set_responsibilities({job_types::RealTime, job_types::Batch, job_types::Background});
    pool->enqueue(std::move(worker));
  }
  pool->start();

  EXPECT_EQ(pool->get_workers().size(), 5U);
  std::atomic<int> ran{0};
  for (auto t : {job_types::RealTime, job_types::Batch, job_types::Background}) {
    ASSERT_TRUE(pool->enqueue(t, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  }
  pool->stop();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 3);
}

TEST(GuideExamples, HighConcurrencyScenario) {
  using namespace thread_system;
  // Standard pool with batch processing
  auto pool = std::make_shared<thread_pool>("HighConcurrency");

  // Configure workers for batch processing
  std::vector<std::unique_ptr<thread_worker>> workers;
  for (int i = 0; i < std::thread::hardware_concurrency() * 2; ++i) {
    auto worker = std::make_unique<thread_worker>();
    worker->set_batch_processing(true, 32);  // Process up to 32 jobs at once
    workers.push_back(std::move(worker));
  }
  pool->enqueue_batch(std::move(workers));
  pool->start();

  EXPECT_EQ(pool->get_workers()[0]->injector_batch(), 32U);
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool->enqueue(counting_job(ran)));
  pool->stop();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 100);
}

TEST(GuideExamples, PortsOfTheBlocksThatDoNotCompileAsWritten) {
  const unsigned hw = std::thread::hardware_concurrency();
  EXPECT_EQ(determine_optimal_thread_count(WorkloadType::CpuBound), hw);
  EXPECT_EQ(determine_optimal_thread_count(WorkloadType::MemoryBound), std::max(1u, hw / 2));
  EXPECT_EQ(determine_optimal_thread_count(WorkloadType::IoBlocking), 2 * hw);

  auto pool = std::make_shared<ts::typed_thread_pool>("Typed");
  configure_type_pool(pool, WorkloadProfile{0.0, 0.5, 0.25});  // every type still gets a worker
  EXPECT_GE(pool->get_workers().size(), 3U);
  ASSERT_TRUE(pool->start());
  std::atomic<int> ran{0};
  for (auto t : {ts::job_types::RealTime, ts::job_types::Batch, ts::job_types::Background}) {
    ASSERT_TRUE(pool->enqueue(t, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  }
  pool->stop();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 3);
}
