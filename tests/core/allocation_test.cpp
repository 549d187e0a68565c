// Proves that small jobs cause no heap allocation, by counting every call of
// the global operator new in this test binary (it has its own executable so
// the replacement affects nothing else).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdlib>
#include <latch>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../coro/foreign_coroutines.hpp"
#include "../support/test_support.hpp"
#include "thread_system/compat/job.hpp"
#include "thread_system/compat/lockfree_pools.hpp"
#include "thread_system/compat/typed_job.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/coro/task.hpp"
#include "thread_system/pools/task_group.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/queues/adaptive_job_queue.hpp"
#include "thread_system/queues/bounded_queue.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"
#include "thread_system/queues/two_lock_job_queue.hpp"
#include "thread_system/scheduler/timer_queue.hpp"
#include "thread_system/services/service_registry.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace {
std::atomic<std::uint64_t> g_allocations{0};
// When set, this thread's array allocations fail (a queue's ring growing).
thread_local bool t_fail_array_new = false;
// When non-zero, this thread's single-object allocations of exactly this many
// bytes fail: sizeof(job_function), a large job's box. (The refusal's own
// error message must still be allocated, so failing every size would only
// test that the error cannot be built.)
thread_local std::size_t t_fail_new_of_size = 0;
// The same on every thread (for work the library hands to one of its own).
// relaxed: set and cleared around the call under test, which orders it.
std::atomic<std::size_t> g_fail_new_of_size{0};
// When set, every allocation of this thread fails, the error message's too.
thread_local bool t_fail_all_new = false;
// When non-zero, this thread's t_fail_nth_new-th single-object allocation
// from now fails (once): a sweep over k finds a path that survives the
// first failure but not a later one.
thread_local int t_fail_nth_new = 0;
}  // namespace

// Replacements of the global allocation functions (counting, then malloc).
// GCC's -Wmismatched-new-delete sees `free` in a replaced operator delete
// after inlining a `new` and warns; here every operator new is malloc, so
// the pairing is right by construction.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (t_fail_all_new || (t_fail_new_of_size != 0 && n == t_fail_new_of_size)) throw std::bad_alloc();
  if (const std::size_t g = g_fail_new_of_size.load(std::memory_order_relaxed); g != 0 && n == g)
    throw std::bad_alloc();
  if (t_fail_nth_new != 0 && --t_fail_nth_new == 0) throw std::bad_alloc();
  g_allocations.fetch_add(1, std::memory_order_relaxed);  // a count, no ordering needed
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (t_fail_array_new || t_fail_all_new) throw std::bad_alloc();
  g_allocations.fetch_add(1, std::memory_order_relaxed);  // a count, no ordering needed
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// The nothrow form too, so that every allocation in this binary is paired
// with the free() below (sanitizers otherwise supply their own).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
// The aligned forms (lock-free segments, alignas(64) state), counted and
// failed the same way.
void* operator new(std::size_t n, std::align_val_t al) {
  if (t_fail_all_new) throw std::bad_alloc();
  g_allocations.fetch_add(1, std::memory_order_relaxed);  // a count, no ordering needed
  const auto align = static_cast<std::size_t>(al);
  if (void* p = std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t al) {
  if (t_fail_array_new) throw std::bad_alloc();
  return operator new(n, al);
}
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return operator new(n, al);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
// The array nothrow forms (a pool's task_group slots are one aligned
// array): without them the sanitizers' own allocate what free() releases.
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new[](n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return operator new[](n, al);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace ts = thread_system;

namespace {
std::uint64_t allocations() { return g_allocations.load(std::memory_order_relaxed); }
}  // namespace

TEST(Allocation, SmallJobFunctionDoesNotAllocate) {
  std::array<char, 40> payload{};
  int* out = nullptr;
  int value = 0;
  out = &value;
  const auto before = allocations();
  {
    ts::job_function f([payload, out] { *out += payload[0] + 1; });  // 48 bytes of capture
    ts::job_function g(std::move(f));
    g();
  }
  EXPECT_EQ(allocations() - before, 0U);
  EXPECT_EQ(value, 1);
}

TEST(Allocation, DefaultCancellationTokenDoesNotAllocate) {
  const std::uint64_t before = allocations();
  {
    ts::cancellation_token token;
    ts::cancellation_token copy = token;
    EXPECT_FALSE(copy.is_cancelled());
  }
  EXPECT_EQ(allocations(), before);
  ts::cancellation_token created = ts::cancellation_token::create();  // the seed's way to get a state
  EXPECT_GT(allocations(), before);
  EXPECT_TRUE(created.can_be_cancelled());
}

TEST(Allocation, LargeJobFunctionAllocatesOnce) {
  std::array<char, 128> payload{};
  const auto before = allocations();
  {
    ts::job_function f([payload] { (void)payload; });
    ts::job_function g(std::move(f));
    g();
  }
  EXPECT_EQ(allocations() - before, 1U);
}

// Once the queue has grown to the working-set size, enqueueing and running
// small jobs allocates nothing at all, on any thread.
namespace {
// Runs `rounds` rounds of 10K small jobs; returns the allocations made.
std::uint64_t run_rounds(ts::thread_pool& pool, int rounds, std::atomic<std::uint64_t>& sum) {
  constexpr int jobs = 10'000;
  const auto before = allocations();
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < jobs; ++i) {
      auto r = pool.enqueue([&sum, i] { sum.fetch_add(static_cast<std::uint64_t>(i), std::memory_order_relaxed); });
      EXPECT_TRUE(r);
    }
    pool.wait_idle();
  }
  return allocations() - before;
}
constexpr std::uint64_t round_sum = 9'999ULL * 10'000ULL / 2;
}  // namespace

// With one worker every job node returns to the cache it came from, so after
// warm-up nothing at all is allocated: not per job, not per batch.
TEST(Allocation, PoolSteadyStateDoesNotAllocatePerJob) {
  ts::pool_options options;
  // 512 KiB segments: a round's 10 000 jobs (32 bytes each) fill 61% of
  // one. A drained injector goes on where its last job ended, so the second
  // round crosses into a second segment; from then on the two take turns.
  options.initial_queue_capacity = 16 * 1024;
  ts::thread_pool pool{1, options};
  std::atomic<std::uint64_t> sum{0};
  (void)run_rounds(pool, 2, sum);  // warm-up: thread start, first chunk of nodes, the injector's second segment
  EXPECT_EQ(run_rounds(pool, 3, sum), 0U) << "allocations while running 30000 small jobs";
  EXPECT_EQ(sum.load(std::memory_order_seq_cst), 5 * round_sum);  // seq_cst: pairs with the writers' RMW/store
}

// With several workers, nodes migrate between the workers' caches (a thief
// frees into its own) and the node pool grows in chunks of 256 until it
// covers that drift. Still no allocation per job: 100K jobs after warm-up
// cause at most a handful of chunk allocations.
TEST(Allocation, PoolWithStealingAllocatesNoMoreThanAFewChunks) {
  ts::pool_options options;
  options.initial_queue_capacity = 16 * 1024;
  ts::thread_pool pool{2, options};
  std::atomic<std::uint64_t> sum{0};
  (void)run_rounds(pool, 2, sum);
  const std::uint64_t allocated = run_rounds(pool, 10, sum);
  EXPECT_LE(allocated, 16U) << "100000 jobs caused " << allocated << " allocations";
  EXPECT_EQ(sum.load(std::memory_order_seq_cst), 12 * round_sum);  // seq_cst: pairs with the writers' RMW/store
}

// A queue that cannot allocate the storage a push needs (job_queue: a
// segment) refuses the push with `resource_exhausted` and leaves the job with
// the caller; nothing queued is lost, and the queue works again once memory
// is available.
namespace {
template <typename Queue>
void expect_out_of_memory_is_reported(Queue& queue) {
  int ran = 0;
  std::size_t accepted = 0;
  t_fail_array_new = true;
  ts::result<void> pushed;
  ts::job_function job;
  for (int i = 0; i < 100000; ++i) {  // a segment holds at most a few thousand jobs
    job = ts::job_function([&ran] { ++ran; });
    pushed = queue.try_push(std::move(job));
    if (!pushed) break;
    ++accepted;
  }
  t_fail_array_new = false;
  ASSERT_FALSE(pushed) << "100000 pushes succeeded without allocating";
  EXPECT_EQ(pushed.error().code(), ts::error_code::resource_exhausted) << pushed.error().message();
  ASSERT_TRUE(static_cast<bool>(job)) << "a refused job must stay with the caller";
  ASSERT_TRUE(queue.try_push(std::move(job)));  // memory is back: the queue grows
  ++accepted;
  ts::job_function out;
  while (queue.try_pop(out)) out();
  EXPECT_EQ(static_cast<std::size_t>(ran), accepted);
}
}  // namespace

TEST(Allocation, JobQueueReportsOutOfMemoryWhenItCannotGrow) {
  ts::job_queue queue{2};
  expect_out_of_memory_is_reported(queue);
}

// A batch that needs several new segments, one of which cannot be
// allocated, is refused whole: no job of it is moved from, the jobs queued
// before stay queued, in order, and the same batch goes in once memory is back.
namespace {
template <typename Queue>
void expect_batch_refused_whole(Queue& queue) {  // 64-word segments: 21 small jobs each
  std::vector<int> seen;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(queue.try_push(ts::job_function([&seen, i] { seen.push_back(i); })));
  std::vector<ts::job_function> batch;
  for (int i = 10; i < 110; ++i) batch.emplace_back([&seen, i] { seen.push_back(i); });
  t_fail_array_new = true;
  const ts::result<void> refused = queue.push_batch(batch);
  t_fail_array_new = false;
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::resource_exhausted) << refused.error().message();
  for (const auto& job : batch) ASSERT_TRUE(static_cast<bool>(job)) << "a refused batch must stay with the caller";
  EXPECT_EQ(queue.size_approx(), 10U);
  ASSERT_TRUE(queue.push_batch(batch));
  ts::job_function out;
  while (queue.try_pop(out)) out();
  ASSERT_EQ(seen.size(), 110U);
  for (int i = 0; i < 110; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i);
}
}  // namespace

TEST(Allocation, JobQueueRefusesABatchWholeWhenASegmentCannotBeAllocated) {
  ts::job_queue queue{2};
  expect_batch_refused_whole(queue);
}

// The same for two_lock_job_queue, the pools' mutex injector (a segment is
// taken back from the pops or allocated under the tail lock only).
TEST(Allocation, TwoLockJobQueueReportsOutOfMemoryWhenItCannotGrow) {
  ts::two_lock_job_queue queue{2};
  expect_out_of_memory_is_reported(queue);
}

TEST(Allocation, TwoLockJobQueueRefusesABatchWholeWhenASegmentCannotBeAllocated) {
  ts::two_lock_job_queue queue{2};
  expect_batch_refused_whole(queue);
}

TEST(Allocation, AdaptiveQueueReportsOutOfMemoryOfItsMutexQueue) {
  ts::adaptive_job_queue queue{ts::queue_strategy::FORCE_MUTEX};
  expect_out_of_memory_is_reported(queue);
}

// An adaptive queue makes its lock-free queue (a 5312-byte segment and a
// hazard record) only at its first switch to it: one that never switches
// allocates what its mutex queue does and nothing more. FORCE_LOCKFREE makes
// it at construction.
namespace {
template <typename Queue, typename... Args>
std::uint64_t allocations_to_construct(Args... args) {
  const std::uint64_t before = allocations();
  { const Queue queue{args...}; }
  return allocations() - before;
}
}  // namespace

TEST(Allocation, AnAdaptiveQueueThatNeverSwitchesAllocatesNoLockFreeQueue) {
  EXPECT_EQ(allocations_to_construct<ts::adaptive_job_queue>(ts::queue_strategy::ADAPTIVE),
            allocations_to_construct<ts::job_queue>());
  EXPECT_EQ(allocations_to_construct<ts::adaptive_job_queue>(ts::queue_strategy::FORCE_MUTEX),
            allocations_to_construct<ts::job_queue>());
  EXPECT_EQ(allocations_to_construct<ts::two_lock_adaptive_job_queue>(ts::queue_strategy::ADAPTIVE),
            allocations_to_construct<ts::two_lock_job_queue>());
  EXPECT_GT(allocations_to_construct<ts::adaptive_job_queue>(ts::queue_strategy::FORCE_LOCKFREE),
            allocations_to_construct<ts::job_queue>());

  // The first switch makes it; switching back and forth again makes nothing.
  ts::two_lock_adaptive_job_queue queue{ts::queue_strategy::ADAPTIVE, ts::adaptive_policy{1024, 2.0, -1.0}};
  std::uint64_t before = allocations();
  ASSERT_TRUE(queue.force_switch_for_testing());
  EXPECT_GT(allocations(), before);
  ts::job_function out;
  EXPECT_FALSE(queue.try_pop(out));  // the previous (mutex) queue is marked drained
  ASSERT_TRUE(queue.force_switch_for_testing());
  EXPECT_FALSE(queue.try_pop(out));
  before = allocations();
  ASSERT_TRUE(queue.force_switch_for_testing());
  EXPECT_EQ(allocations(), before);
}

// A switch that cannot make the lock-free queue (no memory) is not made:
// the queue stays on its mutex queue, loses nothing, and switches once
// memory is back.
TEST(Allocation, AnAdaptiveQueueThatCannotMakeItsLockFreeQueueStaysOnItsMutexQueue) {
  ts::adaptive_job_queue queue{ts::queue_strategy::ADAPTIVE, ts::adaptive_policy{1024, 2.0, -1.0}};
  int ran = 0;
  ASSERT_TRUE(queue.try_push(ts::job_function([&ran] { ++ran; })));
  t_fail_all_new = true;
  const bool switched = queue.force_switch_for_testing();
  t_fail_all_new = false;
  EXPECT_FALSE(switched);
  EXPECT_EQ(queue.current_strategy(), ts::queue_strategy::FORCE_MUTEX);
  EXPECT_EQ(queue.get_statistics().switches, 0U);
  ASSERT_TRUE(queue.force_switch_for_testing());
  EXPECT_EQ(queue.current_strategy(), ts::queue_strategy::FORCE_LOCKFREE);
  ASSERT_TRUE(queue.try_push(ts::job_function([&ran] { ran += 10; })));
  ts::job_function out;
  while (queue.try_pop(out)) out();
  EXPECT_EQ(ran, 11);
}

// The lock-free and bounded queues keep a job larger than their node or cell
// in a heap box. When the box cannot be allocated the push is refused with
// `resource_exhausted`, the job (or the whole batch) stays with the caller
// as it was, and nothing queued is lost.
namespace {
struct large_job {
  std::array<std::uint64_t, 5> words{};  // 40 bytes: inline in a job_function, too big for both queues' slots
  int* ran = nullptr;
  void operator()() const { ++*ran; }
};
static_assert(sizeof(large_job) > ts::bounded_queue::inline_job_bytes);
static_assert(sizeof(large_job) > ts::lockfree_queue::inline_job_bytes);
static_assert(ts::job_function::stored_inline<large_job>);

template <typename Queue>
void expect_box_failure_is_reported(Queue& queue) {
  int ran = 0;
  ASSERT_TRUE(queue.try_push(ts::job_function(large_job{{}, &ran})));  // also warms any node pool up

  ts::job_function job{large_job{{7}, &ran}};
  t_fail_new_of_size = sizeof(ts::job_function);
  auto pushed = queue.try_push(std::move(job));
  t_fail_new_of_size = 0;
  ASSERT_FALSE(pushed);
  EXPECT_EQ(pushed.error().code(), ts::error_code::resource_exhausted) << pushed.error().message();
  ASSERT_NE(job.get_if<large_job>(), nullptr) << "a refused job must stay with the caller, unchanged";
  EXPECT_EQ(job.get_if<large_job>()->words[0], 7U);

  std::array<ts::job_function, 3> batch{ts::job_function([&ran] { ++ran; }), ts::job_function(large_job{{}, &ran}),
                                        ts::job_function(large_job{{}, &ran})};
  t_fail_new_of_size = sizeof(ts::job_function);
  pushed = queue.push_batch(batch);
  t_fail_new_of_size = 0;
  ASSERT_FALSE(pushed);
  EXPECT_EQ(pushed.error().code(), ts::error_code::resource_exhausted);
  EXPECT_TRUE(static_cast<bool>(batch[0]));
  EXPECT_NE(batch[1].get_if<large_job>(), nullptr);
  EXPECT_NE(batch[2].get_if<large_job>(), nullptr);

  ASSERT_TRUE(queue.try_push(std::move(job)));  // memory is back
  ASSERT_TRUE(queue.push_batch(batch));
  ts::job_function out;
  while (queue.try_pop(out)) out();
  EXPECT_EQ(ran, 5);
}
}  // namespace

TEST(Allocation, BoundedQueueReportsAFailedBox) {
  ts::bounded_queue queue{16};
  expect_box_failure_is_reported(queue);
}

TEST(Allocation, LockfreeQueueReportsAFailedBox) {
  ts::lockfree_queue queue;
  expect_box_failure_is_reported(queue);
}

// With no memory left at all, not even for the error's message, a push
// that needs storage (a segment, a large job's box) is still refused with a
// `resource_exhausted` result: it never throws (the message was a string
// longer than the small-string buffer, and building it threw bad_alloc out
// of try_push). The message may then be empty; the code is always there.
namespace {
template <typename Queue, typename MakeJob>
void expect_refusal_with_no_memory_at_all(Queue& queue, MakeJob make_job) {
  int ran = 0;
  ASSERT_TRUE(queue.try_push(make_job(ran)));  // the thread's first use of the queue may allocate
  std::size_t accepted = 1;
  ts::result<void> pushed;
  bool threw = false;
  t_fail_all_new = true;
  try {
    for (int i = 0; i < 100000; ++i) {  // a segment holds at most a few thousand jobs
      pushed = queue.try_push(make_job(ran));
      if (!pushed) break;
      ++accepted;
    }
  } catch (...) {
    threw = true;
  }
  t_fail_all_new = false;
  EXPECT_FALSE(threw) << "a refusal for lack of memory must be a result, not an exception";
  ASSERT_FALSE(pushed) << "100000 pushes succeeded without allocating";
  EXPECT_EQ(pushed.error().code(), ts::error_code::resource_exhausted);
  ts::job_function out;
  while (queue.try_pop(out)) out();
  EXPECT_EQ(static_cast<std::size_t>(ran), accepted);
}
auto small_job(int& ran) {
  return ts::job_function([&ran] { ++ran; });
}
auto boxed_job(int& ran) { return ts::job_function(large_job{{}, &ran}); }
}  // namespace

TEST(Allocation, EveryQueueRefusesWithAResultWhenNoMemoryIsLeftEvenForTheMessage) {
  {
    SCOPED_TRACE("job_queue");
    ts::job_queue queue{2};
    expect_refusal_with_no_memory_at_all(queue, small_job);
  }
  {
    SCOPED_TRACE("two_lock_job_queue");
    ts::two_lock_job_queue queue{2};
    expect_refusal_with_no_memory_at_all(queue, small_job);
  }
  {
    SCOPED_TRACE("adaptive_job_queue, mutex");
    ts::adaptive_job_queue queue{ts::queue_strategy::FORCE_MUTEX};
    expect_refusal_with_no_memory_at_all(queue, small_job);
  }
  {
    SCOPED_TRACE("adaptive_job_queue, lock-free");
    ts::adaptive_job_queue queue{ts::queue_strategy::FORCE_LOCKFREE};
    expect_refusal_with_no_memory_at_all(queue, small_job);
  }
  {
    SCOPED_TRACE("two_lock_adaptive_job_queue, mutex");
    ts::two_lock_adaptive_job_queue queue{ts::queue_strategy::FORCE_MUTEX};
    expect_refusal_with_no_memory_at_all(queue, small_job);
  }
  {
    SCOPED_TRACE("lockfree_queue");
    ts::lockfree_queue queue;
    expect_refusal_with_no_memory_at_all(queue, small_job);
  }
  {
    SCOPED_TRACE("lockfree_queue, a large job's box");
    ts::lockfree_queue queue;
    expect_refusal_with_no_memory_at_all(queue, boxed_job);
  }
  {
    SCOPED_TRACE("bounded_queue, a large job's box");
    ts::bounded_queue queue{16};
    expect_refusal_with_no_memory_at_all(queue, boxed_job);
  }
}

// Coroutines: frames are recycled (detail/recycling_allocator.hpp). On one
// thread, a steady state of tasks created and finished allocates nothing.
namespace {
ts::task<int> leaf(int v) { co_return v; }
ts::task<int> two_levels(int v) { co_return co_await leaf(v) + 1; }
ts::task<void> hop_once(ts::thread_pool& pool, std::atomic<std::uint64_t>& done) {
  co_await pool.schedule();
  done.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

TEST(Allocation, TasksInSteadyStateDoNotAllocate) {
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ts::sync_wait(two_levels(i)), i + 1);  // warm the caches
  const auto before = allocations();
  int sum = 0;
  for (int i = 0; i < 10'000; ++i) sum += ts::sync_wait(two_levels(1));
  EXPECT_EQ(allocations() - before, 0U);
  EXPECT_EQ(sum, 20'000);
}

// when_all(vector) allocates its slots and its results' room when it is
// called: out of memory there it throws error_exception{resource_exhausted}
// (it let std::bad_alloc out), before any child runs, and the co_await
// allocates nothing (the result vector was allocated after every child had
// run, so a failure there lost their results).
namespace {
ts::task<int> counted_leaf(int v, std::atomic<int>& runs) {
  runs.fetch_add(1, std::memory_order_relaxed);  // a count read on this thread
  co_return v;
}
std::vector<ts::task<int>> counted_leaves(std::atomic<int>& runs) {
  std::vector<ts::task<int>> tasks;
  for (int i = 0; i < 3; ++i) tasks.push_back(counted_leaf(i, runs));
  return tasks;
}
ts::task<std::vector<int>> await_with_no_memory(std::vector<ts::task<int>> tasks) {
  auto all = ts::when_all(std::move(tasks));
  t_fail_all_new = true;
  auto out = co_await all;
  t_fail_all_new = false;
  co_return out;
}
}  // namespace

TEST(Allocation, WhenAllOfAVectorRefusesOutOfMemoryBeforeAnyChildRuns) {
  for (const int nth : {1, 2}) {  // the slots, then the results' room
    SCOPED_TRACE(nth);
    std::atomic<int> runs{0};
    auto tasks = counted_leaves(runs);
    t_fail_nth_new = nth;
    try {
      auto all = ts::when_all(std::move(tasks));
      t_fail_nth_new = 0;
      ADD_FAILURE() << "when_all() did not report the failed allocation";
    } catch (const ts::error_exception& e) {
      t_fail_nth_new = 0;
      EXPECT_EQ(e.code(), ts::error_code::resource_exhausted);
    } catch (const std::bad_alloc&) {
      t_fail_nth_new = 0;
      ADD_FAILURE() << "std::bad_alloc escaped when_all()";
    }
    EXPECT_EQ(runs.load(std::memory_order_relaxed), 0);
  }
  std::atomic<int> runs{0};
  std::vector<int> out;
  try {
    out = ts::sync_wait(await_with_no_memory(counted_leaves(runs)));
  } catch (const std::bad_alloc&) {
    t_fail_all_new = false;
    ADD_FAILURE() << "the co_await of when_all(vector) allocated";
  }
  EXPECT_EQ(out, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(runs.load(std::memory_order_relaxed), 3);
}

// Across threads (created on this one, freed on the workers) frames travel
// back through the shared lists. The allocator holds the peak number in
// flight (every round spawns into a paused pool, so each round reaches the
// same peak) plus what each thread's cache keeps; what it may still request
// after the first round is bounded by those caches, not by the number of
// tasks: without recycling each of these 40 000 tasks would cost two
// allocations (its frame and its spawn record).
TEST(Allocation, SpawnedTasksInSteadyStateDoNotAllocatePerTask) {
  ts::thread_pool pool{2};
  std::atomic<std::uint64_t> done{0};
  constexpr int tasks = 2'000;
  auto round = [&] {
    pool.pause();
    for (int i = 0; i < tasks; ++i) ASSERT_TRUE(ts::spawn(pool, hop_once(pool, done)));
    pool.resume();
    pool.wait_idle();
  };
  for (int warm = 0; warm < 5; ++warm) round();
  const auto before = allocations();
  for (int r = 0; r < 20; ++r) round();
  // Two size classes, three threads, each keeping up to thread_cache_limit + one batch.
  constexpr std::uint64_t cache_bound = 2 * 3 * (ts::detail::thread_cache_limit + ts::detail::thread_cache_limit / 2);
  EXPECT_LE(allocations() - before, cache_bound);
  EXPECT_EQ(done.load(std::memory_order_relaxed), 25U * tasks);
}

// With no memory left at all, every refusal of a pool or a timer queue comes
// back as a result with its own code (the message may be empty): never a raw
// std::bad_alloc, and never `resource_exhausted` in place of the real reason
// (a stopped pool is `pool_stopped`, a bad argument `invalid_argument`).
// A call that does need memory (resize() adding workers) is
// `resource_exhausted`.
namespace {
template <typename Call>
std::optional<ts::error_code> refusal_with_no_memory(Call call) {
  t_fail_all_new = true;
  try {
    const auto r = call();
    t_fail_all_new = false;
    if (r) return std::nullopt;
    return r.error().code();
  } catch (const std::exception& e) {
    t_fail_all_new = false;
    ADD_FAILURE() << "threw " << e.what();
    return std::nullopt;
  }
}
}  // namespace

TEST(Allocation, PoolAndTimerRefusalsKeepTheirCodeWhenNoMemoryIsLeft) {
  using ts::error_code;
  ts::thread_pool running{1};
  ts::thread_pool stopped{1};
  (void)stopped.stop();
  ts::typed_thread_pool_t<ts::job_types> typed{1};
  ts::timer_queue timers{[](ts::job_function&& f) -> ts::result<void> {
    f();
    return {};
  }};
  (void)timers.stop();
  const std::array<int, 1> cpu{0};

  EXPECT_EQ(refusal_with_no_memory([&] { return stopped.enqueue([] {}); }), error_code::pool_stopped);
  EXPECT_EQ(refusal_with_no_memory([&] { return stopped.resize(2); }), error_code::pool_stopped);
  EXPECT_EQ(refusal_with_no_memory([&] { return running.start(); }), error_code::already_started);
  EXPECT_EQ(refusal_with_no_memory([&] { return running.resize(0); }), error_code::invalid_argument);
  EXPECT_EQ(refusal_with_no_memory([&] { return running.resize(64); }), error_code::resource_exhausted);
  EXPECT_EQ(refusal_with_no_memory([&] { return running.set_affinity(99, cpu); }), error_code::invalid_argument);
  EXPECT_EQ(refusal_with_no_memory([&] { return running.enqueue(std::unique_ptr<ts::thread_worker>{}); }),
            error_code::invalid_argument);
  EXPECT_EQ(refusal_with_no_memory([&] { return typed.resize(0); }), error_code::invalid_argument);
  EXPECT_EQ(refusal_with_no_memory([&] { return typed.start(); }), error_code::already_started);
  EXPECT_EQ(refusal_with_no_memory([&] { return stopped.schedule_after(std::chrono::milliseconds(1), [] {}); }),
            error_code::pool_stopped);
  EXPECT_TRUE(
      refusal_with_no_memory([&] { return timers.schedule_after(std::chrono::milliseconds(1), [] {}); }).has_value());
  // Everything still works once memory is back.
  EXPECT_TRUE(running.resize(2));
  EXPECT_TRUE(running.enqueue([] {}));
  running.wait_idle();
}

// A periodic timer's run re-arms the timer when it ends. With another timer
// added while the run was in flight, the heap's array was full again, and
// the re-arm grew it - or, with no memory, cancelled the timer silently
// (no error, no refusal: the timer just ended). schedule_*() now keeps room
// for every periodic run in flight, so the re-arm allocates nothing. The
// run is held by the target and run here with every allocation failing.
TEST(Allocation, APeriodicTimersReArmNeedsNoMemory) {
  std::mutex m;
  std::vector<ts::job_function> held;  // guarded by m
  ts::timer_queue timers{[&](ts::job_function&& f) -> ts::result<void> {
    std::lock_guard lock(m);
    held.push_back(std::move(f));
    return {};
  }};
  auto tick = timers.schedule_every(std::chrono::milliseconds(1), [] {});
  ASSERT_TRUE(tick);
  ASSERT_TRUE(ts::test::eventually([&] {
    std::lock_guard lock(m);
    return !held.empty();
  }));
  // The run is in flight; a far timer takes the heap's last free slot.
  auto far = timers.schedule_after(std::chrono::hours(1), [] {});
  ASSERT_TRUE(far);
  ts::job_function run;
  {
    std::lock_guard lock(m);
    run = std::move(held.front());
  }
  t_fail_all_new = true;
  run();  // ends the run: the re-arm
  t_fail_all_new = false;
  EXPECT_TRUE(tick->is_active()) << "the periodic timer ended when its re-arm found no memory";
  EXPECT_EQ(timers.statistics().cancelled, 0U);
  const ts::timer_statistics st = timers.stop();
  EXPECT_EQ(st.cancelled, 2U);  // the periodic timer and the far one
}

// The same for the seed-style and typed entry points whose refusal message
// was built with std::string before any out-of-memory guard: a null seed
// job, an empty typed job, a type with no rank, an absent service. Each
// returned its code with memory (and threw std::bad_alloc without).
TEST(Allocation, SeedTypedAndServiceRefusalsKeepTheirCodeWhenNoMemoryIsLeft) {
  using ts::error_code;
  ts::thread_pool pool{1};
  ts::typed_thread_pool_t<ts::job_types> typed{1};
  ts::service_registry registry;
  struct absent_service {};
  EXPECT_EQ(refusal_with_no_memory([&] { return pool.enqueue(std::unique_ptr<ts::job>{}); }),
            error_code::invalid_argument);
  EXPECT_EQ(refusal_with_no_memory([&] {
              std::vector<std::unique_ptr<ts::job>> none;
              return pool.enqueue_batch(std::move(none));
            }),
            std::nullopt);  // an empty batch: accepted, nothing to allocate
  EXPECT_EQ(refusal_with_no_memory([&] { return typed.enqueue(ts::job_types::RealTime, ts::job_function{}); }),
            error_code::invalid_argument);
  EXPECT_EQ(refusal_with_no_memory([&] { return typed.enqueue(std::unique_ptr<ts::typed_job>{}); }),
            error_code::invalid_argument);
  EXPECT_EQ(refusal_with_no_memory([&] { return typed.enqueue(static_cast<ts::job_types>(200), [] {}); }),
            error_code::invalid_argument);
  EXPECT_EQ(refusal_with_no_memory([&] { return typed.set_queue(ts::pool_queue::mutex); }), std::nullopt);
  EXPECT_EQ(refusal_with_no_memory([&] { return registry.resolve<absent_service>(); }), error_code::not_found);
  typed.wait_idle();
}

// The seed-style refusals copied the refusal's error (its message) out of
// the conversion's result outside any out-of-memory guard: with the k-th
// allocation failing, std::bad_alloc escaped enqueue() for some k. Every k
// now gets a result with the refusal's code (or resource_exhausted).
TEST(Allocation, SeedRefusalsSurviveAFailureAtAnyAllocation) {
  using ts::error_code;
  ts::thread_pool pool{1};
  ts::typed_thread_pool_t<ts::job_types> typed{1};
  // prepare() makes the call's argument with memory; call(arg) is swept.
  auto sweep = [](const char* what, auto prepare, auto call) {
    for (int k = 1; k <= 16; ++k) {
      auto arg = prepare();
      t_fail_nth_new = k;
      try {
        const auto r = call(std::move(arg));
        t_fail_nth_new = 0;
        ASSERT_FALSE(r) << what << ", failing allocation " << k;
        EXPECT_TRUE(r.error().code() == error_code::invalid_argument ||
                    r.error().code() == error_code::resource_exhausted)
            << what << ", failing allocation " << k << ": " << r.error().message();
      } catch (const std::exception& e) {
        t_fail_nth_new = 0;
        ADD_FAILURE() << what << ", failing allocation " << k << ": threw " << e.what();
      }
    }
    t_fail_nth_new = 0;
  };
  auto no_job = [] { return std::unique_ptr<ts::job>{}; };
  sweep("thread_pool::enqueue(null job)", no_job,
        [&](std::unique_ptr<ts::job> j) { return pool.enqueue(std::move(j)); });
  sweep(
      "thread_pool::enqueue_batch({null job})",
      [] {
        std::vector<std::unique_ptr<ts::job>> jobs;
        jobs.emplace_back();
        return jobs;
      },
      [&](std::vector<std::unique_ptr<ts::job>> jobs) { return pool.enqueue_batch(std::move(jobs)); });
  sweep(
      "typed_thread_pool::enqueue(null typed job)", [] { return std::unique_ptr<ts::typed_job>{}; },
      [&](std::unique_ptr<ts::typed_job> j) { return typed.enqueue(std::move(j)); });
  typed.wait_idle();
}

// A seed job whose do_work() fails, with no memory left on the thread that
// runs it: the error keeps its code (job_failed) on its way to the pool's
// error handler; building its message threw std::bad_alloc in its place.
TEST(Allocation, AFailingSeedJobReportsJobFailedWithNoMemoryLeft) {
  class failing final : public ts::job {
   public:
    failing() : job("a seed job whose name needs the heap") {}
    ts::result<void> do_work() override { return ts::make_error(ts::error_code::invalid_argument, "no"); }
  };
  auto fn = ts::job::to_job_function(std::make_unique<failing>(), "test");
  ASSERT_TRUE(fn);
  t_fail_all_new = true;
  try {
    (*fn)();
    t_fail_all_new = false;
    ADD_FAILURE() << "the failure was not reported";
  } catch (const ts::error_exception& e) {
    t_fail_all_new = false;
    EXPECT_EQ(e.code(), ts::error_code::job_failed);
  } catch (const std::bad_alloc&) {
    t_fail_all_new = false;
    ADD_FAILURE() << "std::bad_alloc in place of job_failed";
  }
}

// Builds a pool with `make(options)` while each allocation in turn fails:
// every failure must be error_exception{resource_exhausted} (or `refusal`,
// the code of options the constructor refuses anyway), or the pool is made;
// never a std::bad_alloc.
template <typename Make>
void expect_construction_reports_out_of_memory(const char* what, Make make,
                                               ts::error_code refusal = ts::error_code::resource_exhausted) {
  ts::pool_options opt;
  opt.name = "options whose name needs the heap";
  for (int k = 1; k <= 64; ++k) {
    t_fail_nth_new = k;
    try {
      make(opt);
      t_fail_nth_new = 0;
    } catch (const ts::error_exception& e) {
      t_fail_nth_new = 0;
      EXPECT_TRUE(e.code() == ts::error_code::resource_exhausted || e.code() == refusal)
          << what << ", failing allocation " << k << ": " << e.what();
    } catch (const std::bad_alloc&) {
      t_fail_nth_new = 0;
      ADD_FAILURE() << what << ": std::bad_alloc escaped at failing allocation " << k;
    }
  }
}

// lockfree_thread_pool(name, options) copies the options: out of memory
// there it threw std::bad_alloc, where thread_pool(name, options) throws
// error_exception{resource_exhausted}. Every failing allocation now gives
// the latter (or the pool is made).
TEST(Allocation, ALockfreePoolsConstructorReportsOutOfMemoryAsResourceExhausted) {
  expect_construction_reports_out_of_memory("lockfree_thread_pool{name, options}", [](const ts::pool_options& opt) {
    ts::lockfree_thread_pool pool{"p", opt};
  });
}

// thread_pool{n, options} took its options by value: the copy, made by the
// caller, let std::bad_alloc out of the constructor call (the first
// allocation, for the name). The options are now taken by reference and
// copied inside.
TEST(Allocation, AConcisePoolsConstructorReportsOutOfMemoryAsResourceExhausted) {
  expect_construction_reports_out_of_memory("thread_pool{n, options}", [](const ts::pool_options& opt) {
    ts::thread_pool pool{1, opt};
  });
  // Refusals of bad input build their message from a literal without
  // throwing: it was a std::bad_alloc when that message could not be allocated.
  expect_construction_reports_out_of_memory(
      "thread_pool{0, options}",
      [](const ts::pool_options& opt) {
        ts::thread_pool pool{0, opt};
      },
      ts::error_code::invalid_argument);
  ts::pool_options both;  // built before any allocation fails
  both.name = "options whose name needs the heap";
  both.queue = ts::pool_queue::bounded;
  both.backpressure = ts::backpressure::reject(16);
  expect_construction_reports_out_of_memory(
      "thread_pool{1, bounded queue and backpressure}",
      [&both](const ts::pool_options&) {
        ts::thread_pool pool{1, both};
      },
      ts::error_code::invalid_argument);
}

// A factory returning a std::unique_ptr: the registry makes it a shared_ptr
// (a control block). Out of memory for that, resolve() let std::bad_alloc
// out; it returns resource_exhausted (the instance destroyed), and other
// resolves go on working.
TEST(Allocation, ResolvingAUniquePtrFactoryWithNoMemoryReturnsResourceExhausted) {
  struct service {
    int value = 7;
  };
  for (const auto lifetime : {ts::service_lifetime::transient, ts::service_lifetime::singleton}) {
    ts::service_registry registry;
    ASSERT_TRUE(registry.register_factory<service>([] { return std::make_unique<service>(); }, lifetime));
    auto held = std::make_unique<service>();
    // The factory's own allocation is made before the failure is armed:
    // the first allocation in resolve() is then the registry's.
    ts::service_registry other;
    ASSERT_TRUE(other.register_factory<service>([p = std::move(held)]() mutable { return std::move(p); }, lifetime));
    t_fail_nth_new = 1;
    ts::result<std::shared_ptr<service>> r = ts::make_error(ts::error_code::ok, "");
    try {
      r = other.resolve<service>();
      t_fail_nth_new = 0;
    } catch (const std::bad_alloc&) {
      t_fail_nth_new = 0;
      ADD_FAILURE() << "std::bad_alloc escaped resolve()";
      continue;
    }
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ts::error_code::resource_exhausted);
    auto again = registry.resolve<service>();
    ASSERT_TRUE(again);
    EXPECT_EQ((*again)->value, 7);
  }
}

// A coroutine that is not a task<T> sleeping on a pool whose stop discards
// the sleep's run: the discard (noexcept) built its error message, and with
// no memory for it std::bad_alloc left a noexcept function (terminate). The
// co_await now throws `cancelled` (message or not).
namespace {
ts::coro_test::eager_coroutine sleep_then_record(ts::thread_pool& pool, std::atomic<int>& outcome) {
  try {
    co_await pool.sleep_for(std::chrono::milliseconds(1));
    outcome.store(1, std::memory_order_release);  // pairs with the test's acquire load
  } catch (const ts::error_exception& e) {
    outcome.store(e.code() == ts::error_code::cancelled ? 2 : 3, std::memory_order_release);  // as above
  }
}
}  // namespace

TEST(Allocation, ASleepDiscardedByStopWithNoMemoryForItsMessageThrowsCancelled) {
  ts::thread_pool pool{1};
  pool.pause();  // the sleep's run is queued when it fires, and stays queued
  std::atomic<int> outcome{0};
  sleep_then_record(pool, outcome);
  // Until the timer has handed the run to the pool (no time limit here: the
  // test binary's watchdog bounds it).
  while (pool.get_statistics().accepted == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // stop(cancel_pending) discards the queued run (on a worker), which
  // resumes the coroutine there; its co_await's message "sleep discarded by
  // the pool (stopping, or its wake-up evicted)" is 62 chars + NUL.
  g_fail_new_of_size.store(63, std::memory_order_relaxed);  // see its declaration
  (void)pool.stop(ts::stop_mode::cancel_pending);
  g_fail_new_of_size.store(0, std::memory_order_relaxed);
  EXPECT_EQ(outcome.load(std::memory_order_acquire), 2);  // pairs with the coroutine's release store
}

// A pool destroyed on its own worker (a job dropping the last shared_ptr to
// it) with no memory left on that thread: the destructor started a thread to
// finish the stop, and when it could not allocate that thread it
// terminated. It allocates nothing now: the worker itself finishes the
// stop after the job returns.
TEST(Allocation, APoolDestroyedOnItsWorkerWithNoMemoryLeftStillDrainsAndFreesItself) {
  std::atomic<int> ran{0};
  std::atomic<bool> destroyed{false};
  std::latch go{1};
  {
    auto pool = std::make_shared<ts::thread_pool>(2);
    ASSERT_TRUE(pool->enqueue([p = pool, &go, &destroyed]() mutable {
      go.wait();
      t_fail_all_new = true;
      p.reset();  // the last reference: the destructor runs here, on the worker
      t_fail_all_new = false;
      destroyed.store(true, std::memory_order_release);  // pairs with the acquire below
    }));
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(pool->enqueue([&ran] { ran.fetch_add(1, std::memory_order_release); }));  // as above
    }
  }
  go.count_down();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!destroyed.load(std::memory_order_acquire) || ran.load(std::memory_order_acquire) < 100) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(ran.load(std::memory_order_acquire), 100);
}

// Entry points that refuse by throwing throw error_exception with their code
// when no memory is left at all: building the exception's text allocated,
// so std::bad_alloc escaped instead (submit(), a pool's constructor).
namespace {
template <typename Call>
std::optional<ts::error_code> thrown_with_no_memory(Call call) {
  t_fail_all_new = true;
  try {
    call();
  } catch (const ts::error_exception& e) {
    t_fail_all_new = false;
    EXPECT_NE(std::string_view(e.what()), "");
    return e.code();
  } catch (const std::exception& e) {
    t_fail_all_new = false;
    ADD_FAILURE() << "threw " << e.what() << " instead of error_exception";
    return std::nullopt;
  }
  t_fail_all_new = false;
  return std::nullopt;
}
}  // namespace

TEST(Allocation, ThrowingEntryPointsThrowErrorExceptionWhenNoMemoryIsLeft) {
  using ts::error_code;
  ts::thread_pool pool{1};
  ts::typed_thread_pool_t<ts::job_types> typed{1};
  EXPECT_EQ(thrown_with_no_memory([&] { (void)pool.submit([] { return 1; }); }), error_code::resource_exhausted);
  EXPECT_EQ(thrown_with_no_memory([&] { (void)typed.submit(ts::job_types::RealTime, [] { return 1; }); }),
            error_code::resource_exhausted);
  EXPECT_EQ(thrown_with_no_memory([&] { (void)typed.submit(static_cast<ts::job_types>(200), [] { return 1; }); }),
            error_code::invalid_argument);
  EXPECT_EQ(thrown_with_no_memory([] { ts::thread_pool p{2}; }), error_code::resource_exhausted);
  EXPECT_EQ(thrown_with_no_memory([] { ts::typed_thread_pool_t<ts::job_types> p{2}; }), error_code::resource_exhausted);
  EXPECT_EQ(thrown_with_no_memory([] { throw ts::error_exception(ts::detail::out_of_memory_error().value); }),
            error_code::resource_exhausted);
}

namespace {
// Larger than a job's inline storage: its box is allocated. The destructor
// takes a while and then says it ran.
struct slow_to_destroy {
  std::atomic<bool>* ran;
  std::atomic<bool>* destroyed;
  std::array<char, 96> pad{};
  slow_to_destroy(std::atomic<bool>* r, std::atomic<bool>* d) noexcept : ran(r), destroyed(d) {}
  slow_to_destroy(slow_to_destroy&& o) noexcept
      : ran(std::exchange(o.ran, nullptr)), destroyed(std::exchange(o.destroyed, nullptr)) {}
  slow_to_destroy(const slow_to_destroy&) = delete;
  slow_to_destroy& operator=(const slow_to_destroy&) = delete;
  slow_to_destroy& operator=(slow_to_destroy&&) = delete;
  ~slow_to_destroy() {
    if (destroyed == nullptr) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    destroyed->store(true, std::memory_order_release);  // pairs with the acquire load after wait()
  }
  void operator()() const { ran->store(true, std::memory_order_relaxed); }  // a start signal only
};
}  // namespace

// Out of memory for the job's box, task_group::run runs the job on the
// calling thread. It counted the job finished before the body was
// destroyed, so a wait() on another thread could return while the body's
// destructor still ran (and used what wait()'s caller then freed).
TEST(Allocation, TaskGroupRunOutOfMemoryDestroysTheBodyBeforeCountingItFinished) {
  ts::thread_pool pool{1};
  ts::task_group g(pool);
  std::atomic<bool> ran{false};
  std::atomic<bool> destroyed{false};
  std::thread runner([&] {
    slow_to_destroy body(&ran, &destroyed);
    t_fail_all_new = true;  // no memory for the job's box on this thread
    g.run(std::move(body));
    t_fail_all_new = false;
  });
  while (!ran.load(std::memory_order_relaxed)) std::this_thread::yield();
  g.wait();
  EXPECT_TRUE(destroyed.load(std::memory_order_acquire)) << "wait() returned while the body was still being destroyed";
  runner.join();
}

// A task_group's creating thread off the pool puts each of its first 16
// jobs after a wait in a node it can take back; the workers free most of
// them. The nodes are recycled (detail/recycling_allocator.hpp): after
// warm-up, 2000 groups of 8 such jobs allocate no more than the caches hold
// (three threads, one size class) plus the nodes alive at once, not a node
// per job. Alive at once: a group's 16, and those of jobs taken back whose
// queue entries no worker has popped yet (on a loaded machine the owner
// takes back most jobs), which the pool bounds (taken_back_account).
TEST(Allocation, TaskGroupsRunFromOutsideThePoolDoNotAllocatePerJob) {
  ts::pool_options options;
  options.initial_queue_capacity = 16 * 1024;  // the injector's segments: see PoolSteadyStateDoesNotAllocatePerJob
  ts::thread_pool pool{2, options};
  std::atomic<std::uint64_t> ran{0};
  auto groups = [&](int count) {
    for (int i = 0; i < count; ++i) {
      ts::task_group g(pool);
      for (int k = 0; k < 8; ++k) g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
      g.wait();
    }
  };
  groups(200);  // warm-up
  const auto before = allocations();
  groups(2'000);
  constexpr std::uint64_t cache_bound = 3 * (ts::detail::thread_cache_limit + ts::detail::thread_cache_limit / 2);
  // Nodes alive at once: one group's 16 (its jobs go into a slot of the
  // pool's, not into the queue, so nothing outlives its wait).
  constexpr std::uint64_t alive_bound = 2 * 16;
  EXPECT_LE(allocations() - before, cache_bound + alive_bound + 16) << "16000 jobs (nodes and the injector's segments)";
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 2'200U * 8);  // every wait() returned: each job's add happened before
}

// The recycling allocator's shared level keeps at most shared_limit blocks
// per class: of a burst freed by a thread that then exits, at least the
// rest goes back to the system, so taking as many blocks again allocates.
TEST(Allocation, TheRecyclingAllocatorsSharedLevelKeepsAtMostItsLimit) {
  constexpr std::size_t n = ts::detail::shared_limit + 4 * ts::detail::thread_cache_limit;
  constexpr std::size_t size = 800;  // class 769..832, which nothing else in this binary uses
  std::vector<void*> blocks(n);
  std::thread freeing([&] {
    for (void*& p : blocks) p = ts::detail::recycled_allocate(size);
    for (void* p : blocks) ts::detail::recycled_free(p, size);
  });
  freeing.join();
  std::uint64_t allocated = 0;
  std::thread allocating([&] {
    const auto before = allocations();
    for (void*& p : blocks) p = ts::detail::recycled_allocate(size);
    allocated = allocations() - before;
    for (void* p : blocks) ts::detail::recycled_free(p, size);
  });
  allocating.join();
  EXPECT_GE(allocated, n - ts::detail::shared_limit) << "the burst stayed cached beyond the limit";
  EXPECT_LT(allocated, n) << "nothing of the burst was kept";
}

// value() on an error result, with no memory left for a copy of the error's
// message: still an error_exception with the error's code. (The copy was
// made for the constructor's by-value parameter, outside its fallback:
// std::bad_alloc escaped instead.)
TEST(Allocation, ValueOfAnErrorResultThrowsErrorExceptionWithNoMemoryLeft) {
  const std::string message(200, 'm');  // too long for the small-string buffer: a copy allocates
  const ts::result<int> r = ts::error{ts::error_code::queue_full, message};
  const ts::result<void> v = ts::error{ts::error_code::timeout, message};
  auto code_thrown = [](auto&& call) -> std::optional<ts::error_code> {
    t_fail_all_new = true;
    try {
      call();
    } catch (const ts::error_exception& e) {
      t_fail_all_new = false;
      return e.code();
    } catch (const std::exception& e) {
      t_fail_all_new = false;
      ADD_FAILURE() << "threw " << e.what();
      return std::nullopt;
    }
    t_fail_all_new = false;
    return std::nullopt;
  };
  EXPECT_EQ(code_thrown([&] { (void)r.value(); }), ts::error_code::queue_full);
  EXPECT_EQ(code_thrown([&] { v.value(); }), ts::error_code::timeout);
  // With memory, the message comes along.
  try {
    (void)r.value();
    FAIL();
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.get_error().message(), message);
  }
}
