// scheduler/typed_injector.hpp: the typed pool's injector, one queue per
// job kind, taken in priority order (strict, or with aging). Driven
// directly, on one thread, over the mutex and lock-free queues.
#include "thread_system/scheduler/typed_injector.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ts = thread_system;
using ts::detail::typed_injector;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t bit(std::size_t rank) { return std::uint64_t{1} << rank; }

// A job that appends `id` to `trace` when run.
ts::job_function tracer(std::vector<int>& trace, int id) {
  return ts::job_function([&trace, id] { trace.push_back(id); });
}

// Pops one job for `mask` and runs it; -1 when there was none.
int run_one(typed_injector& q, std::uint64_t mask, std::vector<int>& trace) {
  std::array<ts::job_function, 1> out;
  if (q.pop_for(mask, out, 1) != 1) return -1;
  out[0]();
  return trace.back();
}

class TypedInjector : public ::testing::TestWithParam<ts::pool_queue> {};

}  // namespace

TEST_P(TypedInjector, StrictPriorityServesTheHighestKindInTheWorkersMask) {
  typed_injector q(GetParam(), 0ns);
  std::vector<int> trace;
  ASSERT_TRUE(q.push_kind(2, tracer(trace, 20)));
  ASSERT_TRUE(q.push_kind(0, tracer(trace, 0)));
  ASSERT_TRUE(q.push_kind(1, tracer(trace, 10)));
  EXPECT_EQ(q.created_mask(), bit(0) | bit(1) | bit(2));
  EXPECT_EQ(q.pending_mask(), bit(0) | bit(1) | bit(2));
  EXPECT_EQ(run_one(q, bit(2), trace), 20);  // a worker serving only kind 2 never takes a higher one
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), 0);
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), 10);
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), -1);
  EXPECT_EQ(q.pending_mask(), 0U);
  EXPECT_EQ(q.accepted(), 3U);
}

TEST_P(TypedInjector, OnlyTheWorkersHighestKindComesAsABatch) {
  typed_injector q(GetParam(), 0ns);
  std::vector<int> trace;
  ASSERT_TRUE(q.push_kind(1, tracer(trace, 1)));  // kind 1's queue now exists...
  EXPECT_EQ(run_one(q, bit(1), trace), 1);        // ...and is empty again
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.push_kind(3, tracer(trace, 30 + i)));
  std::array<ts::job_function, 8> out;
  // Kind 1 is the worker's highest, and empty: kind 3 comes one job at a time.
  EXPECT_EQ(q.pop_for(bit(1) | bit(3), out, 1), 1U);
  // With kind 1 never created, kind 3 would be the highest that exists: a batch.
  typed_injector fresh(GetParam(), 0ns);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(fresh.push_kind(3, tracer(trace, 30 + i)));
  EXPECT_EQ(fresh.pop_for(bit(1) | bit(3), out, 1), 4U);
  trace.clear();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.push_kind(1, tracer(trace, 10 + i)));
  // Kind 1 has jobs: they may come as a batch (the whole queue, one consumer).
  const std::size_t n = q.pop_for(bit(1) | bit(3), out, 1);
  EXPECT_EQ(n, 4U);
  for (std::size_t i = 0; i < n; ++i) out[i]();
  EXPECT_EQ(trace, (std::vector<int>{10, 11, 12, 13}));
}

// pop_share() keeps the injector interface's promise (injector.hpp): at most
// max(1, backlog / consumers) jobs, as a plain injector gives. It ignored
// `consumers` and took the whole queue.
TEST_P(TypedInjector, PopShareTakesTheConsumersShareOfTheBacklog) {
  typed_injector q(GetParam(), 0ns);
  std::vector<int> trace;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.push_kind(0, tracer(trace, i)));
  std::array<ts::job_function, 16> out;
  const std::size_t n = q.pop_share(out, 4);
  EXPECT_GE(n, 1U);
  EXPECT_LE(n, 2U) << "a quarter of 8 jobs for 4 consumers";
  for (std::size_t i = 0; i < n; ++i) out[i]();
  EXPECT_EQ(q.pop_share(out, 1), 8U - n) << "one consumer takes the rest";
}

TEST_P(TypedInjector, PushRoutesEachJobByTheKindItsTagNames) {
  typed_injector q(GetParam(), 0ns);
  std::vector<int> trace;
  namespace tag = ts::detail::job_tag;
  auto job = tracer(trace, 30);
  job.set_tag(tag::with_rank(tag::holds_room, 3));  // the core's bit is kept and ignored
  ASSERT_TRUE(q.push(std::move(job)));
  std::array<ts::job_function, 3> batch{tracer(trace, 10), tracer(trace, 11), tracer(trace, 12)};
  for (auto& fn : batch) fn.set_tag(tag::with_rank(0, 1));
  ASSERT_TRUE(q.push_batch(batch));
  EXPECT_EQ(q.created_mask(), bit(1) | bit(3));
  EXPECT_EQ(q.view(1).accepted, 3U);
  EXPECT_EQ(q.view(3).accepted, 1U);
  EXPECT_EQ(run_one(q, bit(3), trace), 30);
  std::array<ts::job_function, 4> out;
  ASSERT_EQ(q.pop_for(bit(1), out, 1), 3U);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(tag::rank(out[i].tag()), 1U);  // the worker counts the job for its kind by this
    out[i]();
  }
  EXPECT_EQ(trace, (std::vector<int>{30, 10, 11, 12}));
  EXPECT_EQ(q.accepted(), 4U);
}

// The wake-up rule (docs/ARCHITECTURE.md, "Parking without lost wake-ups"):
// a push asks the pool to wake a worker only when no earlier job of its kind
// is waiting; each kind's queue answers for itself.
TEST_P(TypedInjector, PushAsksForAWakeUpOnlyWhenItsKindHadNoJobWaiting) {
  typed_injector q(GetParam(), 0ns);
  std::vector<int> trace;
  namespace tag = ts::detail::job_tag;
  auto push_checked = [&](std::size_t rank, int id) {
    auto fn = tracer(trace, id);
    fn.set_tag(tag::with_rank(0, rank));
    bool wake = false;
    EXPECT_TRUE(q.push_and_check(std::move(fn), wake));
    return wake;
  };
  EXPECT_TRUE(push_checked(1, 10));   // kind 1 was empty
  EXPECT_FALSE(push_checked(1, 11));  // 10 waits: whoever takes it wakes the next
  EXPECT_TRUE(push_checked(2, 20));   // another kind's queue: empty
  EXPECT_FALSE(push_checked(2, 21));
  EXPECT_EQ(run_one(q, bit(1), trace), 10);
  EXPECT_EQ(run_one(q, bit(1), trace), 11);
  EXPECT_TRUE(push_checked(1, 12));  // kind 1 is empty again
  bool wake = false;
  EXPECT_FALSE(q.push_and_check(tracer(trace, 99), wake));  // no kind: refused, not queued
  EXPECT_EQ(q.accepted(), 5U);
}

// direct_queue(): the typed pool pushes a job of a kind whose queue exists
// straight into that queue. Such a job is the injector's like any other:
// counted in accepted() and view(), popped by pop_for() in priority order,
// refused once close() has run; no queue is offered before the kind's
// first push or with aging on (push_and_check() starts the aging clock).
TEST_P(TypedInjector, DirectQueueIsAKindsOwnQueueCountedAndClosedWithTheInjector) {
  typed_injector q(GetParam(), 0ns);
  std::vector<int> trace;
  namespace tag = ts::detail::job_tag;
  EXPECT_EQ(q.direct_queue(2), nullptr);  // not created yet: push through the injector
  EXPECT_EQ(q.direct_queue(typed_injector::max_kinds), nullptr);
  ASSERT_TRUE(q.push_kind(2, tracer(trace, 20)));
  ts::detail::injector* direct = q.direct_queue(2);
  ASSERT_NE(direct, nullptr);
  EXPECT_NE(static_cast<ts::detail::injector*>(&q), direct);
  auto fn = tracer(trace, 21);
  fn.set_tag(tag::with_rank(0, 2));
  bool wake = true;
  ASSERT_TRUE(direct->push_and_check(std::move(fn), wake));
  EXPECT_FALSE(wake);  // job 20 still waits in that queue
  ASSERT_TRUE(q.push_kind(1, tracer(trace, 10)));
  EXPECT_EQ(q.accepted(), 3U);
  EXPECT_EQ(q.view(2).accepted, 2U);
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), 10);  // priority order over both paths
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), 20);
  q.close();
  q.wait_for_pushes();
  auto late = tracer(trace, 22);
  late.set_tag(tag::with_rank(0, 2));
  auto refused = direct->push_and_check(std::move(late), wake);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ts::error_code::pool_stopped);
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), 21);
  EXPECT_EQ(q.accepted(), 3U);

  typed_injector aging(GetParam(), 1ms);
  ASSERT_TRUE(aging.push_kind(2, tracer(trace, 30)));
  EXPECT_EQ(aging.direct_queue(2), nullptr);
  EXPECT_EQ(run_one(aging, ~std::uint64_t{0}, trace), 30);
}

TEST_P(TypedInjector, JobsWithoutAKindAndMixedBatchesAreRefusedAndNothingIsQueued) {
  typed_injector q(GetParam(), 0ns);
  namespace tag = ts::detail::job_tag;
  bool ran = false;
  auto untyped = ts::job_function([&ran] { ran = true; });
  auto r = q.push(std::move(untyped));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  EXPECT_TRUE(static_cast<bool>(untyped));  // NOLINT(bugprone-use-after-move): a refused job is not moved from
  auto beyond = ts::job_function([] {});
  beyond.set_tag(static_cast<std::uint8_t>(typed_injector::max_kinds + 1));  // rank 64
  auto rb = q.push(std::move(beyond));
  ASSERT_FALSE(rb);
  EXPECT_EQ(rb.error().code(), ts::error_code::invalid_argument);
  auto rk = q.push_kind(typed_injector::max_kinds, ts::job_function([] {}));
  ASSERT_FALSE(rk);
  EXPECT_EQ(rk.error().code(), ts::error_code::invalid_argument);
  auto far = q.push_kind(300, ts::job_function([] {}));  // not truncated to a byte
  ASSERT_FALSE(far);
  EXPECT_NE(far.error().message().find("300"), std::string::npos) << far.error().message();
  std::array<ts::job_function, 1> no_kind{ts::job_function([] {})};
  auto rn = q.push_batch(no_kind);
  ASSERT_FALSE(rn);
  EXPECT_EQ(rn.error().code(), ts::error_code::invalid_argument);
  std::array<ts::job_function, 2> mixed{ts::job_function([] {}), ts::job_function([] {})};
  mixed[0].set_tag(tag::with_rank(0, 0));
  mixed[1].set_tag(tag::with_rank(0, 2));
  auto rm = q.push_batch(mixed);
  ASSERT_FALSE(rm);
  EXPECT_EQ(rm.error().code(), ts::error_code::invalid_argument);
  EXPECT_TRUE(static_cast<bool>(mixed[0]) && static_cast<bool>(mixed[1]));
  EXPECT_EQ(q.accepted(), 0U);
  EXPECT_EQ(q.created_mask(), 0U);  // a refused push creates no kind's queue
  EXPECT_TRUE(q.empty_approx());
  EXPECT_FALSE(ran);
}

TEST_P(TypedInjector, DropOldestTakesTheLowestPriorityKindFirst) {
  typed_injector q(GetParam(), 0ns);
  std::vector<int> trace;
  ASSERT_TRUE(q.push_kind(0, tracer(trace, 0)));
  ASSERT_TRUE(q.push_kind(4, tracer(trace, 40)));
  ASSERT_TRUE(q.push_kind(4, tracer(trace, 41)));
  std::array<ts::job_function, 1> out;
  ASSERT_EQ(q.pop_victim(out), 1U);
  out[0]();
  EXPECT_EQ(trace.back(), 40);  // the oldest job of the lowest kind
}

TEST_P(TypedInjector, AKindThatWaitedBeyondTheAgingBoundIsServedFirst) {
  typed_injector q(GetParam(), 1ns);  // every queued kind is past the bound at once
  std::vector<int> trace;
  ASSERT_TRUE(q.push_kind(5, tracer(trace, 50)));  // waiting longest
  std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(q.push_kind(0, tracer(trace, 0)));
  std::this_thread::sleep_for(1ms);
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), 50);  // aging beats priority
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), 0);
}

TEST_P(TypedInjector, AfterCloseEveryPushIsRefusedAndQueuedJobsStayPoppable) {
  typed_injector q(GetParam(), 0ns);
  std::vector<int> trace;
  ASSERT_TRUE(q.push_kind(1, tracer(trace, 10)));
  q.close();
  EXPECT_TRUE(q.is_closed());
  q.wait_for_pushes();
  auto existing = q.push_kind(1, tracer(trace, 11));
  ASSERT_FALSE(existing);
  EXPECT_EQ(existing.error().code(), ts::error_code::pool_stopped);
  auto fresh = q.push_kind(7, tracer(trace, 70));  // a kind with no queue yet is not created after close()
  ASSERT_FALSE(fresh);
  EXPECT_EQ(fresh.error().code(), ts::error_code::pool_stopped);
  EXPECT_EQ(q.created_mask(), bit(1));
  EXPECT_EQ(run_one(q, ~std::uint64_t{0}, trace), 10);
  EXPECT_EQ(q.accepted(), 1U);
  EXPECT_EQ(q.view(1).accepted, 1U);
  EXPECT_FALSE(q.view(7).exists);
}

TEST_P(TypedInjector, CompletionsAreCountedPerKindOverThePreparedWorkers) {
  typed_injector q(GetParam(), 0ns);
  // Nothing is counted for a worker the injector was not prepared for.
  q.note_done(3, ts::detail::job_tag::with_rank(0, 2), false);
  EXPECT_EQ(q.done_totals(2), std::make_pair(std::uint64_t{0}, std::uint64_t{0}));
  q.prepare_worker(0);
  q.prepare_worker(3);
  q.prepare_worker(ts::detail::max_workers);  // the thread that runs what stop() drains
  q.prepare_worker(3);                        // again (a worker that comes back): its counts stay
  q.note_done(0, ts::detail::job_tag::with_rank(0, 2), false);
  q.note_done(3, ts::detail::job_tag::with_rank(0, 2), true);
  q.note_done(3, ts::detail::job_tag::with_rank(0, 2), false);
  q.prepare_worker(3);
  q.note_done(ts::detail::max_workers, ts::detail::job_tag::with_rank(ts::detail::job_tag::holds_room, 2), false);
  q.note_done(0, ts::detail::job_tag::with_rank(0, 63), true);
  q.note_done(0, 0, false);                                                               // untyped: not a kind's job
  q.note_done(ts::detail::max_workers + 1, ts::detail::job_tag::with_rank(0, 2), false);  // not a worker
  EXPECT_EQ(q.done_totals(2), std::make_pair(std::uint64_t{4}, std::uint64_t{1}));
  EXPECT_EQ(q.done_totals(63), std::make_pair(std::uint64_t{1}, std::uint64_t{1}));
  EXPECT_EQ(q.done_totals(0), std::make_pair(std::uint64_t{0}, std::uint64_t{0}));
  EXPECT_EQ(q.done_totals(64), std::make_pair(std::uint64_t{0}, std::uint64_t{0}));
}

INSTANTIATE_TEST_SUITE_P(Queues, TypedInjector, ::testing::Values(ts::pool_queue::mutex, ts::pool_queue::lockfree),
                         [](const ::testing::TestParamInfo<ts::pool_queue>& p) {
                           return std::string(ts::to_string(p.param));
                         });
