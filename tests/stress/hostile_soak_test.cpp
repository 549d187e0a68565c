// A soak of thread_pool and typed_thread_pool_t under everything a hostile user may do at once:
// producers submitting single jobs, batches, futures, jobs with tokens that
// a controller cancels, throwing jobs, timers that are cancelled at random,
// waits for idle; a controller pausing, resuming and resizing the pool;
// every backpressure policy (and the bounded injector); and stop() in either
// mode while the producers are still submitting.
//
// What must hold at the end, for every job the test made (each has an id and
// reports its runs and its destruction):
//   * a job that a submission refused never runs;
//   * a job that was accepted runs at most once, and its function object is
//     destroyed exactly once;
//   * every future becomes ready - with the value, or with `cancelled` when
//     the pool discarded the job (token, drop_oldest, stop(cancel_pending));
//   * a timer whose cancel() returned true never runs afterwards;
//   * the stop report balances (accepted = executed + cancelled), its
//     `executed` is exactly the runs the jobs and timers saw, its `failed`
//     exactly the throwing jobs that ran, reported to the error handler;
//   * stop(drain) without drop_oldest loses nothing: every accepted job ran
//     but those whose token was cancelled before they started.
// The time budget is fixed (not an iteration count); the per-test watchdog
// (support/test_main.cpp) turns a hang into a failure.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t max_ids = 1u << 20;  // more than a budget's worth of jobs on any machine

// Per-id records. Relaxed RMWs throughout: the pool's stop() (and the
// producers' joins) order every job's and destructor's effects before the
// checks read them.
struct soak_ledger {
  std::vector<std::atomic<std::uint8_t>> runs = std::vector<std::atomic<std::uint8_t>>(max_ids);
  std::vector<std::atomic<std::uint8_t>> destroyed = std::vector<std::atomic<std::uint8_t>>(max_ids);
  std::atomic<std::uint32_t> next{0};
  std::atomic<std::uint64_t> throwing_runs{0};
  std::atomic<std::uint64_t> handler_calls{0};

  std::uint32_t fresh_id() { return next.fetch_add(1, std::memory_order_relaxed); }
};

// A job (or a timer's function) that reports its runs and the destruction of
// its last live copy. A moved-from probe reports nothing.
class probe {
 public:
  probe(soak_ledger& l, std::uint32_t id, bool throws = false) : l_(&l), id_(id), throws_(throws) {}
  probe(probe&& o) noexcept : l_(std::exchange(o.l_, nullptr)), id_(o.id_), throws_(o.throws_) {}
  probe(const probe&) = delete;
  probe& operator=(const probe&) = delete;
  probe& operator=(probe&&) = delete;
  ~probe() {
    if (l_ != nullptr) l_->destroyed[id_].fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  }
  std::uint32_t operator()() {
    l_->runs[id_].fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
    if (throws_) {
      l_->throwing_runs.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
      throw std::runtime_error("hostile soak: a job that throws");
    }
    return id_;
  }

 private:
  soak_ledger* l_;
  std::uint32_t id_;
  bool throws_;
};

enum class admission { none, reject, block, block_for, caller_runs, drop_oldest, bounded_injector };

const char* name_of(admission a) {
  switch (a) {
    case admission::none:
      return "unbounded";
    case admission::reject:
      return "reject";
    case admission::block:
      return "block";
    case admission::block_for:
      return "block_for";
    case admission::caller_runs:
      return "caller_runs";
    case admission::drop_oldest:
      return "drop_oldest";
    case admission::bounded_injector:
      return "bounded_injector";
  }
  return "?";
}

using typed_pool = ts::typed_thread_pool_t<ts::job_types>;

template <typename Pool>
constexpr bool is_typed = std::is_same_v<Pool, typed_pool>;

ts::backpressure bound_for(admission a) {
  constexpr std::size_t room = 48;
  switch (a) {
    case admission::reject:
      return ts::backpressure::reject(room);
    case admission::block:
      return ts::backpressure::block(room);
    case admission::block_for:
      return ts::backpressure::block_for(room, 1ms);
    case admission::caller_runs:
      return ts::backpressure::caller_runs(room);
    case admission::drop_oldest:
      return ts::backpressure::drop_oldest(room);
    default:
      return ts::backpressure::unbounded();
  }
}

// A pool of two workers (universal ones for the typed pool) with the
// admission rule `a`.
template <typename Pool>
std::unique_ptr<Pool> make_soak_pool(admission a, ts::error_handler on_error) {
  if constexpr (is_typed<Pool>) {
    ts::typed_pool_options<ts::job_types> o;
    o.name = "hostile_soak_typed";
    o.queue = ts::test::pool_queue_under_test();
    o.backpressure = bound_for(a);
    o.on_error = std::move(on_error);
    return std::make_unique<Pool>(2, std::move(o));
  } else {
    ts::pool_options o = ts::test::pool_opts("hostile_soak");
    o.backpressure = bound_for(a);
    if (a == admission::bounded_injector) {
      o.queue = ts::pool_queue::bounded;
      o.initial_queue_capacity = 48;
    }
    o.on_error = std::move(on_error);
    return std::make_unique<Pool>(2, std::move(o));
  }
}

// Calls `f(pool)` for a thread_pool, `f(pool, type)` with a random job type
// for the typed pool: one spelling of each submission for both.
template <typename Pool, typename F>
decltype(auto) with_type(Pool& pool, std::mt19937& rng, F&& f) {
  if constexpr (is_typed<Pool>) {
    constexpr std::array types{ts::job_types::RealTime, ts::job_types::Batch, ts::job_types::Background};
    return std::forward<F>(f)(pool, types[rng() % types.size()]);
  } else {
    return std::forward<F>(f)(pool);
  }
}

// The refusals a pool may give under this test, whatever the policy.
bool expected_refusal(ts::error_code c) {
  return c == ts::error_code::pool_stopped || c == ts::error_code::queue_full || c == ts::error_code::timeout;
}

struct submitted_future {
  ts::future<std::uint32_t> f;
  std::uint32_t id;
};

template <typename Pool>
void soak(admission policy, ts::stop_mode mode) {
  soak_ledger ledger;
  // Written by the producer that made the id, read after the joins.
  std::vector<std::uint8_t> accepted(max_ids, 0);
  std::vector<std::uint8_t> with_token(max_ids, 0);
  std::atomic<bool> any_token_cancelled{false};

  auto pool = make_soak_pool<Pool>(policy, [&ledger](const std::exception_ptr&) {
    ledger.handler_calls.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
  });

  std::mutex source_mutex;  // guards `source`, which the controller replaces
  ts::cancellation_source source;
  auto current_token = [&] {
    std::lock_guard lock(source_mutex);
    return source.token();
  };

  std::atomic<bool> stopping{false};  // producers stop waiting for idle once set
  std::atomic<bool> done{false};      // producers and controller leave
  constexpr int producers = 3;
  std::vector<std::vector<submitted_future>> futures(producers);
  std::vector<std::vector<std::pair<ts::timer_handle, std::uint32_t>>> cancelled_timers(producers);
  std::atomic<std::uint64_t> unexpected{0};
  std::vector<std::string> unexpected_messages(producers);

  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(static_cast<unsigned>(p) * 7919u + static_cast<unsigned>(policy) * 31u);
      auto note_unexpected = [&](const std::string& what) {
        unexpected.fetch_add(1, std::memory_order_relaxed);
        if (unexpected_messages[p].empty()) unexpected_messages[p] = what;
      };
      auto check = [&](const ts::result<void>& r, std::span<const std::uint32_t> ids) {
        if (r) {
          for (auto id : ids) accepted[id] = 1;
        } else if (!expected_refusal(r.error().code())) {
          note_unexpected("enqueue: " + std::string(ts::to_string(r.error().code())) + ": " + r.error().message());
        }
      };
      while (!done.load(std::memory_order_acquire)) {  // pairs with the release store below
        if (ledger.next.load(std::memory_order_relaxed) + 64 >= max_ids) break;
        switch (rng() % 10) {
          case 0:
          case 1: {
            const std::uint32_t id = ledger.fresh_id();
            check(with_type(*pool, rng, [&](auto& pl, auto... type) { return pl.enqueue(type..., probe(ledger, id)); }),
                  std::span(&id, 1));
            break;
          }
          case 2: {
            const std::uint32_t id = ledger.fresh_id();
            check(with_type(*pool, rng,
                            [&](auto& pl, auto... type) { return pl.enqueue(type..., probe(ledger, id, true)); }),
                  std::span(&id, 1));
            break;
          }
          case 3: {
            std::vector<probe> batch;
            std::vector<std::uint32_t> ids;
            const std::size_t n = 1 + rng() % 8;
            for (std::size_t i = 0; i < n; ++i) {
              ids.push_back(ledger.fresh_id());
              batch.emplace_back(ledger, ids.back());
            }
            check(with_type(*pool, rng,
                            [&](auto& pl, auto... type) { return pl.enqueue_batch(type..., std::move(batch)); }),
                  ids);
            break;
          }
          case 4:
          case 5: {
            const std::uint32_t id = ledger.fresh_id();
            try {
              const bool tokened = rng() % 2 == 0;
              with_token[id] = tokened ? 1 : 0;
              futures[p].push_back({with_type(*pool, rng,
                                              [&](auto& pl, auto... type) {
                                                return tokened ? pl.submit(type..., current_token(), probe(ledger, id))
                                                               : pl.submit(type..., probe(ledger, id));
                                              }),
                                    id});
              accepted[id] = 1;
            } catch (const ts::error_exception& e) {
              if (!expected_refusal(e.code())) note_unexpected(std::string("submit: ") + e.what());
            }
            break;
          }
          case 6: {
            const std::uint32_t id = ledger.fresh_id();
            with_token[id] = 1;
            check(with_type(
                      *pool, rng,
                      [&](auto& pl, auto... type) { return pl.enqueue(type..., current_token(), probe(ledger, id)); }),
                  std::span(&id, 1));
            break;
          }
          case 7: {
            const std::uint32_t id = ledger.fresh_id();
            const auto delay = std::chrono::microseconds(rng() % 2000);
            auto h = with_type(*pool, rng, [&](auto& pl, auto... type) {
              return pl.schedule_after(type..., delay, probe(ledger, id));
            });
            if (h) {
              if (rng() % 2 == 0 && h->cancel()) cancelled_timers[p].emplace_back(std::move(*h), id);
            } else if (h.error().code() != ts::error_code::pool_stopped) {
              note_unexpected("schedule_after: " + h.error().message());
            }
            break;
          }
          case 8:
            // wait_idle() may wait for a paused pool (the controller resumes
            // it) and returns once stop() has begun.
            if (!stopping.load(std::memory_order_acquire) && rng() % 8 == 0) {  // pairs with the release store
              try {
                pool->wait_idle();
              } catch (const ts::error_exception& e) {
                note_unexpected(std::string("wait_idle: ") + e.what());
              }
            }
            break;
          default:
            std::this_thread::yield();
        }
      }
    });
  }

  // The controller: pause/resume, resize, a new cancellation source now and
  // then (cancelling the old one).
  threads.emplace_back([&] {
    std::mt19937 rng(12345u + static_cast<unsigned>(policy));
    while (!done.load(std::memory_order_acquire)) {  // pairs with the release store below
      switch (rng() % 4) {
        case 0:
          pool->pause();
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
          pool->resume();
          break;
        case 1: {
          const auto r = pool->resize(1 + rng() % 3);
          if (!r && r.error().code() != ts::error_code::pool_stopped) {
            unexpected.fetch_add(1, std::memory_order_relaxed);
          }
          break;
        }
        case 2: {
          ts::cancellation_source old;
          {
            std::lock_guard lock(source_mutex);
            old = std::exchange(source, ts::cancellation_source{});
          }
          if (rng() % 2 == 0 && old.cancel()) any_token_cancelled.store(true, std::memory_order_relaxed);
          break;
        }
        default:
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
      }
    }
    pool->resume();  // a pool left paused would hold its jobs until stop()
  });

  // A budget, not a count: a slow machine does less, never times out.
  std::this_thread::sleep_for(500ms);
  stopping.store(true, std::memory_order_release);  // pairs with the producers' acquire
  // stop() while the producers still submit and the controller still
  // pauses and resizes.
  const ts::stop_report report = pool->stop(mode);
  done.store(true, std::memory_order_release);  // pairs with the loops' acquire
  for (auto& t : threads) t.join();

  ASSERT_EQ(unexpected.load(std::memory_order_relaxed), 0u) << [&] {
    std::string s;
    for (const auto& m : unexpected_messages) s += m + "; ";
    return s;
  }();

  // Every future is ready: its value or `cancelled`.
  std::uint64_t cancelled_futures = 0;
  for (auto& list : futures) {
    for (auto& sf : list) {
      ASSERT_EQ(sf.f.wait_for(0s), std::future_status::ready)
          << "a future of an accepted job is not ready after stop(): job " << sf.id;
      try {
        EXPECT_EQ(sf.f.get(), sf.id);
      } catch (const ts::error_exception& e) {
        EXPECT_EQ(e.code(), ts::error_code::cancelled) << e.what();
        EXPECT_EQ(ledger.runs[sf.id].load(std::memory_order_relaxed), 0) << "a job that ran gave `cancelled`";
        ++cancelled_futures;
      }
    }
  }
  futures.clear();
  for (auto& list : cancelled_timers) {
    for (auto& [handle, id] : list) {
      EXPECT_EQ(ledger.runs[id].load(std::memory_order_relaxed), 0) << "a timer ran after cancel() returned true";
    }
  }
  cancelled_timers.clear();
  pool.reset();  // the pool's queues and timers are gone: every probe is destroyed

  const std::uint32_t ids = ledger.next.load(std::memory_order_relaxed);
  std::uint64_t runs = 0;
  std::uint64_t accepted_jobs = 0;
  std::uint64_t accepted_unrun = 0;
  std::uint64_t tokenless_unrun = 0;  // accepted, no token, not run
  for (std::uint32_t id = 0; id < ids; ++id) {
    const unsigned r = ledger.runs[id].load(std::memory_order_relaxed);
    const unsigned d = ledger.destroyed[id].load(std::memory_order_relaxed);
    runs += r;
    ASSERT_LE(r, 1u) << "job " << id << " ran " << r << " times";
    ASSERT_EQ(d, 1u) << "job " << id << "'s function object was destroyed " << d << " times";
    if (accepted[id] != 0) {
      ++accepted_jobs;
      if (r == 0) ++accepted_unrun;
      if (r == 0 && with_token[id] == 0) ++tokenless_unrun;
    }
    // Timers are not in `accepted` (their runs are checked above); a
    // refused single job or batch never runs.
  }
  EXPECT_EQ(report.accepted, report.executed + report.cancelled);
  EXPECT_EQ(report.executed, runs) << "the report's executed differs from the runs the jobs saw";
  EXPECT_EQ(report.failed, ledger.throwing_runs.load(std::memory_order_relaxed));
  EXPECT_EQ(ledger.handler_calls.load(std::memory_order_relaxed), ledger.throwing_runs.load(std::memory_order_relaxed));
  EXPECT_GE(report.accepted, accepted_jobs);
  EXPECT_LE(accepted_unrun, report.cancelled);
  EXPECT_LE(cancelled_futures, accepted_unrun);
  // stop(drain) runs every accepted job but those a token or drop_oldest
  // discarded.
  if (mode == ts::stop_mode::drain && policy != admission::drop_oldest) {
    EXPECT_EQ(tokenless_unrun, 0u) << "stop(drain) lost accepted jobs";
    if (!any_token_cancelled.load(std::memory_order_relaxed)) {
      EXPECT_EQ(accepted_unrun, 0u);
    }
  }
  EXPECT_GT(accepted_jobs, 0u);
}

class HostileSoak : public testing::TestWithParam<std::tuple<admission, ts::stop_mode>> {};

TEST_P(HostileSoak, EveryAcceptedJobIsAccountedForAndNoRefusedJobRuns) {
  soak<ts::thread_pool>(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

// The typed pool: jobs of random types on universal workers (it has no
// bounded injector: its bound is backpressure).
class TypedHostileSoak : public testing::TestWithParam<std::tuple<admission, ts::stop_mode>> {};

TEST_P(TypedHostileSoak, EveryAcceptedJobIsAccountedForAndNoRefusedJobRuns) {
  soak<typed_pool>(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

std::string soak_name(const testing::TestParamInfo<std::tuple<admission, ts::stop_mode>>& param_info) {
  return std::string(name_of(std::get<0>(param_info.param))) +
         (std::get<1>(param_info.param) == ts::stop_mode::drain ? "_drain" : "_cancel_pending");
}

const auto stop_modes = testing::Values(ts::stop_mode::drain, ts::stop_mode::cancel_pending);

INSTANTIATE_TEST_SUITE_P(AllPolicies, HostileSoak,
                         testing::Combine(testing::Values(admission::none, admission::reject, admission::block,
                                                          admission::block_for, admission::caller_runs,
                                                          admission::drop_oldest, admission::bounded_injector),
                                          stop_modes),
                         soak_name);

INSTANTIATE_TEST_SUITE_P(AllPolicies, TypedHostileSoak,
                         testing::Combine(testing::Values(admission::none, admission::reject, admission::block,
                                                          admission::block_for, admission::caller_runs,
                                                          admission::drop_oldest),
                                          stop_modes),
                         soak_name);

}  // namespace
