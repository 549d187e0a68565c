// Built against the installed package; exits non-zero if anything is off.
#include <thread_system/thread_system.hpp>

#if defined(CONSUMER_HAS_MONITORING)
#include <thread_system/monitoring/monitoring.hpp>
#endif

#include <atomic>
#include <cstdio>

int main() {
  thread_system::thread_pool pool{2};
  std::atomic<int> sum{0};
  for (int i = 1; i <= 100; ++i) {
    if (!pool.enqueue([&sum, i] { sum.fetch_add(i, std::memory_order_relaxed); })) return 1;
  }
  auto answer = pool.submit([](int x) { return x * 2; }, 21);
  pool.wait_idle();
  const int got = answer.get();

  thread_system::typed_thread_pool typed{1};
  auto typed_answer = typed.submit(thread_system::job_types::RealTime, [] { return 7; });
  const int typed_got = typed_answer.get();

  bool exported = true;
#if defined(CONSUMER_HAS_MONITORING)
  thread_system::monitoring::pool_monitor monitor{pool};
  const std::string text = thread_system::monitoring::to_prometheus(monitor.sample());
  exported = text.find("# TYPE") != std::string::npos;
#endif
  std::printf("consumer: sum=%d answer=%d typed=%d exported=%d\n", sum.load(std::memory_order_relaxed), got, typed_got,
              exported ? 1 : 0);
  return (sum.load(std::memory_order_relaxed) == 5050 && got == 42 && typed_got == 7 && exported) ? 0 : 1;
}
