// pools/task_group.hpp: fork-join groups on a pool - nested groups from
// outside and inside the pool, the first exception, refused and discarded
// jobs, captures destroyed before wait() returns.
#include "thread_system/pools/task_group.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {
std::uint64_t fib_group(ts::thread_pool& pool, int n) {
  if (n < 2) return static_cast<std::uint64_t>(n);
  std::uint64_t a = 0;
  ts::task_group g(pool);
  g.run([&pool, &a, n] { a = fib_group(pool, n - 1); });
  const std::uint64_t b = fib_group(pool, n - 2);
  g.wait();
  return a + b;
}
}  // namespace

TEST(TaskGroup, FibFromOutsideAndInside) {
  for (std::size_t workers : {1U, 2U, 3U}) {
    ts::thread_pool pool{workers, ts::test::pool_opts()};
    constexpr int n = ts::test::scale_divisor > 1 ? 15 : 22;
    const std::uint64_t expected = n == 22 ? 17711U : 610U;
    EXPECT_EQ(fib_group(pool, n), expected) << "called from outside, " << workers << " workers";
    auto f = pool.submit([&pool] { return fib_group(pool, n); });
    EXPECT_EQ(f.get(), expected) << "called from a worker";
    pool.wait_idle();
    const auto s = pool.get_statistics();
    EXPECT_EQ(s.accepted, s.executed);
  }
}

TEST(TaskGroup, WaitRethrowsFirstExceptionAfterAllJobsFinish) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  std::atomic<int> finished{0};
  ts::task_group g(pool);
  for (int i = 0; i < 100; ++i) {
    g.run([i, &finished] {
      finished.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      if (i % 10 == 3) throw std::runtime_error("job " + std::to_string(i));
    });
  }
  EXPECT_THROW(g.wait(), std::runtime_error);
  EXPECT_EQ(finished.load(std::memory_order_seq_cst), 100);  // seq_cst: pairs with the writers' RMW/store
  // seq_cst: pairs with the checking load(s)
  g.run([&finished] { finished.fetch_add(1, std::memory_order_seq_cst); });  // reusable after wait()
  EXPECT_NO_THROW(g.wait());
  EXPECT_EQ(finished.load(std::memory_order_seq_cst), 101);  // seq_cst: pairs with the writers' RMW/store
}

TEST(TaskGroup, RunOnAStoppedPoolRunsInline) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  (void)pool.stop();
  int ran = 0;
  ts::task_group g(pool);
  g.run([&ran] { ++ran; });
  g.wait();
  EXPECT_EQ(ran, 1) << "a refused job runs on the caller instead of being lost";
}

TEST(TaskGroup, BlockedExternalWaiterIsWoken) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ts::test::round_budget budget(ts::test::scaled(20'000));
  for (std::size_t i = 0; budget.next(i); ++i) {
    std::atomic<int> v{0};
    ts::task_group g(pool);
    g.run([&v] { v.store(1, std::memory_order_seq_cst); });  // seq_cst: pairs with the checking load(s)
    g.wait();
    ASSERT_EQ(v.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
  }
}

// An owner that waits off the pool moves its own count into the shared word
// and sleeps until the last finish (task_group.hpp, "Who a finish wakes");
// another thread's wait sleeps until any finish. Groups of 1-16 jobs, some
// slow enough for the owner to park, one that run()s another job of the
// group from a worker while the owner may sleep; then the same group waited
// for again by its owner, by another thread, and by its owner once more.
// A finish that failed to wake the sleeping waiter would hang here.
TEST(TaskGroup, AWaitOffThePoolWakesAtTheLastFinishWhoeverWaits) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ts::test::round_budget budget(ts::test::scaled(3'000), 200, std::chrono::seconds(5));
  for (std::size_t i = 0; budget.next(i); ++i) {
    std::atomic<int> done{0};  // relaxed increments: read after wait()
    auto add = [&done] { done.fetch_add(1, std::memory_order_relaxed); };
    ts::task_group g(pool);
    const int jobs = 1 + static_cast<int>(i % 16);
    for (int k = 0; k < jobs; ++k) {
      g.run([&g, &add, k, i] {
        // The oldest job, the first a worker pops (the owner takes jobs back
        // newest first): usually on a worker, where run() counts in the
        // shared word, and a slow one leaves the owner parked.
        if (k == 0) g.run(add);
        if (k == 0 && i % 4 == 0) std::this_thread::sleep_for(50us);
        add();
      });
    }
    g.wait();
    ASSERT_EQ(done.load(std::memory_order_relaxed), jobs + 1);
    g.run([add] {
      std::this_thread::sleep_for(20us);
      add();
    });
    g.wait();  // its count was moved into the shared word by the first wait
    ASSERT_EQ(done.load(std::memory_order_relaxed), jobs + 2);
    g.run([add] {
      std::this_thread::sleep_for(20us);
      add();
    });
    std::thread other([&g] { g.wait(); });
    other.join();
    ASSERT_EQ(done.load(std::memory_order_relaxed), jobs + 3);
    g.run([add] {
      std::this_thread::sleep_for(20us);
      add();
    });
    g.wait();
    ASSERT_EQ(done.load(std::memory_order_relaxed), jobs + 4);
  }
}

// A job discarded by stop(cancel_pending) as the group's last finish, while
// the owner sleeps off the pool waiting for the last finish only: the
// discard path must wake it as a finish that ran does. One worker, so the
// order is fixed: a (the group's) runs and finishes while the owner sleeps
// - a finish that is not the last; y (not the group's) then holds the
// worker while stop() discards b (the group's), the last finish. Whether
// the owner is already asleep when a finishes depends on the machine's
// timing (the pauses make it likely); the assertions hold either way, and a
// discard that did not wake it would hang here.
TEST(TaskGroup, ADiscardThatIsTheLastFinishWakesTheOwnerSleepingOffThePool) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-cancel-last")};
  std::latch a_started{1};
  std::latch a_gate{1};
  std::latch y_started{1};
  std::latch y_gate{1};
  std::atomic<int> ran{0};  // relaxed increments: read after stop() joined the worker
  ts::task_group g(pool);
  g.run([&] {
    a_started.count_down();
    a_gate.wait();
    ran.fetch_add(1, std::memory_order_relaxed);
  });
  a_started.wait();
  // y, then b queued behind it, both from one other thread: the owner
  // cannot take b back (it would run it itself), b counts in the shared
  // word, and a sharded injector keeps one thread's jobs in order (from two
  // threads they may land in two shards, and the worker may pop b first).
  std::atomic<bool> y_queued{false};
  std::thread([&] {
    y_queued.store(static_cast<bool>(pool.enqueue([&] {
                     y_started.count_down();
                     y_gate.wait();
                   })),
                   std::memory_order_relaxed);  // read after the join
    g.run([&ran] { ran.fetch_add(10, std::memory_order_relaxed); });
  }).join();
  ASSERT_TRUE(y_queued.load(std::memory_order_relaxed));
  ts::stop_report report;
  std::thread helper([&] {
    std::this_thread::sleep_for(20ms);  // the owner goes to sleep in wait()
    a_gate.count_down();                // a finishes: not the last finish
    y_started.wait();                   // a has finished: the worker runs y
    std::thread stopper([&] { report = pool.stop(ts::stop_mode::cancel_pending); });
    std::this_thread::sleep_for(20ms);  // stop() discards b meanwhile, or once y is done
    y_gate.count_down();
    stopper.join();
  });
  EXPECT_TRUE(ts::test::throws_cancelled([&] { g.wait(); }));
  helper.join();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);
  EXPECT_EQ(report.cancelled, 1U);
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
}

// An owner that waits on one of the pool's workers parks in slices (the
// helping wait's back-off), helps with jobs between them, and parks again.
// Here it parks while c1 runs on the other worker, then c1 run()s c2 (from a
// worker that is not the owner: counted in the shared word), the owner
// takes c2 from the other worker's deque and finishes it inside its own
// wait - its own count goes below zero - and parks again until c1, the last
// finish. A park that moved a negative own count wrongly into the shared
// word would leave the owner waiting forever. Whether the other worker takes
// c1 and the owner takes c2 depends on the machine; each round waits for it
// (bounded), and the test asserts that it happened in some round.
TEST(TaskGroup, AnOwnerOnAWorkerParksHelpsAJobRunElsewhereAndParksAgain) {
  ts::thread_pool pool{2, ts::test::pool_opts("tg-owner-helps")};
  ts::test::round_budget budget(ts::test::scaled(40), 4, std::chrono::seconds(5));
  std::size_t owner_helped = 0;
  for (std::size_t i = 0; budget.next(i); ++i) {
    auto round = pool.submit([&pool] {
      const std::thread::id owner = std::this_thread::get_id();
      std::atomic<bool> c1_started{false};
      std::atomic<bool> c2_ran{false};
      std::atomic<bool> c2_on_owner{false};  // relaxed: read after wait()
      std::atomic<int> done{0};              // relaxed increments: read after wait()
      ts::task_group g(pool);
      g.run([&] {
        c1_started.store(true, std::memory_order_release);  // pairs with the owner's acquire
        std::this_thread::sleep_for(2ms);                   // the owner parks
        g.run([&] {
          c2_on_owner.store(std::this_thread::get_id() == owner, std::memory_order_relaxed);
          done.fetch_add(1, std::memory_order_relaxed);
          c2_ran.store(true, std::memory_order_release);  // pairs with c1's acquire
        });
        // The owner helps with c2 meanwhile (bounded: else this worker runs it after c1).
        (void)ts::test::eventually([&] { return c2_ran.load(std::memory_order_acquire); }, std::chrono::seconds(2));
        std::this_thread::sleep_for(2ms);  // the owner parks again
        done.fetch_add(1, std::memory_order_relaxed);
      });
      // Not a helping wait: the other worker takes c1 from this one's deque
      // (bounded: else the wait below runs c1 here).
      (void)ts::test::eventually([&] { return c1_started.load(std::memory_order_acquire); }, std::chrono::seconds(2));
      g.wait();
      return std::pair{done.load(std::memory_order_relaxed), c2_on_owner.load(std::memory_order_relaxed)};
    });
    const auto [done, helped] = round.get();
    ASSERT_EQ(done, 2);
    if (helped) ++owner_helped;
  }
  EXPECT_GT(owner_helped, 0U) << "the owner never helped with a job run() on the other worker";
}

// The body of a task_group job (and its captures) is destroyed before the
// job counts as finished, so nothing it owns outlives wait().
TEST(TaskGroup, CapturesAreDestroyedBeforeWaitReturns) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  for (int round = 0; round < 200; ++round) {
    ts::test::lifetime_tracker tracker;
    {
      ts::task_group g(pool);
      for (int i = 0; i < 8; ++i) g.run(ts::test::counting_functor(tracker));
      g.wait();
      ASSERT_EQ(tracker.alive(), 0) << "a capture outlived wait()";
    }
    // seq_cst: relaxed tracker count, ordered by the wait/join above
    ASSERT_EQ(tracker.invoked.load(std::memory_order_seq_cst), 8);
  }
}

// A job of a group that the pool accepts and then discards unrun still
// counts as finished: wait() reports error_exception{cancelled} instead of
// waiting forever. Both ways a pool discards: stop(cancel_pending) and
// backpressure::drop_oldest.
TEST(TaskGroup, AJobDiscardedByStopCancelPendingMakesWaitThrowCancelled) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-cancel")};
  ts::test::worker_blocker blocker;
  blocker.hold(pool);
  std::atomic<int> ran{0};
  ts::task_group g(pool);
  // From a thread that is not the group's owner: the owner's wait would take
  // the jobs back and run them (TheOwnerOffThePoolTakesBackWhatNoWorkerStarted).
  std::thread([&] {
    for (int i = 0; i < 3; ++i) g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
  }).join();
  ts::stop_report report;
  std::thread stopper([&] { report = pool.stop(ts::stop_mode::cancel_pending); });
  EXPECT_TRUE(ts::test::throws_cancelled([&] { g.wait(); }));  // before the fix: waited forever
  blocker.let_go();
  stopper.join();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 0);  // relaxed: stop() joined the worker
  EXPECT_EQ(report.cancelled, 3U);
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
}

TEST(TaskGroup, AJobDroppedByBackpressureMakesWaitThrowCancelled) {
  ts::pool_options o = ts::test::pool_opts("tg-drop");
  o.backpressure = ts::backpressure::drop_oldest(1);
  ts::thread_pool pool{1, o};
  ts::test::worker_blocker blocker;
  blocker.hold(pool);
  std::atomic<int> ran{0};
  ts::task_group g(pool);
  // From a thread that is not the group's owner: the owner's first jobs
  // are kept within reach, out of the pool's queue
  // (TheOwnersJobsKeptWithinReachHoldNoRoomAndAreNeverDropped).
  std::thread([&] {
    g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // queued: the room is taken
  }).join();
  // Another submission drops it. (The group's own run() never evicts: a
  // full pool runs its job on the caller, see
  // RunFromOutsideAFullBoundedPoolRunsOnTheCallerUnderEveryPolicy.)
  ASSERT_TRUE(pool.enqueue([&ran] { ran.fetch_add(10, std::memory_order_relaxed); }));
  blocker.let_go();
  EXPECT_TRUE(ts::test::throws_cancelled([&] { g.wait(); }));
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 10);                // relaxed: wait_idle() ordered the run
  g.run([&ran] { ran.fetch_add(100, std::memory_order_relaxed); });  // the group is reusable afterwards
  EXPECT_NO_THROW(g.wait());
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 110);  // relaxed: as above
}

// The count a group keeps: jobs run() by the thread that created the group
// count in a word only that thread writes, jobs run() elsewhere (by other
// jobs of the group, on the workers) in a shared one, and a job may finish
// on either kind of thread. Every mix must be waited for: a tree of jobs in
// one group, each job running two more of it, from outside the pool and
// from one of its workers.
namespace {
void spawn_tree(ts::task_group& g, std::atomic<int>& done, int depth) {
  if (depth > 0) {
    for (int k = 0; k < 2; ++k) g.run([&g, &done, depth] { spawn_tree(g, done, depth - 1); });
  }
  done.fetch_add(1, std::memory_order_relaxed);  // relaxed: read after wait()
}
}  // namespace

TEST(TaskGroup, JobsRunByJobsOfTheGroupAreWaitedFor) {
  for (std::size_t workers : {1U, 2U, 3U}) {
    ts::thread_pool pool{workers, ts::test::pool_opts()};
    constexpr int depth = 10;  // 2^11 - 1 jobs per round
    ts::test::round_budget budget(ts::test::scaled(200), 20, std::chrono::seconds(5));
    for (std::size_t i = 0; budget.next(i); ++i) {
      std::atomic<int> done{0};
      ts::task_group g(pool);  // created outside the pool: every job runs elsewhere
      spawn_tree(g, done, depth);
      g.wait();
      ASSERT_EQ(done.load(std::memory_order_relaxed), (1 << (depth + 1)) - 1) << workers << " workers, outside";
      // relaxed: as above
      auto inside = pool.submit([&pool] {
        std::atomic<int> d{0};
        ts::task_group h(pool);  // created on a worker: its wait() runs jobs run() on other workers too
        spawn_tree(h, d, depth);
        h.wait();
        return d.load(std::memory_order_relaxed);  // relaxed: read after wait()
      });
      ASSERT_EQ(inside.get(), (1 << (depth + 1)) - 1) << workers << " workers, on a worker";
    }
  }
}

// wait() on a thread other than the one that created the group (one wait
// at a time): it still waits for every job, including jobs the creating
// thread run() and the pool finished, and jobs run() by jobs.
TEST(TaskGroup, AnotherThreadMayWait) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ts::test::round_budget budget(ts::test::scaled(2'000), 200, std::chrono::seconds(5));
  for (std::size_t i = 0; budget.next(i); ++i) {
    std::atomic<int> done{0};
    auto g = std::make_unique<ts::task_group>(pool);
    spawn_tree(*g, done, 3);  // run() by this thread, and by the jobs
    std::thread waiter([&] {
      g->wait();
      ASSERT_EQ(done.load(std::memory_order_relaxed), 15);  // relaxed: read after wait()
    });
    waiter.join();
    // Created on a worker, waited for here: the worker's own jobs of the group finish there.
    auto made = pool.submit([&pool, &done] {
      auto h = std::make_unique<ts::task_group>(pool);
      spawn_tree(*h, done, 3);
      return h;
    });
    auto h = made.get();
    h->wait();
    ASSERT_EQ(done.load(std::memory_order_relaxed), 30);  // relaxed: read after wait()
  }
}

// A child run() from a worker goes onto the worker's deque, past its LIFO
// slot (pool_front::push_fork()); a job the slot held goes onto the deque
// first, below it. So the group's helping wait, which looks at the slot
// before the deque, still runs the newest job - its own child - and returns
// without running the older job of the same worker. (Had the slot kept that
// job, the wait would have run it first.) One worker: nothing else runs it.
TEST(TaskGroup, AWaitOnAWorkerRunsItsChildAndNotAnOlderJobOfTheWorker) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  std::atomic<bool> older_ran{false};
  auto seen = pool.submit([&pool, &older_ran] {
    // relaxed: read on this thread, or after wait_idle()
    EXPECT_TRUE(pool.enqueue([&older_ran] { older_ran.store(true, std::memory_order_relaxed); }));
    ts::task_group g(pool);
    bool child_ran = false;
    g.run([&child_ran] { child_ran = true; });
    g.wait();
    return std::pair{child_ran, older_ran.load(std::memory_order_relaxed)};
  });
  const auto [child_ran, older_ran_in_wait] = seen.get();
  EXPECT_TRUE(child_ran);
  EXPECT_FALSE(older_ran_in_wait) << "the group's wait ran an older job of the worker first";
  pool.wait_idle();
  EXPECT_TRUE(older_ran.load(std::memory_order_relaxed));
}

// Copying the callable into the job throws: run() lets the exception out
// and the group does not count the job (a count taken first would never be
// given back: wait() and the destructor would wait forever).
namespace {
struct throws_when_copied {
  throws_when_copied() = default;
  throws_when_copied(const throws_when_copied& /*other*/) { throw std::runtime_error("copy"); }
  throws_when_copied(throws_when_copied&&) noexcept = default;
  throws_when_copied& operator=(const throws_when_copied&) = delete;
  throws_when_copied& operator=(throws_when_copied&&) = delete;
  ~throws_when_copied() = default;
  void operator()() const noexcept {}
};
}  // namespace

TEST(TaskGroup, ACallableWhoseCopyThrowsIsNotCounted) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ts::task_group g(pool);
  std::atomic<int> ran{0};
  g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });  // relaxed: read after wait()
  const throws_when_copied f;
  EXPECT_THROW(g.run(f), std::runtime_error);
  g.wait();                                           // before the fix: waited forever for the job that was never made
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);  // relaxed: read after wait()
}

namespace {
// Copy-only (a move copies): the n-th copy throws.
struct throws_on_copy {
  std::atomic<int>* copies;
  int throwing;
  throws_on_copy(std::atomic<int>* c, int n) noexcept : copies(c), throwing(n) {}
  throws_on_copy(const throws_on_copy& o) : copies(o.copies), throwing(o.throwing) {
    // relaxed: a count read after the copying thread is joined
    if (copies->fetch_add(1, std::memory_order_relaxed) + 1 == throwing) throw std::runtime_error("copy");
  }
  throws_on_copy& operator=(const throws_on_copy&) = delete;
  ~throws_on_copy() = default;
  void operator()() const noexcept {}
};
}  // namespace

// The copy into the pool's job came after the count: run() threw, the
// group counted a job that never existed, and wait() waited for ever. From
// a thread that is not the owner the third copy is the one into the pool's
// job; the owner off the pool copies twice, into the node it can take back
// (the job, made after the count before the fix).
TEST(TaskGroup, ACallableWhoseMoveIntoTheJobThrowsIsNotCounted) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ts::task_group g(pool);
  std::atomic<int> copies{0};
  std::thread([&] {
    const throws_on_copy f(&copies, 3);
    EXPECT_THROW(g.run(f), std::runtime_error);
  }).join();
  EXPECT_EQ(copies.load(std::memory_order_relaxed), 3);  // relaxed: the copying thread was joined
  copies.store(0, std::memory_order_relaxed);
  const throws_on_copy f(&copies, 2);
  EXPECT_THROW(g.run(f), std::runtime_error);
  EXPECT_EQ(copies.load(std::memory_order_relaxed), 2);  // relaxed: copied on this thread
  g.wait();                                              // before the fix: for ever
}

// A null function pointer crashed the worker that called it; it is refused
// up front, as enqueue() refuses it.
TEST(TaskGroup, AnEmptyCallableIsRefusedWithInvalidArgument) {
  ts::thread_pool pool{2, ts::test::pool_opts()};
  ts::task_group g(pool);
  void (*null_fn)() = nullptr;
  try {
    g.run(null_fn);
    ADD_FAILURE() << "run() accepted a null function pointer";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
  }
  EXPECT_THROW(g.run(std::function<void()>{}), ts::error_exception);
  g.wait();  // nothing was counted
}

namespace {

// run() from another thread while the owner waits: a job of that run may
// store the group's first exception while wait() takes it. wait() read the
// exception as soon as the failure flag was set, before the job had written
// it (TSan: data race on the exception_ptr; a null one rethrown terminates).
// Every exception wait() rethrows is the job's, whole.
TEST(TaskGroup, RunFromAnotherThreadDuringWaitDeliversEveryFailureWhole) {
  ts::thread_pool pool{2, ts::test::pool_opts("tg-run-during-wait")};
  ts::task_group g{pool};
  std::atomic<bool> producing{true};
  std::thread producer([&] {
    const auto until = std::chrono::steady_clock::now() + 300ms;  // a time budget, not a count
    while (std::chrono::steady_clock::now() < until) g.run([] { throw std::runtime_error("job failed"); });
    producing.store(false, std::memory_order_release);  // pairs with the acquire below
  });
  std::uint64_t rethrown = 0;
  auto one_wait = [&] {
    try {
      g.wait();
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "job failed");
      ++rethrown;
    }
  };
  while (producing.load(std::memory_order_acquire)) one_wait();
  producer.join();
  one_wait();  // the jobs run since the last wait
  EXPECT_GE(rethrown, 1U);
  g.wait();  // nothing left: returns
}

}  // namespace

// A bounded pool that is full (paused, its room held by queued jobs): run()
// from outside the pool takes room only if there is some, and otherwise runs
// the job on the calling thread, under every policy. It used to go through
// the policy like any submission: run() blocked under block (until the
// watchdog below resumed the pool), and under drop_oldest it evicted the
// queued jobs (and the group's own, so wait() threw cancelled).
TEST(TaskGroup, RunFromOutsideAFullBoundedPoolRunsOnTheCallerUnderEveryPolicy) {
  constexpr std::size_t room = 2;
  const std::pair<const char*, ts::backpressure> cases[] = {
      {"block", ts::backpressure::block(room)},
      {"block_for", ts::backpressure::block_for(room, std::chrono::hours(1))},
      {"drop_oldest", ts::backpressure::drop_oldest(room)},
      {"reject", ts::backpressure::reject(room)},
      {"caller_runs", ts::backpressure::caller_runs(room)}};
  for (const auto& [name, bound] : cases) {
    SCOPED_TRACE(name);
    auto opt = ts::test::pool_opts("tg-full");
    opt.backpressure = bound;
    ts::thread_pool pool{1, opt};
    std::vector<ts::future<int>> fillers;
    const auto caller = std::this_thread::get_id();
    std::atomic<int> on_caller{0};
    EXPECT_FALSE(ts::test::call_needed_the_pool(pool, true, [&] {
      for (std::size_t k = 0; k < room; ++k) fillers.push_back(pool.submit([] { return 7; }));
      ts::task_group g(pool);
      for (int k = 0; k < 8; ++k) {
        g.run([&] {
          if (std::this_thread::get_id() == caller) on_caller.fetch_add(1, std::memory_order_relaxed);
        });
      }
      EXPECT_NO_THROW(g.wait());
    })) << "run() waited for the pool";
    EXPECT_EQ(on_caller.load(std::memory_order_relaxed), 8);
    for (auto& f : fillers) EXPECT_EQ(f.get(), 7);  // not evicted: cancelled would throw
  }
}

// The owner off the pool takes back, newest first, the jobs it run() that no
// worker has taken, and runs them itself: a paused pool (and a busy one)
// does not hold its wait. Before: wait() slept until the watchdog resumed
// the pool, and the jobs ran on the worker.
TEST(TaskGroup, TheOwnerOffThePoolTakesBackWhatNoWorkerStarted) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-take-back")};
  for (const bool paused : {true, false}) {
    std::vector<std::thread::id> ran_on(3);
    std::vector<int> order;  // written by the jobs, read after wait()
    const bool waited = ts::test::call_needed_the_pool(pool, paused, [&] {
      ts::task_group g(pool);
      for (int k = 0; k < 3; ++k) {
        g.run([&ran_on, &order, k] {
          ran_on[static_cast<std::size_t>(k)] = std::this_thread::get_id();
          order.push_back(k);
        });
      }
      g.wait();
    });
    EXPECT_FALSE(waited) << "paused: " << paused;
    for (const std::thread::id id : ran_on) EXPECT_EQ(id, std::this_thread::get_id()) << "paused: " << paused;
    EXPECT_EQ(order, (std::vector<int>{2, 1, 0})) << "newest first";
  }
  // The jobs were never the pool's (it accepted only the job that kept its
  // worker busy); it goes on.
  EXPECT_EQ(pool.get_statistics().accepted, 1U);
  std::atomic<int> later{0};
  ASSERT_TRUE(pool.enqueue([&later] { later.fetch_add(1, std::memory_order_relaxed); }));
  pool.wait_idle();
  EXPECT_EQ(later.load(std::memory_order_relaxed), 1);  // relaxed: wait_idle() ordered the run
}

// The owner keeps the first 16 jobs it run() after a wait within reach: of
// 20 run() on a paused pool, its wait runs those 16 itself, newest first,
// and waits for the pool to run the other 4 (resumed here once the 16 have
// run). After the wait, the next 16 are within reach again.
TEST(TaskGroup, TheOwnerTakesBackAtMostSixteenJobsPerWait) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-take-back-16")};
  ts::task_group g(pool);
  for (int round = 0; round < 2; ++round) {
    pool.pause();
    constexpr int jobs = 20;
    std::vector<std::thread::id> ran_on(jobs);
    std::vector<int> on_owner;  // only the owner's jobs write it
    std::atomic<int> ran{0};
    std::thread resumer([&] {
      // Bounded: without taking back, the 16 never run until this resumes.
      (void)ts::test::eventually([&] { return ran.load(std::memory_order_acquire) >= 16; });
      pool.resume();
    });
    const std::thread::id owner = std::this_thread::get_id();
    for (int k = 0; k < jobs; ++k) {
      g.run([&ran_on, &ran, &on_owner, owner, k] {
        ran_on[static_cast<std::size_t>(k)] = std::this_thread::get_id();
        if (std::this_thread::get_id() == owner) on_owner.push_back(k);
        ran.fetch_add(1, std::memory_order_release);  // pairs with the resumer's acquire
      });
    }
    g.wait();
    resumer.join();
    for (int k = 0; k < jobs; ++k) {
      if (k < 16) {
        EXPECT_EQ(ran_on[static_cast<std::size_t>(k)], owner) << "round " << round << ", job " << k;
      } else {
        EXPECT_NE(ran_on[static_cast<std::size_t>(k)], owner) << "round " << round << ", job " << k;
      }
    }
    std::vector<int> newest_first(16);
    for (int k = 0; k < 16; ++k) newest_first[static_cast<std::size_t>(k)] = 15 - k;
    EXPECT_EQ(on_owner, newest_first) << "round " << round;
  }
}

// A job taken back behaves as one a worker runs: its exception is rethrown
// by wait(), the jobs it run() are waited for (and taken back too: the
// owner runs them as well), its captures are destroyed before wait()
// returns. None of them went through the pool's queue.
TEST(TaskGroup, AJobTakenBackThrowsRunsMoreAndIsDestroyedLikeAnyOther) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-take-back-more")};
  pool.pause();
  std::atomic<int> ran{0};  // relaxed: read after wait()
  auto tracked = std::make_shared<int>(0);
  std::weak_ptr<int> watch = tracked;
  // Lets a failing build end: resumes the pool if the wait needs it.
  std::atomic<bool> returned{false};
  std::atomic<bool> resumed{false};
  std::thread watchdog([&] {
    if (ts::test::eventually([&] { return returned.load(std::memory_order_acquire); })) return;
    resumed.store(true, std::memory_order_release);
    pool.resume();
  });
  {
    ts::task_group g(pool);
    g.run([&g, &ran] {
      ran.fetch_add(1, std::memory_order_relaxed);
      g.run([&ran] { ran.fetch_add(10, std::memory_order_relaxed); });  // run() by the owner, inside its wait
      throw std::runtime_error("taken back");
    });
    g.run([&ran, t = std::move(tracked)] { ran.fetch_add(100, std::memory_order_relaxed); });
    try {
      g.wait();
      ADD_FAILURE() << "wait() did not rethrow";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "taken back");
    }
    returned.store(true, std::memory_order_release);  // pairs with the watchdog's load
    watchdog.join();
    EXPECT_FALSE(resumed.load(std::memory_order_acquire)) << "the wait needed the paused pool";
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 111);
    EXPECT_TRUE(watch.expired()) << "a capture outlived wait()";
  }
  // Nothing of the group's was ever in the pool's queue.
  const ts::stop_report report = pool.stop(ts::stop_mode::cancel_pending);
  EXPECT_EQ(report.accepted, 0U);
  EXPECT_EQ(report.cancelled, 0U);
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 111);
}

// A thread that is not the owner may wait while the owner run()s more jobs
// off the pool: that wait leaves the owner's ring alone (ThreadSanitizer
// reported the read of its size as a race with the owner's run() when the
// waiter looked at it before checking which thread it is on).
TEST(TaskGroup, AnotherThreadWaitsWhileTheOwnerRunsMoreOffThePool) {
  ts::thread_pool pool{2, ts::test::pool_opts("tg-other-waits")};
  std::atomic<int> ran{0};  // relaxed increments: read after the owner's wait()
  ts::task_group g(pool);
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop.load(std::memory_order_acquire)) g.wait();  // pairs with the owner's release store
  });
  ts::test::round_budget budget(ts::test::scaled(2'000), 200, std::chrono::seconds(2));
  int jobs = 0;
  for (std::size_t i = 0; budget.next(i); ++i) {
    g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    ++jobs;
  }
  stop.store(true, std::memory_order_release);
  other.join();
  g.wait();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), jobs);
}

// The owner's first jobs after each wait stay out of the pool's queue: they
// hold no room in a pool with backpressure, and none is refused, dropped or
// cancelled. Before, they went through the queue, and a job taken back left
// its entry there (bounded, and holding room).
TEST(TaskGroup, TheOwnersJobsKeptWithinReachHoldNoRoomAndAreNeverDropped) {
  for (const auto policy : {ts::backpressure::reject(1), ts::backpressure::drop_oldest(1)}) {
    ts::pool_options o = ts::test::pool_opts("tg-kept-room");
    o.backpressure = policy;
    ts::thread_pool pool{1, o};
    int on_owner = 0;  // written by jobs on the owner only
    const std::thread::id owner = std::this_thread::get_id();
    std::atomic<int> other{0};
    const bool waited = ts::test::call_needed_the_pool(pool, /*paused=*/true, [&] {
      ts::task_group g(pool);
      for (int k = 0; k < 16; ++k) {
        g.run([&on_owner, owner] {
          if (std::this_thread::get_id() == owner) ++on_owner;
        });
      }
      EXPECT_EQ(on_owner, 0) << "a job ran at run(): refused by the full pool";
      // The pool's one place is still free, and another thread's job takes it.
      EXPECT_TRUE(pool.enqueue([&other] { other.fetch_add(1, std::memory_order_relaxed); }));
      g.wait();
    });
    EXPECT_FALSE(waited);
    EXPECT_EQ(on_owner, 16);
    EXPECT_EQ(other.load(std::memory_order_relaxed), 1);  // relaxed: call_needed_the_pool() waited for idle
    const ts::pool_statistics st = pool.get_statistics();
    EXPECT_EQ(st.accepted, 1U);  // the other thread's job only
    EXPECT_EQ(st.cancelled, 0U);
  }
}

// The pool has 8 slots for owners off the pool: a ninth owner holding its
// jobs at the same time hands them to the pool's queue, as any other
// thread does, and a slot given back is taken again.
namespace {
// `holders` owners off a paused pool at once, each keeping one job within
// reach; `while_held` runs while they hold them, then each waits (taking
// its job back: the pool stays paused). Returns how many jobs ran on their
// owner, and the pool's accepted count while they were held.
template <typename F>
std::pair<int, std::uint64_t> owners_holding_slots(ts::thread_pool& pool, int holders, F while_held) {
  std::latch kept(holders);
  std::latch go(1);
  std::atomic<int> on_owner{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < holders; ++t) {
    threads.emplace_back([&] {
      ts::task_group g(pool);
      const std::thread::id me = std::this_thread::get_id();
      g.run([&on_owner, me] {
        if (std::this_thread::get_id() == me) on_owner.fetch_add(1, std::memory_order_relaxed);
      });
      kept.count_down();
      go.wait();
      g.wait();  // a paused pool: only taking back ends it (the watchdog's resume otherwise)
    });
  }
  kept.wait();
  const std::uint64_t accepted = pool.get_statistics().accepted;
  while_held();
  go.count_down();
  // Bounded: an owner whose job went to the queue waits for the pool.
  std::atomic<bool> joined{false};
  std::thread watchdog([&] {
    if (!ts::test::eventually([&] { return joined.load(std::memory_order_acquire); })) pool.resume();
  });
  for (auto& t : threads) t.join();
  joined.store(true, std::memory_order_release);  // pairs with the watchdog's load
  watchdog.join();
  return {on_owner.load(std::memory_order_relaxed), accepted};  // relaxed: joined
}
}  // namespace

TEST(TaskGroup, ANinthOwnerOffThePoolAtOnceGoesThroughTheQueue) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-slots")};
  pool.pause();
  std::atomic<int> ran{0};
  ts::task_group ninth(pool);
  const auto [on_owner, accepted] = owners_holding_slots(pool, 8, [&] {
    ninth.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    EXPECT_EQ(pool.get_statistics().accepted, 1U) << "the ninth owner's job was kept";
  });
  EXPECT_EQ(accepted, 0U) << "an owner's job went to the queue";
  EXPECT_EQ(on_owner, 8);
  pool.resume();  // the ninth owner's job needs the pool
  ninth.wait();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 1);  // relaxed: waited for
  // Every slot was given back: 8 owners keep their jobs within reach again.
  pool.pause();
  const auto [again, accepted_again] = owners_holding_slots(pool, 8, [] {});
  EXPECT_EQ(again, 8);
  EXPECT_EQ(accepted_again, 1U);  // the ninth owner's job only
  pool.resume();
}

// A waiter that is not the owner takes the owner's kept jobs and runs them
// itself, as a worker would: a paused pool, or one stopped before any
// worker took them, does not hold its wait (it would sleep forever: no
// worker takes from the slots once stop() has begun, and stop() neither
// runs nor cancels them). The destructor, on that thread too, gives the
// slot back.
TEST(TaskGroup, AWaiterOnAnotherThreadRunsTheOwnersKeptJobs) {
  for (const bool stop_first : {false, true}) {
    ts::thread_pool pool{1, ts::test::pool_opts("tg-kept-other")};
    pool.pause();
    auto g = std::make_unique<ts::task_group>(pool);
    std::atomic<int> ran{0};
    for (int k = 0; k < 3; ++k) g->run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    if (stop_first) {
      const ts::stop_report report = pool.stop(ts::stop_mode::cancel_pending);
      EXPECT_EQ(report.cancelled, 0U) << "stop_first: " << stop_first;
    }
    std::atomic<bool> returned{false};
    std::thread waiter([&] {
      g->wait();
      g.reset();  // the destructor off the owner's thread
      returned.store(true, std::memory_order_release);
    });
    // Bounded: a wait that needed the pool ends when this resumes it.
    const bool on_its_own = ts::test::eventually([&] { return returned.load(std::memory_order_acquire); });
    if (!on_its_own) pool.resume();
    waiter.join();
    EXPECT_TRUE(on_its_own) << "stop_first: " << stop_first;
    EXPECT_EQ(ran.load(std::memory_order_relaxed), 3) << "stop_first: " << stop_first;  // relaxed: joined
    if (!stop_first) {
      // The slot is free again: 8 owners at once keep their jobs within reach.
      const auto [on_owner, accepted] = owners_holding_slots(pool, 8, [] {});
      EXPECT_EQ(on_owner, 8);
      EXPECT_EQ(accepted, 0U);
    }
  }
}

// run() took a std::bad_alloc from wrapping the job for "no memory for the
// wrapper" and ran the body on the calling thread - half moved-from (its
// string empty), with no error: a bad_alloc thrown by the body's own move
// is the body's, and leaves run() counted nowhere, as any other throw.
TEST(TaskGroup, ABadAllocFromTheCallablesOwnMoveLeavesRunUncounted) {
  ts::thread_pool pool{1, ts::test::pool_opts()};
  ts::task_group g(pool);
  std::atomic<int> copies{0};
  std::atomic<int> ran{0};
  std::thread([&] {  // not the owner: the plain path
    // Its move moves the string, then copies the tail, which "runs out of
    // memory" on its third copy.
    struct failing {
      std::atomic<int>* ran;
      std::string text;
      struct tail_t {
        std::atomic<int>* copies;
        tail_t(std::atomic<int>* c) noexcept : copies(c) {}  // NOLINT(google-explicit-constructor)
        tail_t(const tail_t& o) : copies(o.copies) {
          // relaxed: read after the join; the third copy is the one into the wrapper
          if (copies->fetch_add(1, std::memory_order_relaxed) + 1 == 3) throw std::bad_alloc();
        }
        tail_t& operator=(const tail_t&) = delete;
        ~tail_t() = default;
      } tail;
      char pad[32] = {};  // too large to store inline
      void operator()() const {
        if (text.size() == 100) ran->fetch_add(1, std::memory_order_relaxed);  // read after wait()
      }
    };
    static_assert(!ts::job_function::stored_inline<failing>, "the wrapper must allocate");
    const failing f{&ran, std::string(100, 'x'), failing::tail_t{&copies}};
    EXPECT_THROW(g.run(f), std::bad_alloc);
  })
      .join();
  g.wait();  // nothing counted: returns at once
  EXPECT_EQ(copies.load(std::memory_order_relaxed), 3);
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 0) << "the half-moved body ran";
}

// A job that waits for its own group waits for itself. Run by the owner
// inside that group's wait (here: taken back from a paused pool), it hung
// with no error; wait() now refuses it.
TEST(TaskGroup, AJobWaitingForItsOwnGroupInsideTheOwnersWaitIsRefused) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-self-wait")};
  pool.pause();
  ts::task_group g(pool);
  ts::error_code code = ts::error_code::ok;
  g.run([&g, &code] {
    try {
      g.wait();
    } catch (const ts::error_exception& e) {
      code = e.code();
    }
  });
  g.wait();  // takes the job back; before the fix, it waited for itself for ever
  EXPECT_EQ(code, ts::error_code::invalid_argument);
  pool.resume();
}

// The owner's wait takes its kept jobs back one at a time, newest first, and
// idle workers go on taking the oldest meanwhile: the group's jobs still run
// in parallel. Before, the wait closed the slot to every worker and ran all
// that was left itself, one after another - here job 2 (taken back) waits
// for job 1 to start, which only the worker (freed by job 2) can run, so
// that wait timed out.
TEST(TaskGroup, TheOwnersWaitLeavesTheOldestKeptJobsToIdleWorkers) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-kept-parallel")};
  std::atomic<bool> gate{false};
  std::atomic<bool> first_started{false};
  std::atomic<bool> second_saw_first{false};
  // The worker is busy until job 2 runs: it can take no kept job before the owner's wait.
  ASSERT_TRUE(
      pool.enqueue([&gate] { (void)ts::test::eventually([&] { return gate.load(std::memory_order_acquire); }); }));
  const std::thread::id owner = std::this_thread::get_id();
  std::thread::id first_ran_on;  // written by job 1, read after wait()
  ts::task_group g(pool);
  g.run([&first_started, &first_ran_on] {
    first_ran_on = std::this_thread::get_id();
    first_started.store(true, std::memory_order_release);  // pairs with job 2's acquire
  });
  g.run([&gate, &first_started, &second_saw_first] {
    gate.store(true, std::memory_order_release);  // frees the worker; pairs with its acquire
    second_saw_first.store(ts::test::eventually([&] { return first_started.load(std::memory_order_acquire); }),
                           std::memory_order_relaxed);  // read after wait()
  });
  g.wait();
  EXPECT_TRUE(second_saw_first.load(std::memory_order_relaxed)) << "job 1 waited while the owner ran job 2";
  EXPECT_NE(first_ran_on, owner);
  EXPECT_EQ(pool.get_statistics().accepted, 1U);  // the blocking job only: the group's went through the slot
}

// A job run inside its owner's wait that waits for an outer group of the
// same owner - through another group's wait in between - waits for itself.
// Only the innermost group was marked, so the outer one's wait went on:
// off the pool it spun for ever on the slot it was already taking back, on
// a worker it slept for ever. wait() refuses it at any depth.
TEST(TaskGroup, AJobWaitingForAnOuterGroupOfItsOwnerIsRefusedAtAnyDepth) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-self-wait-deep")};
  auto nested = [&pool] {
    ts::error_code code = ts::error_code::ok;
    ts::task_group outer(pool);
    outer.run([&pool, &outer, &code] {
      ts::task_group inner(pool);
      inner.run([&outer, &code] {
        try {
          outer.wait();
        } catch (const ts::error_exception& e) {
          code = e.code();
        }
      });
      inner.wait();
    });
    outer.wait();
    return code;
  };
  // Off the pool: on a paused pool the owner's waits run both jobs (taken back).
  pool.pause();
  EXPECT_EQ(nested(), ts::error_code::invalid_argument) << "off the pool";
  pool.resume();
  // On a worker: its waits run both jobs from its own deque.
  auto on_worker = pool.submit(nested);
  EXPECT_EQ(on_worker.get(), ts::error_code::invalid_argument) << "on a worker";
}

// A wait on another thread takes every kept job, and leaves the slot held
// (the owner may be publishing into it): the owner's next jobs, once the
// slot is full and all of it was taken, start again at the slot's first
// place. Before, they all went through the pool's queue until the owner
// itself waited.
TEST(TaskGroup, AfterAWaitOnAnotherThreadTheOwnersNextJobsAreKeptAgain) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-kept-again")};
  pool.pause();
  ts::task_group g(pool);
  std::atomic<int> ran{0};
  for (int k = 0; k < 16; ++k) g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
  std::thread([&g] { g.wait(); }).join();              // a paused pool: that wait runs all 16
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 16);  // relaxed: joined
  for (int k = 0; k < 16; ++k) g.run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
  EXPECT_EQ(pool.get_statistics().accepted, 0U) << "the owner's next jobs went to the queue";
  pool.resume();  // (only needed when they did)
  g.wait();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 32);  // relaxed: waited for
}

// A wait on another thread runs a job the owner run()s beside it, once that
// wait has looked at the slot and gone to sleep: the owner sees the sleeping
// waiter and wakes it. Before, that wait looked only when it began and left
// the job to the pool - a paused pool held it (until resume()), and a stopped
// one for ever. The waiter stays in its wait here because of a job another
// thread run() into the pool's queue (held while the pool is paused).
TEST(TaskGroup, AWaitOnAnotherThreadRunsAJobTheOwnerRunsBesideIt) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-kept-beside")};
  pool.pause();
  ts::task_group g(pool);
  std::atomic<int> queued_ran{0};
  std::thread([&g, &queued_ran] {
    g.run([&queued_ran] { queued_ran.fetch_add(1, std::memory_order_relaxed); });
  }).join();  // not the owner: through the queue, held by the pause
  EXPECT_EQ(pool.get_statistics().accepted, 1U);
  std::atomic<bool> waiting{false};
  std::atomic<bool> returned{false};
  std::thread::id waiter_id;
  std::thread waiter([&] {
    waiting.store(true, std::memory_order_release);
    g.wait();
    returned.store(true, std::memory_order_release);
  });
  waiter_id = waiter.get_id();
  ASSERT_TRUE(ts::test::eventually([&] { return waiting.load(std::memory_order_acquire); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // mostly asleep by now; either way it must look
  std::atomic<bool> beside_ran{false};
  std::thread::id beside_ran_on;  // written by the job, read once it ran (acquire below)
  g.run([&beside_ran, &beside_ran_on] {
    beside_ran_on = std::this_thread::get_id();
    beside_ran.store(true, std::memory_order_release);
  });
  const bool ran_while_paused = ts::test::eventually([&] { return beside_ran.load(std::memory_order_acquire); });
  EXPECT_TRUE(ran_while_paused) << "the job waited for the paused pool";
  if (ran_while_paused) {
    EXPECT_EQ(beside_ran_on, waiter_id);
  }
  EXPECT_FALSE(returned.load(std::memory_order_acquire));  // the queued job is still held
  pool.resume();
  waiter.join();
  EXPECT_EQ(queued_ran.load(std::memory_order_relaxed), 1);  // relaxed: joined
}

// pause() holds every job not yet started, kept jobs too: one run() after
// pause() returned is never started by a worker, even by one that was
// between its own look at the pause flag and its look at the slots when the
// pool paused (workers spinning while idle, so such a look is in progress
// at most times). Before, that worker took the job and ran it. (The window
// is a few instructions wide: this test did not catch it in release builds;
// chaos builds widen it with a yield before the workers' look at the slots.)
TEST(TaskGroup, AKeptJobRunAfterPauseReturnedNeverStartsOnAWorker) {
  ts::pool_options o = ts::test::pool_opts("tg-kept-pause");
  o.idle_wait = std::chrono::milliseconds(20);  // idle workers keep looking
  ts::thread_pool pool{2, o};
  ts::task_group g(pool);
  const std::thread::id owner = std::this_thread::get_id();
  std::size_t on_a_worker = 0;
  ts::test::round_budget budget(ts::test::scaled(20'000), 2'000, std::chrono::seconds(3));
  std::size_t i = 0;
  for (; budget.next(i); ++i) {
    pool.resume();
    // Let the workers be looking (no job: they spin).
    for (int spin = 0; spin < 64; ++spin) ts::detail::cpu_relax();
    pool.pause();
    std::thread::id ran_on;
    g.run([&ran_on] { ran_on = std::this_thread::get_id(); });
    g.wait();  // a paused pool: the owner runs it
    if (ran_on != owner) ++on_a_worker;
  }
  pool.resume();
  EXPECT_EQ(on_a_worker, 0U) << "of " << i << " rounds";
}

// The owner is a worker of another pool: while its wait helps there, a job
// it runs run()s into the group, which leases a slot after the wait has
// given its own back, and a worker of the group's pool takes that job and
// finishes it. The wait returned with the slot still leased (one of the
// pool's 8, held for as long as the group lived); it gives it back now.
TEST(TaskGroup, AnOwnersWaitGivesBackASlotLeasedWhileItHelped) {
  ts::thread_pool pool{2, ts::test::pool_opts("tg-slot-helped")};
  ts::thread_pool other{1, ts::test::pool_opts("tg-slot-owner")};
  std::optional<ts::task_group> g;
  std::atomic<bool> first_started{false};
  std::atomic<bool> second_ran{false};
  auto done = other.submit([&] {
    g.emplace(pool);  // owned by `other`'s worker, which is not one of `pool`'s
    g->run([&] {
      first_started.store(true, std::memory_order_release);
      while (!second_ran.load(std::memory_order_acquire)) std::this_thread::yield();
    });
    ASSERT_TRUE(ts::test::eventually([&] { return first_started.load(std::memory_order_acquire); }));
    // Onto this worker's deque: g's wait below helps run it.
    ASSERT_TRUE(other.enqueue([&] {
      g->run([&] { second_ran.store(true, std::memory_order_release); });  // a new slot: the wait gave its own back
      // Both jobs taken by `pool`'s workers and finished: the wait finds
      // the group done as soon as this returns. (A sleep: their count is
      // not observable here; if it is not yet done, the wait gives the
      // slot back on its own way.)
      ASSERT_TRUE(ts::test::eventually([&] { return second_ran.load(std::memory_order_acquire); }));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }));
    g->wait();
  });
  done.get();
  // Eight groups of this thread keep a job each: one slot each, unless g
  // still holds one (then the eighth job goes through the queue).
  pool.pause();
  std::vector<std::unique_ptr<ts::task_group>> groups;
  std::atomic<int> ran{0};
  for (std::size_t k = 0; k < ts::detail::owner_slot_count; ++k) {
    groups.push_back(std::make_unique<ts::task_group>(pool));
    groups.back()->run([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
  }
  EXPECT_EQ(pool.get_statistics().accepted, 0U) << "g's wait left its slot leased";  // kept jobs are not counted
  pool.resume();
  for (auto& group : groups) group->wait();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 8);  // relaxed: waited for
}
