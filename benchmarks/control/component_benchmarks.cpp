// The guides' "Component Overhead" table: one operation of each small
// component, on one thread, nothing contended. The table's other rows come
// from other binaries (pool creation: the report's create/; enqueue:
// BM_ExternalSubmit; queue operations: the queue benchmarks' latency_*; token
// check and registration: BM_TokenIsCancelled and BM_RegisterUnregister in
// control_benchmarks.cpp; the logger call: logger_latency/).
//   * BM_ThreadBaseStartStop: a thread_base's start() + stop(): its OS thread
//     created, run once, joined.
//   * BM_WakeIntervalRead / BM_WakeIntervalWrite: get_wake_interval() /
//     set_wake_interval() (under the object's mutex).
//   * BM_SpinLockScoped: std::scoped_lock on an uncontended spin_lock;
//     BM_MutexScoped: the same on a std::mutex, for reference.
//   * BM_ServiceResolve: service_registry::resolve<I>() of a registered
//     instance (shared lock, lookup, shared_ptr copy); BM_ServiceResolveChild:
//     the same through a child registry that does not hold it.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "thread_system/core/thread_base.hpp"
#include "thread_system/services/service_registry.hpp"
#include "thread_system/sync/spin_lock.hpp"

namespace ts = thread_system;

namespace {

class idle_thread final : public ts::thread_base {
 public:
  idle_thread() : thread_base("bench_idle") {}
  ~idle_thread() override { (void)stop(); }
  idle_thread(const idle_thread&) = delete;
  idle_thread& operator=(const idle_thread&) = delete;
};

void BM_ThreadBaseStartStop(benchmark::State& state) {
  idle_thread t;
  for (auto _ : state) {
    if (!t.start() || !t.stop()) {
      state.SkipWithError("start() or stop() failed");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_ThreadBaseStartStop)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_WakeIntervalRead(benchmark::State& state) {
  idle_thread t;
  t.set_wake_interval(std::chrono::milliseconds(100));
  for (auto _ : state) benchmark::DoNotOptimize(t.get_wake_interval());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_WakeIntervalRead);

void BM_WakeIntervalWrite(benchmark::State& state) {
  idle_thread t;
  std::int64_t ms = 0;
  for (auto _ : state) t.set_wake_interval(std::chrono::milliseconds(++ms & 0xff));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_WakeIntervalWrite);

template <typename Lock>
void scoped_lock_loop(benchmark::State& state) {
  Lock lock;
  std::uint64_t n = 0;
  for (auto _ : state) {
    std::scoped_lock guard(lock);
    benchmark::DoNotOptimize(++n);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
void BM_SpinLockScoped(benchmark::State& state) { scoped_lock_loop<ts::spin_lock>(state); }
void BM_MutexScoped(benchmark::State& state) { scoped_lock_loop<std::mutex>(state); }
BENCHMARK(BM_SpinLockScoped);
BENCHMARK(BM_MutexScoped);

struct clock_service {
  virtual ~clock_service() = default;
  [[nodiscard]] virtual std::int64_t now() const = 0;
};
struct fixed_clock final : clock_service {
  [[nodiscard]] std::int64_t now() const override { return 42; }
};

void resolve_loop(benchmark::State& state, ts::service_registry& reg) {
  for (auto _ : state) {
    auto c = reg.resolve<clock_service>();
    if (!c) {
      state.SkipWithError("resolve failed");
      break;
    }
    benchmark::DoNotOptimize((*c)->now());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void BM_ServiceResolve(benchmark::State& state) {
  ts::service_registry reg;
  if (!reg.register_instance<clock_service>(std::make_shared<fixed_clock>())) {
    state.SkipWithError("register failed");
    return;
  }
  resolve_loop(state, reg);
}
BENCHMARK(BM_ServiceResolve);

void BM_ServiceResolveChild(benchmark::State& state) {
  ts::service_registry parent;
  if (!parent.register_instance<clock_service>(std::make_shared<fixed_clock>())) {
    state.SkipWithError("register failed");
    return;
  }
  ts::service_registry child{&parent};
  resolve_loop(state, child);
}
BENCHMARK(BM_ServiceResolveChild);

}  // namespace
