// thread_pool's seed-style overloads, each an adapter onto the modern API: a
// seed job (compat/job.hpp) becomes the job_function job::to_job_function()
// makes of it and goes in as enqueue(job_function) would; a seed worker goes
// to pool_front::add_workers(), as resize() does.
#include "thread_system/compat/job.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"

#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace thread_system {

result<void> thread_pool::enqueue(std::unique_ptr<thread_worker> worker) {
  if (!worker) return make_error(error_code::invalid_argument, "thread_pool::enqueue: null worker");
  std::vector<std::unique_ptr<thread_worker>> one;
  try {
    one.push_back(std::move(worker));
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory_error();
  }
  return add_workers(std::move(one));
}

result<void> thread_pool::enqueue_batch(std::vector<std::unique_ptr<thread_worker>> workers) {
  return add_workers(std::move(workers));
}

result<void> thread_pool::enqueue(std::unique_ptr<job> j) {
  auto fn = job::to_job_function(std::move(j), "thread_pool::enqueue");
  if (!fn) return unexpected_error{std::move(fn).error()};  // moved: a copy could fail for memory
  return push_one(std::move(*fn));
}

result<void> thread_pool::enqueue_batch(std::vector<std::unique_ptr<job>> jobs) {
  std::vector<job_function> batch;
  try {
    batch.reserve(jobs.size());
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory_error();
  }
  // All or none: a refused entry returns before anything is pushed (the
  // batch, and every job in it, is dropped with `jobs`).
  for (auto& j : jobs) {
    auto fn = job::to_job_function(std::move(j), "thread_pool::enqueue_batch");
    if (!fn) return unexpected_error{std::move(fn).error()};  // moved: a copy could fail for memory
    batch.push_back(std::move(*fn));                          // reserved above: no allocation
  }
  return push_batch(batch);
}

}  // namespace thread_system
