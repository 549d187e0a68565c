// The README's quick start, compiled and run in CI.
#include <thread_system/thread_system.hpp>

#include <atomic>
#include <iostream>
#include <string>

int main() {
  using namespace thread_system;

  thread_pool pool{4};  // four workers, started

  // Fire and forget: the result says whether the job was accepted.
  std::atomic<int> counter{0};
  for (int i = 0; i < 1000; ++i) {
    // seq_cst: pairs with the checking load(s)
    if (auto r = pool.enqueue([&counter] { counter.fetch_add(1, std::memory_order_seq_cst); }); !r) {
      std::cerr << "refused: " << r.error().to_string() << '\n';
      return 1;
    }
  }

  // A value back through a future; exceptions travel the same way.
  future<std::string> greeting = pool.submit([](std::string who) { return "hello, " + who; }, "pool");

  pool.wait_idle();
  // seq_cst: pairs with the writers' RMW/store
  std::cout << greeting.get() << " - ran " << counter.load(std::memory_order_seq_cst) << " jobs\n";

  const pool_statistics stats = pool.get_statistics();
  std::cout << "accepted " << stats.accepted << ", executed " << stats.executed << ", failed " << stats.failed << '\n';

  const stop_report report = pool.stop(stop_mode::drain);  // the destructor would do the same
  return report.accepted == report.executed ? 0 : 1;
}
