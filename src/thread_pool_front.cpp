// thread_pool's own members: its constructors (each builds the core with the
// injector its options name) and its timer queue's target. The seed-style
// job and worker overloads are in seed_adapters.cpp; everything both pools
// share is in pool_front.cpp.
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"

#include "pool_core.hpp"
#include "thread_system/detail/thread_attributes.hpp"

#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace thread_system {

namespace {

void validate(const pool_options& o) {
  if (!is_known(o.queue)) throw error_exception(detail::unknown_queue_kind("thread_pool", o.queue).value);
  // Two bounds with two answers to "full" (the policy's, and the ring's
  // immediate queue_full) would make the policy a lie.
  if (o.queue == pool_queue::bounded && o.backpressure.capacity != 0) {
    // make_error(code, literal): the error even when its message cannot be allocated.
    throw error_exception(make_error(error_code::invalid_argument,
                                     "pool_queue::bounded is a bound of its own: use backpressure with another queue "
                                     "kind, or the bounded queue without backpressure")
                              .value);
  }
}

detail::core_config config_of(std::string name, const pool_options& options) {
  validate(options);
  try {
    return detail::core_config_of(options, std::move(name),
                                  detail::make_injector(options.queue, options.initial_queue_capacity));
  } catch (const std::bad_alloc&) {
    throw error_exception(detail::out_of_memory_error().value);
  }
}

// The same, named as `options` says: the name is copied here, where out of
// memory is resource_exhausted.
detail::core_config config_of(const pool_options& options) {
  std::string name;
  try {
    name = options.name;
  } catch (const std::bad_alloc&) {
    throw error_exception(detail::out_of_memory_error().value);
  }
  return config_of(std::move(name), options);
}

}  // namespace

thread_pool::thread_pool(std::string name) : thread_pool(std::move(name), pool_options{}) {}

thread_pool::thread_pool(std::string name, const pool_options& options)
    : pool_front(config_of(std::move(name), options)), queue_kind_(options.queue) {}

thread_pool::thread_pool(std::size_t worker_count, const pool_options& options)
    : pool_front(config_of(options)), queue_kind_(options.queue) {
  if (worker_count == 0) {
    throw error_exception(
        make_error(error_code::invalid_argument, "thread_pool: worker_count must be at least 1").value);
  }
  if (worker_count > max_workers)
    throw error_exception(detail::too_many_workers("thread_pool", get_name(), worker_count).value);
  try {
    std::vector<std::unique_ptr<thread_worker>> workers;
    workers.reserve(worker_count);
    for (std::size_t i = 0; i < worker_count; ++i) workers.push_back(std::make_unique<thread_worker>());
    if (auto r = add_workers(std::move(workers)); !r) throw error_exception(r.error());
  } catch (const std::bad_alloc&) {
    throw error_exception(detail::out_of_memory_error().value);
  }
  // All or none: when start() fails no thread is running, so throwing here
  // leaves nothing behind.
  if (auto r = start(); !r) throw error_exception(r.error());
}

// Stops here, while the whole pool exists: the timers' target (timers()
// below) calls into this object as the timers drain, and so does a spawned
// task's failure report until retire_spawn_key() returns.
thread_pool::~thread_pool() {
  stop_for_destructor();  // its retire_spawn_key(): a spawned task failing elsewhere may still push here until then
}

std::size_t thread_pool::default_worker_count() noexcept {
  const unsigned n = detail::hardware_threads();
  if (n == 0) return 1;
  return n < max_workers ? n : max_workers;
}

result<timer_handle> thread_pool::add_timer(detail::built_timer&& timer) {
  return pool_front::add_timer([this](job_function&& f, timer_route) { return push_one(std::move(f)); },
                               std::move(timer));
}

}  // namespace thread_system
