// The seed documents' style: a named pool, workers added explicitly,
// callback_job objects, per-worker statistics.
#include <thread_system/thread_system.hpp>

#include <iostream>
#include <memory>
#include <vector>

int main() {
  using namespace thread_system;

  auto pool = std::make_shared<thread_pool>("MyPool");

  std::vector<std::unique_ptr<thread_worker>> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(std::make_unique<thread_worker>());
  if (auto r = pool->enqueue_batch(std::move(workers)); !r) {
    std::cerr << r.error().to_string() << '\n';
    return 1;
  }
  if (auto r = pool->start(); !r) {
    std::cerr << r.error().to_string() << '\n';
    return 1;
  }

  std::vector<std::unique_ptr<job>> jobs;
  for (int i = 0; i < 1000; ++i) {
    jobs.push_back(std::make_unique<callback_job>([]() -> result_void {
      // Job work here
      return {};
    }));
  }
  if (auto r = pool->enqueue_batch(std::move(jobs)); !r) {
    std::cerr << r.error().to_string() << '\n';
    return 1;
  }
  pool->wait_idle();

  for (thread_worker* w : pool->get_workers()) {
    const auto stats = w->get_statistics();
    std::cout << "Jobs processed: " << stats.jobs_processed
              << ", average processing time: " << stats.avg_processing_time_ns << " ns\n";
  }
  const auto report = pool->stop();
  return report.executed == 1000 ? 0 : 1;
}
