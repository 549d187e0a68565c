// typed_thread_worker_t and the job_type concept
// (include/thread_system/pools/typed_worker.hpp): a worker with no
// responsibilities is universal; responsibilities are set before the worker
// joins a pool and refused with `already_started` afterwards, changing
// nothing; a typed pool can be keyed by enums and integers only.
#include "thread_system/pools/typed_worker.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "thread_system/pools/job_types.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"

namespace ts = thread_system;
using ts::job_types;

namespace {

enum class lane : std::uint8_t { fast, slow };
static_assert(ts::job_type<job_types>);
static_assert(ts::job_type<lane>);
static_assert(ts::job_type<int>);
static_assert(ts::job_type<std::uint8_t>);
static_assert(!ts::job_type<double>);
static_assert(!ts::job_type<std::string>);
static_assert(!ts::job_type<job_types*>);

TEST(TypedWorker, WithoutResponsibilitiesAWorkerIsUniversal) {
  const ts::typed_thread_worker_t<job_types> w;
  EXPECT_TRUE(w.is_universal());
  EXPECT_TRUE(w.get_responsibilities().empty());
  const ts::typed_thread_worker_t<job_types> named{std::string("named")};
  EXPECT_TRUE(named.is_universal());
}

TEST(TypedWorker, ResponsibilitiesAreSetBeforeThePool) {
  ts::typed_thread_worker_t<job_types> w{{job_types::Batch}};
  EXPECT_FALSE(w.is_universal());
  ASSERT_TRUE(w.set_responsibilities({job_types::RealTime, job_types::Background}));
  EXPECT_EQ(w.get_responsibilities(), (std::vector<job_types>{job_types::RealTime, job_types::Background}));
  ASSERT_TRUE(w.set_responsibilities(std::vector<job_types>{}));
  EXPECT_TRUE(w.is_universal()) << "an empty list makes it universal again";
}

TEST(TypedWorker, ResponsibilitiesAreFixedOnceTheWorkerIsInAPool) {
  ts::typed_thread_pool_t<job_types> pool{"fixed"};
  auto owned = std::make_unique<ts::typed_thread_worker_t<job_types>>(std::vector<job_types>{job_types::Batch});
  ts::typed_thread_worker_t<job_types>* w = owned.get();
  ASSERT_TRUE(pool.add_worker(std::move(owned)));
  const auto refused = w->set_responsibilities({job_types::RealTime});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::already_started);
  EXPECT_EQ(w->get_responsibilities(), std::vector<job_types>{job_types::Batch}) << "nothing changed";
}

// A plain thread_pool takes a typed worker as a thread_worker; the worker's
// responsibilities are fixed there too (a later set_responsibilities() would
// race with readers of get_responsibilities()).
TEST(TypedWorker, ResponsibilitiesAreFixedInAPlainThreadPoolToo) {
  ts::thread_pool pool{"plain"};
  auto owned = std::make_unique<ts::typed_thread_worker_t<job_types>>(std::vector<job_types>{job_types::Batch});
  ts::typed_thread_worker_t<job_types>* w = owned.get();
  ASSERT_TRUE(pool.enqueue(std::move(owned)));
  const auto refused = w->set_responsibilities({job_types::RealTime});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::already_started);
  EXPECT_EQ(w->get_responsibilities(), std::vector<job_types>{job_types::Batch}) << "nothing changed";
  // The plain pool has no types: the worker runs every job it is given.
  ASSERT_TRUE(pool.start());
  auto done = pool.submit([] { return 7; });
  EXPECT_EQ(done.get(), 7);
}

TEST(TypedWorker, AWorkerAPoolMadeForResizeHasFixedResponsibilities) {
  ts::typed_thread_pool_t<job_types> pool{"resized"};
  ASSERT_TRUE(pool.resize(1));
  auto workers = pool.get_workers();
  ASSERT_EQ(workers.size(), 1U);
  const auto refused = workers[0]->set_responsibilities({job_types::RealTime});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::already_started);
  EXPECT_TRUE(workers[0]->is_universal());
}

}  // namespace
