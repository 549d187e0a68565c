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
#include <new>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/parallel_for.hpp"
#include "thread_system/pools/task_group.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace {
// Armed: allocations are counted; the one whose number equals g_fail_at
// throws. All relaxed: a count shared by every thread, no data published.
std::atomic<bool> g_armed{false};
std::atomic<std::uint64_t> g_count{0};
std::atomic<std::uint64_t> g_fail_at{0};

bool should_fail() noexcept {
  if (!g_armed.load(std::memory_order_relaxed)) return false;
  const std::uint64_t n = g_count.fetch_add(1, std::memory_order_relaxed) + 1;
  return n == g_fail_at.load(std::memory_order_relaxed);
}

void* allocate(std::size_t n) {
  if (should_fail()) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

void* allocate_aligned(std::size_t n, std::align_val_t al) {
  if (should_fail()) throw std::bad_alloc();
  const auto a = static_cast<std::size_t>(al);
  const std::size_t rounded = (n + a - 1) / a * a;
  if (void* p = std::aligned_alloc(a, rounded == 0 ? a : rounded)) return p;
  throw std::bad_alloc();
}
}  // namespace

// Replacements of the global allocation functions. Every form is replaced,
// so each allocation is counted and each is paired with free().
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate_aligned(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate_aligned(n, a); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {

// What one run of the workload saw.
struct outcome {
  std::uint64_t unreported = 0;  // a std::bad_alloc (or other foreign exception) escaped a library call
  std::uint64_t refused = 0;     // refusals for lack of memory (resource_exhausted), reported as errors
  std::uint64_t broken = 0;      // an accounting invariant failed
  std::uint64_t on_workers = 0;  // allocation failures workers counted (and survived)
  std::string first_problem;

  void problem(const std::string& what) {
    ++broken;
    if (first_problem.empty()) first_problem = what;
  }
};

// Calls `f` (a library call). Returns true when it was accepted; counts a
// refusal reported as an error, or a foreign exception as unreported.
template <typename F>
bool attempt_at(outcome& out, int line, F&& f) {
  try {
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      return true;
    } else {
      auto r = f();
      if (r) return true;
      if (r.error().code() == ts::error_code::resource_exhausted) ++out.refused;
      return false;
    }
  } catch (const ts::error_exception& e) {
    if (e.code() == ts::error_code::resource_exhausted) ++out.refused;
    return false;
  } catch (...) {
    ++out.unreported;
    if (out.first_problem.empty()) {
      try {
        throw;
      } catch (const std::exception& e) {
        out.first_problem = "unreported exception at line " + std::to_string(line) + ": " + e.what();
      } catch (...) {
        out.first_problem = "unreported non-standard exception at line " + std::to_string(line);
      }
    }
    return false;
  }
}

// attempt(out, f): attempt_at() naming the caller's line.
#define attempt(out, ...) attempt_at(out, __LINE__, __VA_ARGS__)

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
            return pool->enqueue([&ran, big] { ran.fetch_add(1 + static_cast<std::uint64_t>(big[0]), std::memory_order_relaxed); });
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
    const bool looped = attempt(out, [&] { ts::parallel_for(*pool, 0, 4096, [&](int i) { ++hits[static_cast<std::size_t>(i)]; }); });
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
      auto h = pool->schedule_every(100us, [] {});
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
    if (fired.load(std::memory_order_relaxed) > one_shots) out.problem("timers: a one-shot timer ran twice");
    if (t.cancelled > t.scheduled) out.problem("timers: more cancelled than scheduled");
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
    stop_and_check(out, *typed, "typed pool");
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

std::uint64_t run_once(std::uint64_t fail_at, outcome& out) {
  out.first_problem.reserve(256);  // a problem found while armed is recorded without allocating
  g_count.store(0, std::memory_order_relaxed);
  g_fail_at.store(fail_at, std::memory_order_relaxed);
  g_armed.store(true, std::memory_order_relaxed);
  try {
    workload(out);
  } catch (...) {  // a library call the workload did not expect to throw
    ++out.unreported;
    if (out.first_problem.empty()) out.first_problem = "an exception escaped an unguarded call";
  }
  g_armed.store(false, std::memory_order_relaxed);
  return g_count.load(std::memory_order_relaxed);
}

}  // namespace

TEST(FaultSweep, EveryAllocationFailureIsSurvivedAndReported) {
  // A clean run counts the allocations (N varies a little between runs:
  // threads race for the node chunks).
  outcome clean;
  const std::uint64_t n = run_once(0, clean);
  ASSERT_EQ(clean.unreported, 0U) << clean.first_problem;
  ASSERT_EQ(clean.broken, 0U) << clean.first_problem;
  ASSERT_EQ(clean.refused, 0U) << "a clean run refused something";
  ASSERT_GT(n, 0U);

  // Every k while the budget lasts, in a random order (so a short budget
  // still covers the whole range), at least `min_runs` of them.
  std::uint64_t seed = std::random_device{}();
  if (const char* env = std::getenv("THREAD_SYSTEM_FAULT_SEED")) seed = std::strtoull(env, nullptr, 10);
  std::vector<std::uint64_t> ks(n);
  std::iota(ks.begin(), ks.end(), 1);
  std::shuffle(ks.begin(), ks.end(), std::mt19937_64(seed));
  const std::size_t min_runs = std::min<std::size_t>(ks.size(), ts::test::scaled(200));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  std::uint64_t injected = 0;
  std::uint64_t survived = 0;
  std::uint64_t refusals = 0;
  std::uint64_t on_workers = 0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    if (i >= min_runs && std::chrono::steady_clock::now() > deadline) break;
    outcome out;
    (void)run_once(ks[i], out);
    ++injected;
    refusals += out.refused;
    on_workers += out.on_workers;
    EXPECT_EQ(out.unreported, 0U) << "k = " << ks[i] << " (seed " << seed << "): " << out.first_problem;
    EXPECT_EQ(out.broken, 0U) << "k = " << ks[i] << " (seed " << seed << "): " << out.first_problem;
    if (out.unreported == 0 && out.broken == 0) ++survived;
  }
  std::printf("faults injected: %llu, survived: %llu (of N = %llu allocations per run; seed %llu; %llu refusals "
              "reported as errors, %llu failures absorbed by workers)\n",
              static_cast<unsigned long long>(injected), static_cast<unsigned long long>(survived),
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(refusals), static_cast<unsigned long long>(on_workers));
  EXPECT_EQ(survived, injected);
}
