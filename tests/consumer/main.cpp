// A program that uses Thread System the way a user would. Built by the
// consumer tests (tests/consumer/consumer_tests.cmake) against the installed
// CMake package, against the pkg-config files, as a subproject of an outer
// CMake project, and against the Debian packages (scripts/check-packages.sh).
// CONSUMER_HAS_MONITORING / CONSUMER_HAS_LOGGER switch on one use of each
// optional component. Exits non-zero if anything is off.
#include <thread_system/thread_system.hpp>

#if defined(CONSUMER_HAS_MONITORING)
#include <thread_system/monitoring/monitoring.hpp>
#endif
#if defined(CONSUMER_HAS_LOGGER)
#include <thread_system/logger/logger.hpp>
#include <thread_system/logger/sinks/null_sink.hpp>

#include <memory>
#endif

#include <atomic>
#include <cstdio>
#include <string>

int main() {
  thread_system::thread_pool pool{2};
  std::atomic<int> sum{0};
  for (int i = 1; i <= 100; ++i) {
    if (!pool.enqueue([&sum, i] { sum.fetch_add(i, std::memory_order_relaxed); })) return 1;
  }
  auto answer = pool.submit([](int x) { return x * 2; }, 21);
  pool.wait_idle();  // every job above finished: the relaxed loads below see all adds
  const int got = answer.get();

  thread_system::typed_thread_pool typed{1};
  auto typed_answer = typed.submit(thread_system::job_types::RealTime, [] { return 7; });
  const int typed_got = typed_answer.get();

  bool exported = true;
#if defined(CONSUMER_HAS_MONITORING)
  thread_system::monitoring::pool_monitor monitor{pool};
  const std::string text = thread_system::monitoring::to_prometheus(monitor.sample());
  exported = text.find("# TYPE thread_system_pool_jobs_executed_total counter") != std::string::npos;
#endif

  bool logged = true;
#if defined(CONSUMER_HAS_LOGGER)
  {
    auto sink = std::make_shared<thread_system::null_sink>();
    thread_system::logger log{{sink}};
    log.info("consumer: sum so far {}", sum.load(std::memory_order_relaxed));
    logged = log.flush().has_value() && sink->records() == 1;  // flush(): the record reached the sink
  }
#endif

  std::printf("consumer: sum=%d answer=%d typed=%d exported=%d logged=%d\n", sum.load(std::memory_order_relaxed), got,
              typed_got, exported ? 1 : 0, logged ? 1 : 0);
  return (sum.load(std::memory_order_relaxed) == 5050 && got == 42 && typed_got == 7 && exported && logged) ? 0 : 1;
}
