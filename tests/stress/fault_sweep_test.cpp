// Allocation-fault sweep: a fixed workload over the public API (submit,
// submit with a future, stealing, task_group, parallel_for/reduce, timers,
// a typed pool, backpressure, cancellation) is run once per fault, with
// the k-th allocation the workload makes failing (std::bad_alloc), for
// k = 1..N where N is the number of allocations one clean run makes (a
// sample of them when N is large; the seed is printed and
// THREAD_SYSTEM_FAULT_SEED replays it). The failed allocation may land on
// any thread: the caller's, a worker's, the timer thread's.
//
// Each run must end without terminate (this process would die), with
// accepted == executed + cancelled for every pool, every accepted job run
// or cancelled exactly once, and every refusal reported through the
// library's own channels: a result error or an error_exception. A raw
// std::bad_alloc escaping a library call counts as an unreported refusal
// and fails the test.
//
// This binary replaces the global allocation functions, so it is a binary
// of its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../support/fault_sweep.hpp"
#include "../support/test_support.hpp"
#include "thread_system/compat/job.hpp"
#include "thread_system/core/thread_base.hpp"
#include "thread_system/detail/hazard_pointers.hpp"
#include "thread_system/detail/job_node.hpp"
#include "thread_system/diagnostics/latency_histogram.hpp"
#include "thread_system/pools/parallel_for.hpp"
#include "thread_system/pools/task_group.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/pools/typed_worker.hpp"
#include "thread_system/queues/adaptive_job_queue.hpp"
#include "thread_system/queues/lockfree_queue.hpp"
#include "thread_system/queues/work_stealing_deque.hpp"
#include "thread_system/services/service_registry.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {
using fault::outcome;

void check_report(outcome& out, const ts::stop_report& r, const char* pool) {
  if (r.accepted != r.executed + r.cancelled) {
    out.problem(std::string(pool) + ": accepted " + std::to_string(r.accepted) + " != executed " +
                std::to_string(r.executed) + " + cancelled " + std::to_string(r.cancelled));
  }
}

template <typename Pool>
void stop_and_check(outcome& out, Pool& pool, const char* name) {
  attempt(out, [&] { out.on_workers += pool.get_statistics().allocation_failures; });
  ts::stop_report r;
  if (attempt(out, [&] { r = pool.stop(); })) check_report(out, r, name);
}

std::uint64_t fib_tasks(ts::thread_pool& pool, int n) {
  if (n < 2) return static_cast<std::uint64_t>(n);
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  ts::task_group g(pool);
  g.run([&] { a = fib_tasks(pool, n - 1); });
  b = fib_tasks(pool, n - 2);
  g.wait();
  return a + b;
}

// The workload. Every check it makes goes into `out`; nothing here asserts,
// so gtest allocates nothing while a fault is armed.
void workload(outcome& out) {
  // ---- a pool: fire-and-forget, large captures, futures, stealing, fork-join
  {
    std::optional<ts::thread_pool> pool;  // optional, not make_unique: the test itself allocates nothing here
    if (!attempt(out, [&] { pool.emplace(2, ts::test::pool_opts("sweep")); })) return;
    std::atomic<std::uint64_t> ran{0};
    std::uint64_t accepted = 0;
    std::array<char, 200> big{};  // a capture too large to store inline: the job is boxed on the heap
    for (int i = 0; i < 64; ++i) {
      if (attempt(out, [&] { return pool->enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); }); })) {
        ++accepted;
      }
      if (i % 8 == 0 && attempt(out, [&] {
            return pool->enqueue(
                [&ran, big] { ran.fetch_add(1 + static_cast<std::uint64_t>(big[0]), std::memory_order_relaxed); });
          })) {
        ++accepted;
      }
    }
    // Jobs that spawn children onto their worker's deque (stolen by the other).
    for (int i = 0; i < 8; ++i) {
      if (attempt(out, [&] {
            return pool->enqueue([&] {
              for (int c = 0; c < 8; ++c) {
                // A refused child is the spawning job's to handle: run it here.
                auto child = [&ran] { ran.fetch_add(1, std::memory_order_relaxed); };
                if (!pool->enqueue(child)) child();
              }
              ran.fetch_add(1, std::memory_order_relaxed);
            });
          })) {
        accepted += 9;
      }
    }
    std::uint64_t future_sum = 0;
    std::uint64_t future_expected = 0;
    for (int i = 0; i < 8; ++i) {
      ts::future<int> f;
      if (attempt(out, [&] { f = pool->submit([i] { return i; }); })) {
        future_expected += static_cast<std::uint64_t>(i);
        try {
          future_sum += static_cast<std::uint64_t>(f.get());
        } catch (...) {
          out.problem("a future of an accepted job failed");
        }
      }
    }
    std::uint64_t fib = 0;
    attempt(out, [&] {
      auto f = pool->submit([&] { return fib_tasks(*pool, 12); });
      fib = f.get();
    });
    std::array<std::uint8_t, 4096> hits{};
    const bool looped =
        attempt(out, [&] { ts::parallel_for(*pool, 0, 4096, [&](int i) { ++hits[static_cast<std::size_t>(i)]; }); });
    std::uint64_t reduced = 0;
    const bool reduced_ok = attempt(out, [&] {
      reduced = ts::parallel_reduce(
          *pool, std::uint64_t{0}, std::uint64_t{10'000}, std::uint64_t{0},
          [](std::uint64_t lo, std::uint64_t hi, std::uint64_t acc) { return acc + (hi - lo); }, std::plus<>{});
    });
    attempt(out, [&] { pool->wait_idle(); });
    if (ran.load(std::memory_order_relaxed) != accepted) {
      // Each accepted job added 1 (the boxed ones 1 + big[0] == 1; a
      // spawning job 9: itself and its 8 children, run wherever).
      out.problem("fire-and-forget: ran " + std::to_string(ran.load(std::memory_order_relaxed)) + " of " +
                  std::to_string(accepted) + " accepted");
    }
    if (future_sum != future_expected) out.problem("futures: wrong sum");
    if (fib != 0 && fib != 144) out.problem("task_group fib(12) = " + std::to_string(fib));
    if (looped && std::any_of(hits.begin(), hits.end(), [](std::uint8_t h) { return h != 1; })) {
      out.problem("parallel_for: an index was not visited exactly once");
    }
    if (reduced_ok && reduced != 10'000) out.problem("parallel_reduce: wrong count");
    stop_and_check(out, *pool, "pool");
  }

  // ---- timers and cancellation on a pool
  {
    std::optional<ts::thread_pool> pool;
    if (!attempt(out, [&] { pool.emplace(1, ts::test::pool_opts("timers")); })) return;
    std::atomic<int> fired{0};
    std::atomic<int> ticks{0};
    int one_shots = 0;
    for (int i = 0; i < 8; ++i) {
      if (attempt(out, [&] {
            return pool->schedule_after(0ms, [&fired] { fired.fetch_add(1, std::memory_order_relaxed); });
          })) {
        ++one_shots;
      }
    }
    std::optional<ts::timer_handle> tick;
    attempt(out, [&] {
      auto h = pool->schedule_every(100us, [&ticks] { ticks.fetch_add(1, std::memory_order_relaxed); });
      if (h) tick = *h;
      return h;
    });
    std::optional<ts::cancellation_source> source;
    if (attempt(out, [&] { source.emplace(); })) {
      for (int i = 0; i < 4; ++i) {
        attempt(out, [&] { return pool->enqueue(source->token(), [] {}); });
      }
      (void)source->cancel();
    }
    std::this_thread::sleep_for(1ms);
    if (tick) (void)tick->cancel();
    stop_and_check(out, *pool, "timer pool");
    // stop(drain) dispatched every one-shot timer due by then (all of them):
    // each ran exactly once, or was cancelled because its run was refused.
    const auto t = pool->get_timer_statistics();
    // The periodic timer (if accepted) ends cancelled once, after `ticks`
    // runs; each one-shot either ran or was cancelled, exactly once.
    const auto runs = static_cast<std::uint64_t>(fired.load(std::memory_order_relaxed));
    const auto periodic = static_cast<std::uint64_t>(tick ? 1 : 0);
    if (t.scheduled != static_cast<std::uint64_t>(one_shots) + periodic) {
      out.problem("timers: scheduled " + std::to_string(t.scheduled) + " != accepted " +
                  std::to_string(one_shots + static_cast<int>(periodic)));
    }
    if (t.fired != runs + static_cast<std::uint64_t>(ticks.load(std::memory_order_relaxed))) {
      out.problem("timers: fired " + std::to_string(t.fired) + " != runs that started");
    }
    if (t.cancelled < periodic || runs + (t.cancelled - periodic) != static_cast<std::uint64_t>(one_shots)) {
      out.problem("timers: one-shots fired " + std::to_string(runs) + " + cancelled " +
                  std::to_string(t.cancelled - periodic) + " != scheduled " + std::to_string(one_shots));
    }
  }

  // ---- a typed pool
  {
    std::optional<ts::typed_thread_pool_t<ts::job_types>> typed;
    if (!attempt(out, [&] { typed.emplace(2); })) return;
    std::atomic<int> ran{0};
    int accepted = 0;
    for (int i = 0; i < 32; ++i) {
      const auto type = static_cast<ts::job_types>(i % 3);
      if (attempt(out, [&] { return typed->enqueue(type, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }); })) {
        ++accepted;
      }
    }
    attempt(out, [&] { typed->wait_idle(); });
    if (ran.load(std::memory_order_relaxed) != accepted) out.problem("typed pool: ran != accepted");
    // Typed timers: each one-shot accepted runs once as a job of its type or
    // is cancelled (its run refused), exactly once.
    std::atomic<int> fired{0};
    int one_shots = 0;
    for (int i = 0; i < 4; ++i) {
      const auto type = static_cast<ts::job_types>(i % 3);
      if (attempt(out, [&] {
            return typed->schedule_after(type, 0ms, [&fired] { fired.fetch_add(1, std::memory_order_relaxed); });
          })) {
        ++one_shots;
      }
    }
    stop_and_check(out, *typed, "typed pool");
    const auto t = typed->get_timer_statistics();
    const auto runs = static_cast<std::uint64_t>(fired.load(std::memory_order_relaxed));
    if (t.scheduled != static_cast<std::uint64_t>(one_shots) || t.fired != runs || runs + t.cancelled != t.scheduled) {
      out.problem("typed timers: scheduled " + std::to_string(t.scheduled) + ", fired " + std::to_string(t.fired) +
                  ", ran " + std::to_string(runs) + ", cancelled " + std::to_string(t.cancelled) + " (accepted " +
                  std::to_string(one_shots) + ")");
    }
  }

  // ---- backpressure: reject and drop_oldest
  for (auto policy : {ts::backpressure::reject(4), ts::backpressure::drop_oldest(4), ts::backpressure::block(4)}) {
    ts::pool_options o = ts::test::pool_opts("bounded");
    o.backpressure = policy;
    std::optional<ts::thread_pool> pool;
    if (!attempt(out, [&] { pool.emplace(1, o); })) return;
    for (int i = 0; i < 32; ++i) attempt(out, [&] { return pool->enqueue([] {}); });
    stop_and_check(out, *pool, "bounded pool");
  }
}

}  // namespace

TEST(FaultSweep, EveryAllocationFailureIsSurvivedAndReported) { fault::sweep(workload); }

// task_group::run() with no memory to wrap the job (a capture larger than
// job_function's inline storage) runs it on the calling thread, with its
// captures intact: the callable was moved into the job before the wrapper's
// allocation failed, and that moved job is what runs (running the
// moved-from argument instead would see an empty vector here).
TEST(TaskGroupOutOfMemory, AJobThatCannotBeWrappedRunsHereWithItsCaptures) {
  ts::thread_pool pool{1, ts::test::pool_opts("tg-oom")};
  ts::task_group g(pool);
  std::vector<int> values{1, 2, 3, 4};
  std::array<char, 128> padding{};  // beyond the inline storage: the wrapper allocates
  padding.fill('x');
  std::size_t seen_size = 0;
  char seen_pad = 0;
  bool ran_here = false;
  const auto caller = std::this_thread::get_id();
  fault::tl_fail_all = true;  // every allocation of this thread fails (moving a vector allocates nothing)
  g.run([v = std::move(values), padding, &seen_size, &seen_pad, &ran_here, caller] {
    seen_size = v.size();
    seen_pad = padding[127];
    ran_here = std::this_thread::get_id() == caller;
  });
  fault::tl_fail_all = false;
  g.wait();
  EXPECT_TRUE(ran_here) << "no memory to hand the job over: it runs on the caller";
  EXPECT_EQ(seen_size, 4U) << "the job ran with its captures moved out";
  EXPECT_EQ(seen_pad, 'x');
}

// A worker that cannot allocate goes on without: a job makes every
// allocation of its worker's thread fail, then spawns children. Each child
// needs a deque node the worker cannot get, so it goes through the
// injector instead (or is refused with resource_exhausted when that needs
// memory too). The failures are counted in the statistics, the first is
// reported to the error handler, and every accepted child runs.
TEST(WorkerOutOfMemory, IsCountedReportedAndLosesNoAcceptedJob) {
  std::atomic<int> oom_reports{0};
  std::atomic<int> other_reports{0};
  ts::pool_options o = ts::test::pool_opts("oom");
  o.on_error = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const ts::error_exception& x) {
      (x.code() == ts::error_code::resource_exhausted ? oom_reports : other_reports)
          .fetch_add(1, std::memory_order_relaxed);  // counters only; read after wait_idle()
    } catch (...) {
      other_reports.fetch_add(1, std::memory_order_relaxed);  // counter only
    }
  };
  ts::thread_pool pool{1, o};
  constexpr int children = 5000;
  std::atomic<int> ran{0};
  int accepted = 0;
  int refused = 0;
  int unreported = 0;
  auto spawner = pool.submit([&] {
    fault::tl_fail_all = true;  // from here every allocation of this worker's thread fails
    for (int i = 0; i < children; ++i) {
      try {
        if (pool.enqueue([&ran] { ran.fetch_add(1, std::memory_order_relaxed); })) {
          ++accepted;
        } else {
          ++refused;
        }
      } catch (...) {
        ++unreported;
      }
    }
    fault::tl_fail_all = false;
  });
  spawner.get();
  pool.wait_idle();
  const auto stats = pool.get_statistics();
  const ts::stop_report report = pool.stop();
  EXPECT_EQ(unreported, 0);
  EXPECT_EQ(accepted + refused, children);
  EXPECT_GT(accepted, 0) << "the injector had room: children must get through without a deque node";
  EXPECT_EQ(ran.load(std::memory_order_relaxed), accepted);  // relaxed: wait_idle() ordered the runs before this
  EXPECT_GE(stats.allocation_failures, 1U);
  EXPECT_GE(oom_reports.load(std::memory_order_relaxed), 1);    // relaxed: reports happen-before wait_idle() returns
  EXPECT_EQ(other_reports.load(std::memory_order_relaxed), 0);  // relaxed: as above
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
}

// Retiring never throws: a lock-free pop retires the node it unlinked after
// it has moved the job out, so a std::bad_alloc thrown there would lose the
// job (the fault sweep hung on exactly that: an accepted job neither run
// nor cancelled). Both allocations retire could make are forced here while
// every allocation of this thread fails: nine records make the scan
// threshold (2 * 2 * 9 + 32 = 68) exceed the 64 entries reserved for the
// retired list, and a hazard held by another record needs room in the
// scan's scratch list.
TEST(HazardDomainOutOfMemory, RetireNeverThrowsAndReclaimsEverything) {
  std::size_t reclaimed = 0;
  ts::detail::hazard_domain domain([](void* context, void*) noexcept { ++*static_cast<std::size_t*>(context); },
                                   &reclaimed);
  constexpr std::size_t pointers = 500;
  std::vector<int> targets(pointers + 1);  // distinct addresses; the last one stays protected
  {
    std::vector<std::unique_ptr<ts::detail::hazard_holder>> holders;
    for (int i = 0; i < 9; ++i) holders.push_back(std::make_unique<ts::detail::hazard_holder>(domain));
    ASSERT_EQ(domain.record_count(), 9U);
    holders[0]->set(0, &targets[pointers]);  // a hazard the scans must gather
    fault::tl_fail_all = true;               // every allocation of this thread fails from here
    std::size_t threw = 0;
    for (std::size_t i = 0; i < pointers; ++i) {
      try {
        holders[1]->retire(&targets[i]);
      } catch (...) {  // only reachable while retire may throw
        ++threw;
      }
    }
    fault::tl_fail_all = false;
    EXPECT_EQ(threw, 0U);
  }
  domain.collect();  // no holder left: every retired pointer goes
  EXPECT_EQ(reclaimed, pointers);
}

// Closing a lock-free queue never fails for lack of memory: close() needs a
// hazard record, and a thread that had none allocated one, so a pool's
// stop() threw std::bad_alloc half-way (the fault sweep found it). The queue
// now keeps a record for it. Every allocation of this thread fails here,
// and the thread has never used the queue.
TEST(LockfreeQueueOutOfMemory, CloseNeverFails) {
  ts::lockfree_queue queue;
  bool threw = false;
  fault::tl_fail_all = true;  // every allocation of this thread fails from here
  try {
    queue.close();
  } catch (...) {  // only reachable while close() may throw
    threw = true;
  }
  fault::tl_fail_all = false;
  EXPECT_FALSE(threw);
  EXPECT_TRUE(queue.is_closed());
  auto r = queue.try_push(ts::job_function([] {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::pool_stopped);
}

// An adaptive queue's pop, right after a switch to the lock-free side,
// first takes what is left in the previous (mutex) queue, then goes on to
// the lock-free one, where this thread's first use needs a hazard record.
// When none is free (another thread holds the only one: it is inside a
// push, moving its job) and none can be allocated, the lock-free queue's
// pop throws std::bad_alloc having taken nothing; the adaptive pop used to
// let that escape with the mutex queue's jobs already moved into `out`,
// where a caller that retried (as the pools do: "nothing was taken")
// destroyed them unrun. Now it returns them.
namespace adaptive_oom {
std::atomic<bool> hold_mover{false};
std::atomic<bool> mover_inside{false};
std::atomic<std::thread::id> mover_id{};
// A job whose move, on the mover thread while hold_mover is set, waits
// there (inside the lock-free push, holding its hazard record).
struct held_in_move {
  held_in_move() = default;
  held_in_move(held_in_move&& /*other*/) noexcept {
    // seq_cst throughout: test flags between two threads, no data published beyond them.
    if (hold_mover.load(std::memory_order_seq_cst) &&
        std::this_thread::get_id() == mover_id.load(std::memory_order_seq_cst)) {
      mover_inside.store(true, std::memory_order_seq_cst);
      const auto deadline = std::chrono::steady_clock::now() + 60s;  // a watchdog, not a timing assumption
      while (hold_mover.load(std::memory_order_seq_cst) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    }
  }
  held_in_move(const held_in_move&) = delete;
  held_in_move& operator=(const held_in_move&) = delete;
  held_in_move& operator=(held_in_move&&) = delete;
  ~held_in_move() = default;
  void operator()() const noexcept {}
};
}  // namespace adaptive_oom

TEST(AdaptiveQueueOutOfMemory, APopThatCannotGetAHazardRecordReturnsTheJobsItTook) {
  using namespace adaptive_oom;
  ts::adaptive_job_queue queue{ts::queue_strategy::ADAPTIVE};
  std::atomic<int> runs{0};
  ASSERT_TRUE(queue.try_push(
      ts::job_function([&runs] { runs.fetch_add(1, std::memory_order_relaxed); })));  // into the mutex queue
  ASSERT_TRUE(queue.force_switch_for_testing());                                      // now previous, not drained
  std::thread mover([&queue] {
    mover_id.store(std::this_thread::get_id(), std::memory_order_seq_cst);
    ts::job_function job{held_in_move{}};
    hold_mover.store(true, std::memory_order_seq_cst);
    EXPECT_TRUE(queue.try_push(std::move(job)));
  });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!mover_inside.load(std::memory_order_seq_cst) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(mover_inside.load(std::memory_order_seq_cst)) << "the mover never reached its job's move";

  std::array<ts::job_function, 4> out;
  std::size_t n = 0;
  bool threw = false;
  fault::tl_fail_all = true;  // every allocation of this thread fails: no hazard record for it
  try {
    n = queue.pop_batch(out);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  fault::tl_fail_all = false;
  hold_mover.store(false, std::memory_order_seq_cst);
  mover.join();

  EXPECT_FALSE(threw) << "the pop threw with the previous queue's job in `out`";
  ASSERT_EQ(n, 1U);
  out[0]();
  EXPECT_EQ(runs.load(std::memory_order_relaxed), 1);  // ran on this thread
  // The mover's job is still there, and nothing else.
  ts::job_function rest;
  ASSERT_TRUE(queue.try_pop(rest));
  EXPECT_FALSE(queue.try_pop(rest));
}

// A latency histogram allocates its buckets on the first record. Out of
// memory, that sample is dropped and counted (nothing throws, nothing
// aborts) and the next record tries again.
TEST(LatencyHistogramOutOfMemory, TheFirstRecordDropsItsSampleAndCountsIt) {
  ts::latency_histogram h;
  fault::tl_fail_all = true;  // every allocation of this thread fails from here
  h.record(100);
  h.record_concurrent(200);
  fault::tl_fail_all = false;
  EXPECT_EQ(h.dropped(), 2U);
  EXPECT_EQ(h.snapshot().count, 0U);
  h.record(300);
  EXPECT_EQ(h.snapshot().count, 1U);
  EXPECT_EQ(h.dropped(), 2U);
}

// Job nodes: the pool reserves storage for each worker's first refill on
// the thread that prepares the workers, so a worker's first injector batch
// (15 nodes) allocates nothing on its own thread - and gets no malloc arena
// there. Here the workers' threads fail every allocation.
TEST(JobNodePool, AWorkersFirstBatchAllocatesNothingOnItsThread) {
  ts::detail::job_node_pool pool;
  ts::detail::job_node_pool::cache a;
  ts::detail::job_node_pool::cache b;
  a.attach(&pool);
  b.attach(&pool);
  pool.reserve_for_worker();
  pool.reserve_for_worker();
  for (auto* c : {&a, &b}) {
    bool reserved = false;
    std::thread worker([&] {
      fault::tl_fail_all = true;  // every allocation of this thread fails
      reserved = c->reserve(15);
      fault::tl_fail_all = false;
    });
    worker.join();
    EXPECT_TRUE(reserved);
    EXPECT_GE(c->available(), 15U);
    EXPECT_LE(c->available(), 2 * ts::detail::job_node_pool::refill_step) << "a refill hands out what was asked";
  }
  for (auto* c : {&a, &b}) {
    for (std::size_t i = 0; i < 15; ++i) c->release(c->allocate());
  }
}

// A cache keeps room for a first refill only (a worker that never spawns
// holds 16 slots, not 5 batches). A thief's cache that frees more nodes than
// it has room for, on a thread where every allocation fails, loses none: the
// list keeps what fits and hands the rest to the shared list, from which
// another cache gets exactly those nodes back.
TEST(JobNodePool, AFullListThatCannotGrowHandsNodesToTheSharedList) {
  using pool_t = ts::detail::job_node_pool;
  pool_t pool;
  pool_t::cache owner;
  pool_t::cache thief;
  pool_t::cache other;
  owner.attach(&pool);
  thief.attach(&pool);
  other.attach(&pool);
  constexpr std::size_t taken_n = 200;
  std::vector<ts::detail::job_node*> taken;
  for (std::size_t i = 0; i < taken_n; ++i) taken.push_back(owner.allocate());
  std::thread t([&] {
    fault::tl_fail_all = true;  // every allocation of this thread fails
    for (auto* n : taken) thief.release(n);
    fault::tl_fail_all = false;
  });
  t.join();
  EXPECT_EQ(thief.available(), pool_t::refill_step) << "the list kept what its first room holds";
  // The other nodes are in the shared list: refills hand them out before
  // any fresh node.
  std::set<ts::detail::job_node*> back;
  for (std::size_t i = 0; i < taken_n - pool_t::refill_step; ++i) back.insert(other.allocate());
  for (std::size_t i = 0; i < pool_t::refill_step; ++i) back.insert(thief.allocate());
  EXPECT_EQ(back, std::set<ts::detail::job_node*>(taken.begin(), taken.end())) << "every node came back, none was lost";
  for (auto* n : back) other.release(n);
}

// reserve(n) for more nodes than a list's bound (a worker's batch of 1000
// jobs) when the list cannot grow: false, and no node is handed out twice
// afterwards. (The cache made room only up to its bound, the pool's refill
// then grew the list under its mutex, and a growth that failed there left
// nodes in the list that the chunk still counted as fresh.)
TEST(JobNodePool, AReserveBeyondTheBoundThatCannotGrowHandsOutNoNodeTwice) {
  using pool_t = ts::detail::job_node_pool;
  pool_t pool;
  pool_t::cache cache;
  cache.attach(&pool);
  ASSERT_TRUE(cache.reserve(600));
  std::set<ts::detail::job_node*> held;
  for (int i = 0; i < 40; ++i) held.insert(cache.allocate());
  fault::tl_fail_all = true;  // every allocation of this thread fails
  const bool reserved = cache.reserve(1000);
  fault::tl_fail_all = false;
  EXPECT_FALSE(reserved);
  ASSERT_TRUE(cache.reserve(1000));
  const std::size_t n = cache.available();
  std::size_t twice = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!held.insert(cache.allocate()).second) ++twice;
  }
  EXPECT_EQ(twice, 0U);
  for (auto* node : held) cache.release(node);
}

// A worker's deque costs its ring and nothing else until it grows: the
// rings it replaces are kept through the rings themselves, not in a list
// reserved beside them (a 512-byte vector per worker before).
TEST(WorkStealingDequeMemory, AnIdleDequeAllocatesOnlyItsRing) {
  fault::arm(0);  // count, fail none
  { ts::work_stealing_deque<int> deque(64); }
  const std::uint64_t allocations = fault::disarm();
  EXPECT_EQ(allocations, 2U) << "the ring's header and its slots";
}

// Growing when no memory is left changes nothing: reserve() says false,
// push() throws std::bad_alloc, and every element is still there, in order,
// for the owner and for a thief.
TEST(WorkStealingDequeMemory, AGrowthThatCannotAllocateChangesNothing) {
  ts::work_stealing_deque<int> deque(4);
  for (int i = 0; i < 8; ++i) deque.push(i);  // grows once, 4 -> 8, and is full
  ASSERT_EQ(deque.capacity(), 8U);
  bool reserved = true;
  bool threw = false;
  std::thread owner_thread([&] {
    fault::tl_fail_all = true;  // every allocation of this thread fails
    reserved = deque.reserve(1);
    try {
      deque.push(8);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    fault::tl_fail_all = false;
  });
  owner_thread.join();
  EXPECT_FALSE(reserved);
  EXPECT_TRUE(threw);
  EXPECT_EQ(deque.capacity(), 8U);
  EXPECT_EQ(deque.size_approx(), 8U);
  auto stolen = deque.steal();  // the oldest
  ASSERT_TRUE(stolen);
  EXPECT_EQ(stolen.value, 0);
  for (int expected = 7; expected >= 1; --expected) {  // the owner pops newest first
    int out = -1;
    ASSERT_TRUE(deque.pop(out));
    EXPECT_EQ(out, expected);
  }
  EXPECT_TRUE(deque.empty_approx());
}

// Copying an error_exception allocates nothing, so std::make_exception_ptr
// (which copies its argument, and in libstdc++ hands back the std::bad_alloc
// of a failed copy instead) always holds the error_exception itself, message
// and all, while every allocation fails.
TEST(ErrorExceptionOutOfMemory, ACopyAllocatesNothingAndKeepsTheError) {
  const ts::error_exception original(
      ts::error{ts::error_code::cancelled, "a reason longer than any short-string buffer holds inline"});
  std::exception_ptr p;
  std::optional<ts::error_exception> copy;
  fault::tl_fail_all = true;  // every allocation of this thread fails
  p = std::make_exception_ptr(original);
  copy.emplace(original);
  fault::tl_fail_all = false;
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->code(), ts::error_code::cancelled);
  EXPECT_EQ(copy->get_error().message(), original.get_error().message());
  EXPECT_STREQ(copy->what(), original.what());
  try {
    std::rethrow_exception(p);
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::cancelled);
    EXPECT_STREQ(e.what(), "cancelled: a reason longer than any short-string buffer holds inline");
  } catch (const std::bad_alloc&) {
    ADD_FAILURE() << "the exception_ptr holds the std::bad_alloc of a failed copy";
  }
}

// Made out of memory, an error_exception keeps the error it was given
// (moved in: that allocates nothing) and what() is the code's name; a copy
// made out of memory too keeps the code, and never throws.
TEST(ErrorExceptionOutOfMemory, MadeWithoutMemoryItKeepsItsErrorAndCopiesKeepTheCode) {
  const std::string reason = "a reason longer than any short-string buffer holds inline";
  ts::error err{ts::error_code::queue_full, reason};
  std::optional<ts::error_exception> e;
  std::optional<ts::error_exception> copy;
  fault::tl_fail_all = true;  // every allocation of this thread fails
  e.emplace(std::move(err));
  copy.emplace(*e);
  fault::tl_fail_all = false;
  EXPECT_EQ(e->code(), ts::error_code::queue_full);
  EXPECT_EQ(e->get_error().message(), reason);
  EXPECT_STREQ(e->what(), "queue_full");
  EXPECT_EQ(copy->code(), ts::error_code::queue_full);
  EXPECT_TRUE(copy->get_error().message().empty());
  const ts::error_exception later(*e);  // with memory again: the whole error
  EXPECT_EQ(later.get_error().message(), reason);
}

// A job whose token was cancelled before it started completes its future
// with error_exception{cancelled} whichever allocation of its discarding
// fails (the k-th from when the worker is let go, for every k up to past
// the last one the discard makes).
TEST(CancelledFutureOutOfMemory, GetSaysCancelledWhicheverAllocationOfTheDiscardFails) {
  for (std::uint64_t k = 1; k <= 16; ++k) {
    ts::thread_pool pool{1, ts::test::pool_opts("oom-cancel")};
    std::optional<ts::test::held_worker> held;
    held.emplace(pool);
    ts::cancellation_source src;
    auto f = pool.submit(src.token(), [] { return 1; });
    ASSERT_TRUE(f.valid());
    src.cancel();
    fault::arm(k);  // the worker discards the job once let go: its k-th allocation from here fails
    held->release();
    f.wait();
    (void)fault::disarm();
    try {
      (void)f.get();
      ADD_FAILURE() << "k=" << k << ": the cancelled job ran";
    } catch (const ts::error_exception& e) {
      EXPECT_EQ(e.code(), ts::error_code::cancelled) << "k=" << k;
    } catch (const std::bad_alloc&) {
      ADD_FAILURE() << "k=" << k << ": get() threw std::bad_alloc, not error_exception{cancelled}";
    }
    const ts::stop_report r = pool.stop();
    EXPECT_EQ(r.accepted, r.executed + r.cancelled) << "k=" << k;
  }
}

namespace {
struct oom_service {
  virtual ~oom_service() = default;
};
// The error code `f` throws as an error_exception; ok when it throws
// nothing, not_supported when it throws anything else (std::bad_alloc).
template <typename F>
ts::error_code thrown_code(F&& f) noexcept {
  try {
    f();
  } catch (const ts::error_exception& e) {
    return e.code();
  } catch (...) {
    return ts::error_code::not_supported;
  }
  return ts::error_code::ok;
}
}  // namespace

// Out of memory, the registry's throwing entry points (the seed API's
// register_service, which returns nothing, and scoped_override's
// constructors) throw error_exception{resource_exhausted} and change
// nothing.
TEST(ServiceRegistryOutOfMemory, EveryEntryPointReportsWithTheLibrarysError) {
  auto service = std::make_shared<oom_service>();
  auto factory = [] { return std::make_shared<oom_service>(); };
  ts::service_registry reg;
  (void)ts::service_registry::global();  // constructed before allocations fail
  fault::tl_fail_all = true;             // every allocation of this thread fails
  const auto seed = thrown_code([&] { ts::service_registry::register_service<oom_service>(service); });
  const auto with_instance = thrown_code([&] { ts::scoped_override<oom_service> o(reg, service); });
  const auto with_factory = thrown_code([&] { ts::scoped_override<oom_service> o(reg, factory); });
  fault::tl_fail_all = false;
  EXPECT_EQ(seed, ts::error_code::resource_exhausted);
  EXPECT_EQ(with_instance, ts::error_code::resource_exhausted);
  EXPECT_EQ(with_factory, ts::error_code::resource_exhausted);
  EXPECT_FALSE(ts::service_registry::global().contains<oom_service>());
  EXPECT_FALSE(reg.contains<oom_service>());
}

// Seed-style entry points out of memory: a refusal with its code, not an
// escaping std::bad_alloc (set_responsibilities() from a list copied it
// outside any guard; an empty callback_job built its message with
// allocations that could throw).
TEST(SeedApiOutOfMemory, TypedResponsibilitiesAndAnEmptyCallbackJobReportTheirErrors) {
  enum class kind : std::uint8_t { a, b };
  ts::typed_thread_worker_t<kind> worker;
  ts::callback_job empty{std::function<ts::result<void>()>{}, "a name longer than any small-string buffer"};
  const ts::error kept{ts::error_code::timeout, "an error message longer than any small-string buffer"};
  ts::callback_job by_reference{[&kept]() -> const ts::error& { return kept; }};  // copied when returned
  fault::tl_fail_all = true;  // every allocation of this thread fails
  ts::result<void> set = {};
  ts::result<void> ran = {};
  ts::result<void> referenced = {};
  std::optional<ts::error_code> constructed;
  bool escaped = false;
  try {
    set = worker.set_responsibilities({kind::a, kind::b});
    ran = empty.do_work();
    referenced = by_reference.do_work();
    try {
      ts::thread_base service("service");
      constructed = ts::error_code::ok;
    } catch (const ts::error_exception& e) {
      constructed = e.code();
    }
  } catch (const std::bad_alloc&) {
    escaped = true;
  }
  fault::tl_fail_all = false;
  ASSERT_FALSE(escaped) << "std::bad_alloc escaped";
  ASSERT_FALSE(referenced);
  EXPECT_EQ(referenced.error().code(), ts::error_code::timeout) << "the code, without the message it had no memory for";
  EXPECT_EQ(constructed, ts::error_code::resource_exhausted) << "thread_base's constructor";
  ASSERT_FALSE(set);
  EXPECT_EQ(set.error().code(), ts::error_code::resource_exhausted);
  EXPECT_TRUE(worker.is_universal()) << "a refused call changes nothing";
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.error().code(), ts::error_code::invalid_argument);
  ASSERT_TRUE(worker.set_responsibilities({kind::b}));  // with memory again
  EXPECT_EQ(worker.get_responsibilities().size(), 1U);
}
