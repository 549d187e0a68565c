// compat/lockfree_pools.hpp: the seed guides' lock-free pool names. Each
// construction path runs on the lock-free injector (the seed's lock-free
// pool example must not silently run on the mutex queue), keeps every other
// option, and the guides' code using these names compiles and runs.
#include "thread_system/compat/lockfree_pools.hpp"

// The guides ignore results the library marks [[nodiscard]] (for their users
// a warning, not an error); their code is compiled here as written.
#pragma GCC diagnostic ignored "-Wunused-result"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <memory>
#include <type_traits>
#include <vector>

#include "../support/test_support.hpp"

namespace ts = thread_system;

static_assert(std::is_base_of_v<ts::thread_pool, ts::lockfree_thread_pool>);
static_assert(std::is_same_v<ts::lockfree_thread_worker, ts::thread_worker>);
static_assert(std::is_base_of_v<ts::typed_thread_pool, ts::typed_lockfree_thread_pool>);
static_assert(std::is_same_v<ts::typed_lockfree_thread_worker, ts::typed_thread_worker>);
static_assert(std::is_same_v<ts::lockfree_mpmc_queue, ts::lockfree_queue>);

TEST(LockfreeThreadPool, TheGuidesExampleRunsOnTheLockfreeInjector) {
  using namespace thread_system;  // the guide's only change: this namespace
  // 000/001 "Usage Examples" of the lock-free pool, as written there.
  auto pool = std::make_shared<lockfree_thread_pool>("MyLockfreePool");
  std::vector<std::unique_ptr<lockfree_thread_worker>> workers;
  for (int i = 0; i < 8; ++i) {
    auto worker = std::make_unique<lockfree_thread_worker>();
    worker->set_batch_processing(true, 32);
    workers.push_back(std::move(worker));
  }
  pool->enqueue_batch(std::move(workers));
  pool->start();
  std::atomic<int> ran{0};
  auto job = std::make_unique<callback_job>([&ran]() -> result_void {
    ran.fetch_add(1, std::memory_order_relaxed);  // read after stop()
    return {};
  });
  pool->enqueue(std::move(job));
  auto stats = pool->get_workers()[0]->get_statistics();
  (void)stats.jobs_processed;
  (void)stats.avg_processing_time_ns;

  EXPECT_EQ(pool->queue_kind(), pool_queue::lockfree);
  EXPECT_EQ(pool->get_name(), "MyLockfreePool");
  EXPECT_EQ(pool->worker_count(), 8U);
  const auto report = pool->stop();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);
  EXPECT_EQ(report.executed, 1U);
}

TEST(LockfreeThreadPool, EveryConstructorTakesTheOptionsAndForcesTheLockfreeQueue) {
  ts::pool_options o;
  o.queue = ts::pool_queue::mutex;  // replaced: the type says lock-free
  o.backpressure = ts::backpressure::reject(4);
  ts::lockfree_thread_pool seed{"seed", o};
  EXPECT_EQ(seed.queue_kind(), ts::pool_queue::lockfree);
  ts::lockfree_thread_pool concise{2, o};
  EXPECT_EQ(concise.queue_kind(), ts::pool_queue::lockfree);
  EXPECT_EQ(concise.worker_count(), 2U);
  ts::lockfree_thread_pool defaulted;
  EXPECT_EQ(defaulted.queue_kind(), ts::pool_queue::lockfree);
  EXPECT_EQ(defaulted.get_name(), "lockfree_thread_pool");
  // The other options are kept: backpressure refuses a fifth queued job.
  // Both workers are held inside a job first, so nothing queued can start
  // (and free room) while the queue is filled.
  std::latch started{2};
  std::latch release{1};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(concise.enqueue([&] {
      started.count_down();
      release.wait();
    }));
  }
  started.wait();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(concise.enqueue([] {}));
  auto refused = concise.enqueue([] {});
  release.count_down();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::queue_full);
  concise.wait_idle();
}

// The concise constructors need no options, as thread_pool's, and a count
// of 0 gets the same refusal (not the seed constructor's name from a null
// pointer).
TEST(LockfreeThreadPool, AWorkerCountAloneConstructsAsThreadPoolsDoes) {
  ts::lockfree_thread_pool two(2);
  EXPECT_EQ(two.worker_count(), 2U);
  EXPECT_EQ(two.queue_kind(), ts::pool_queue::lockfree);
  EXPECT_TRUE(two.is_running());
  ts::typed_lockfree_thread_pool typed(2);
  EXPECT_EQ(typed.worker_count(), 2U);
  auto code_of = [](auto make) -> int {
    try {
      make();
      return -1;  // accepted
    } catch (const ts::error_exception& e) {
      return static_cast<int>(e.code());
    } catch (...) {
      return -2;  // anything else
    }
  };
  const int plain = code_of([] { ts::thread_pool p(0); });
  EXPECT_EQ(plain, static_cast<int>(ts::error_code::invalid_argument));
  EXPECT_EQ(code_of([] { ts::lockfree_thread_pool p(0); }), plain);
  EXPECT_EQ(code_of([] { ts::typed_lockfree_thread_pool p(0); }), code_of([] { ts::typed_thread_pool p(0); }));
}

TEST(TypedLockfreeThreadPool, TheGuidesWorkersAndAllTypesWork) {
  using namespace thread_system;
  // 000/001 4b, the lock-free branch: specialists and a universal worker.
  auto pool = std::make_shared<typed_lockfree_thread_pool>("HighConcurrency");
  std::vector<std::unique_ptr<typed_lockfree_thread_worker>> workers;
  workers.push_back(std::make_unique<typed_lockfree_thread_worker>(std::vector<job_types>{job_types::RealTime},
                                                                   "RealTime Specialist"));
  workers.push_back(
      std::make_unique<typed_lockfree_thread_worker>(std::vector<job_types>{job_types::Batch}, "Batch Specialist"));
  workers.push_back(std::make_unique<typed_lockfree_thread_worker>(std::vector<job_types>{job_types::Background},
                                                                   "Background Specialist"));
  workers.push_back(
      std::make_unique<typed_lockfree_thread_worker>(typed_thread_pool_module::all_types(), "Universal Worker"));
  pool->enqueue_batch(std::move(workers));
  ASSERT_TRUE(pool->start());
  EXPECT_EQ(pool->queue_kind(), pool_queue::lockfree);
  EXPECT_EQ(typed_thread_pool_module::all_types(),
            (std::vector<job_types>{job_types::RealTime, job_types::Batch, job_types::Background}));
  std::atomic<int> ran{0};
  for (auto t : typed_thread_pool_module::all_types()) {
    ASSERT_TRUE(pool->enqueue(t, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));  // read after stop()
  }
  const auto report = pool->stop();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 3);
  EXPECT_EQ(report.executed, 3U);

  ts::typed_pool_options<job_types> o;
  o.queue = pool_queue::mutex;
  typed_lockfree_thread_pool concise{2, o};
  EXPECT_EQ(concise.queue_kind(), pool_queue::lockfree);
}
