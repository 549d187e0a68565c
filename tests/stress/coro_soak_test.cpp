// A soak of the coroutine layer under hostile use: tasks spawned and
// sync_wait()ed from plain threads, hopping between two pools, sleeping,
// forking with when_all, checking a token that a controller cancels, and
// throwing; one pool bounded (reject or drop_oldest, which abandons the
// resumption it drops); both pools stopped at once, in either mode, while
// the producers still start tasks.
//
// What must hold, per task the test started (its body reports when it
// starts, how it ended, and when its frame's locals are destroyed):
//   * every frame's locals are destroyed exactly once by the time the pools
//     are gone - finished, failed or abandoned, nothing leaks or dies twice;
//   * a spawn() that was refused never runs its task;
//   * sync_wait() returns exactly when the task finished, rethrows what it
//     threw, and throws `cancelled` when it was abandoned;
//   * every spawned task that failed is reported to an error handler once.
// The time budget is fixed; the per-test watchdog (support/test_main.cpp)
// turns a hang into a failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/coro/task.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t max_ids = 1u << 19;

enum outcome : std::uint8_t { none = 0, finished = 1, threw = 2 };

// Relaxed RMWs: the pools' stop() and the joins order every task's effects
// before the checks read them.
struct coro_ledger {
  std::vector<std::atomic<std::uint8_t>> started = std::vector<std::atomic<std::uint8_t>>(max_ids);
  std::vector<std::atomic<std::uint8_t>> ended = std::vector<std::atomic<std::uint8_t>>(max_ids);
  std::vector<std::atomic<std::uint8_t>> locals_destroyed = std::vector<std::atomic<std::uint8_t>>(max_ids);
  std::atomic<std::uint32_t> next{0};
  std::atomic<std::int64_t> children_alive{0};
  std::atomic<std::uint64_t> handler_calls{0};
};

// A local of each top-level task: its destruction is the frame's.
struct frame_guard {
  coro_ledger* l;
  std::uint32_t id;
  frame_guard(coro_ledger& ledger, std::uint32_t i) : l(&ledger), id(i) {
    l->started[id].fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  }
  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;
  ~frame_guard() { l->locals_destroyed[id].fetch_add(1, std::memory_order_relaxed); }  // test bookkeeping
};

// A local of each when_all child.
struct child_guard {
  coro_ledger* l;
  explicit child_guard(coro_ledger& ledger) : l(&ledger) {
    l->children_alive.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  }
  child_guard(const child_guard&) = delete;
  child_guard& operator=(const child_guard&) = delete;
  ~child_guard() { l->children_alive.fetch_sub(1, std::memory_order_relaxed); }  // test bookkeeping
};

struct two_pools {
  ts::thread_pool& a;  // unbounded
  ts::thread_pool& b;  // bounded: reject or drop_oldest
};

ts::task<int> child(two_pools pools, coro_ledger& ledger, unsigned seed) {
  child_guard g(ledger);
  std::minstd_rand rng(seed);
  co_await (rng() % 2 == 0 ? pools.a : pools.b).schedule();
  if (rng() % 4 == 0) co_await pools.a.sleep_for(std::chrono::microseconds(rng() % 300));
  if (rng() % 8 == 0) throw std::runtime_error("coro soak: a child that throws");
  co_return 1;
}

// The body of every top-level task: hops, sleeps, a fork, a cancellation
// point, maybe a throw. Reports its start, its end and its locals.
ts::task<std::uint32_t> body(two_pools pools, coro_ledger& ledger, std::uint32_t id) {
  frame_guard g(ledger, id);
  std::minstd_rand rng(id * 2654435761u + 1);
  try {
    co_await pools.a.schedule();
    if (rng() % 2 == 0) co_await pools.b.schedule();
    if (rng() % 3 == 0) co_await pools.a.sleep_for(std::chrono::microseconds(rng() % 500));
    if (rng() % 3 == 0) {
      auto [x, y] = co_await ts::when_all(child(pools, ledger, rng()), child(pools, ledger, rng()));
      if (x + y != 2) throw std::logic_error("when_all gave wrong values");
    }
    co_await ts::cancellation_point();
    if (rng() % 10 == 0) co_await pools.b.schedule();
    if (rng() % 9 == 0) throw std::runtime_error("coro soak: a task that throws");
  } catch (...) {
    ledger.ended[id].store(threw, std::memory_order_relaxed);  // test bookkeeping
    throw;
  }
  ledger.ended[id].store(finished, std::memory_order_relaxed);  // test bookkeeping
  co_return id;
}

ts::task<void> spawned(two_pools pools, coro_ledger& ledger, std::uint32_t id) {
  (void)co_await body(pools, ledger, id);
}

class CoroSoak : public testing::TestWithParam<std::tuple<ts::backpressure::policy, ts::stop_mode>> {};

TEST_P(CoroSoak, EveryTaskEndsOnceAndEveryFrameIsFreed) {
  const auto [policy, mode] = GetParam();
  coro_ledger ledger;
  std::vector<std::uint8_t> spawned_ok(max_ids, 0);  // written by the id's producer, read after the joins
  auto handler = [&ledger](const std::exception_ptr&) {
    ledger.handler_calls.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  };
  ts::pool_options oa = ts::test::pool_opts("coro_soak_a");
  oa.on_error = handler;
  ts::pool_options ob = ts::test::pool_opts("coro_soak_b");
  ob.on_error = handler;
  ob.backpressure =
      policy == ts::backpressure::policy::reject ? ts::backpressure::reject(16) : ts::backpressure::drop_oldest(16);
  auto a = std::make_unique<ts::thread_pool>(2, oa);
  auto b = std::make_unique<ts::thread_pool>(1, ob);
  const two_pools pools{*a, *b};

  std::mutex source_mutex;  // guards `source`, which the controller replaces
  ts::cancellation_source source;
  auto current_token = [&] {
    std::lock_guard lock(source_mutex);
    return source.token();
  };

  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> wrong{0};
  std::vector<std::string> wrong_messages(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(static_cast<unsigned>(p) + 17u * static_cast<unsigned>(policy));
      auto note = [&](const std::string& what) {
        wrong.fetch_add(1, std::memory_order_relaxed);
        if (wrong_messages[p].empty()) wrong_messages[p] = what;
      };
      while (!done.load(std::memory_order_acquire)) {  // pairs with the release store below
        const std::uint32_t id = ledger.next.fetch_add(1, std::memory_order_relaxed);
        if (id >= max_ids) break;
        if (rng() % 4 != 0) {
          const bool tokened = rng() % 2 == 0;
          auto r = tokened ? ts::spawn(*a, current_token(), spawned(pools, ledger, id))
                           : ts::spawn(*a, spawned(pools, ledger, id));
          if (r) {
            spawned_ok[id] = 1;
          } else if (r.error().code() != ts::error_code::pool_stopped &&
                     r.error().code() != ts::error_code::queue_full) {
            note("spawn: " + r.error().message());
          }
        } else {
          // sync_wait: its outcome must be the body's.
          try {
            const std::uint32_t v = ts::sync_wait(body(pools, ledger, id), current_token());
            if (v != id || ledger.ended[id].load(std::memory_order_relaxed) != finished) {
              note("sync_wait returned for a task that did not finish");
            }
          } catch (const ts::error_exception& e) {
            const auto end = ledger.ended[id].load(std::memory_order_relaxed);
            // Abandoned (no end recorded): cancelled. Otherwise the body's
            // own exception: a refusal, a cancellation point, a failed hop.
            if (end == none && e.code() != ts::error_code::cancelled) {
              note(std::string("sync_wait of an abandoned task threw ") + e.what());
            }
            if (end == finished) note(std::string("sync_wait of a finished task threw ") + e.what());
          } catch (const std::exception& e) {
            if (ledger.ended[id].load(std::memory_order_relaxed) != threw) {
              note(std::string("sync_wait threw what the task did not: ") + e.what());
            }
          }
        }
      }
    });
  }
  threads.emplace_back([&] {
    std::mt19937 rng(99u);
    while (!done.load(std::memory_order_acquire)) {  // pairs with the release store below
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
      ts::cancellation_source old;
      {
        std::lock_guard lock(source_mutex);
        old = std::exchange(source, ts::cancellation_source{});
      }
      if (rng() % 2 == 0) (void)old.cancel();
    }
  });

  std::this_thread::sleep_for(400ms);
  // Both pools stop at once, while the producers still start tasks.
  std::thread stop_b([&] { (void)b->stop(mode); });
  (void)a->stop(mode);
  stop_b.join();
  done.store(true, std::memory_order_release);  // pairs with the loops' acquire
  for (auto& t : threads) t.join();
  a.reset();
  b.reset();

  ASSERT_EQ(wrong.load(std::memory_order_relaxed), 0u) << wrong_messages[0] << "; " << wrong_messages[1];
  const std::uint32_t ids = std::min(ledger.next.load(std::memory_order_relaxed), max_ids);
  std::uint64_t spawned_failures = 0;
  std::uint64_t ran = 0;
  for (std::uint32_t id = 0; id < ids; ++id) {
    const unsigned s = ledger.started[id].load(std::memory_order_relaxed);
    const unsigned d = ledger.locals_destroyed[id].load(std::memory_order_relaxed);
    ASSERT_LE(s, 1u) << "task " << id << " started " << s << " times";
    ASSERT_EQ(d, s) << "task " << id << ": locals destroyed " << d << " times, started " << s;
    ran += s;
    if (spawned_ok[id] != 0 && ledger.ended[id].load(std::memory_order_relaxed) == threw) ++spawned_failures;
  }
  EXPECT_EQ(ledger.children_alive.load(std::memory_order_relaxed), 0) << "a when_all child's frame leaked";
  EXPECT_EQ(ledger.handler_calls.load(std::memory_order_relaxed), spawned_failures)
      << "spawned tasks that failed and error-handler calls differ";
  EXPECT_GT(ran, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    BoundedSecondPool, CoroSoak,
    testing::Combine(testing::Values(ts::backpressure::policy::reject, ts::backpressure::policy::drop_oldest),
                     testing::Values(ts::stop_mode::drain, ts::stop_mode::cancel_pending)),
    [](const testing::TestParamInfo<CoroSoak::ParamType>& param_info) {
      return std::string(std::get<0>(param_info.param) == ts::backpressure::policy::reject ? "reject" : "drop_oldest") +
             (std::get<1>(param_info.param) == ts::stop_mode::drain ? "_drain" : "_cancel_pending");
    });

}  // namespace
