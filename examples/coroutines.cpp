// Coroutines on a pool: hop onto the workers, sleep without blocking a
// thread, fork-join with when_all, fire-and-forget with spawn. Built and run
// by the test suite (README.md shows it).
#include <thread_system/thread_system.hpp>

#include <chrono>
#include <cstdint>
#include <iostream>

using namespace thread_system;
using namespace std::chrono_literals;

task<std::uint64_t> fib(int n) {
  if (n < 2) co_return static_cast<std::uint64_t>(n);
  auto [a, b] = co_await when_all(fib(n - 1), fib(n - 2));  // the second child runs on another worker
  co_return a + b;
}

task<std::uint64_t> compute(thread_pool& pool) {
  co_await pool.schedule();                                  // from here on a worker of `pool`
  co_await pool.sleep_for(5ms);                              // the timer queue resumes us; no thread waits
  const int base = co_await pool.submit([] { return 20; });  // a future, awaited without blocking
  co_return co_await fib(base);
}

task<void> log_later(thread_pool& pool, int id, wait_group& finished) {
  co_await pool.sleep_for(1ms);
  (void)finished.done();
  if (id < 0) throw std::runtime_error("never");  // would reach the pool's error handler
}

int main() {
  thread_pool pool{4};
  const std::uint64_t v = sync_wait(compute(pool));  // blocks this thread only
  std::cout << "fib(20) = " << v << '\n';

  wait_group finished;
  for (int i = 0; i < 100; ++i) {
    (void)finished.add();
    if (auto r = spawn(pool, log_later(pool, i, finished)); !r) {
      std::cerr << "refused: " << r.error().to_string() << '\n';
      (void)finished.done();
    }
  }
  finished.wait();  // (a stop() now would abandon the tasks still asleep)
  const stop_report report = pool.stop(stop_mode::drain);
  std::cout << "accepted " << report.accepted << ", executed " << report.executed << ", cancelled " << report.cancelled
            << '\n';
  return v == 6765 && report.accepted == report.executed + report.cancelled ? 0 : 1;
}
