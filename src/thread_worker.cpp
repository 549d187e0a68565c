// thread_worker: the public handle's members (pools/thread_worker.hpp); the
// state they read and write is the core's pool_worker (src/pool_worker.hpp).
#include "thread_system/pools/thread_worker.hpp"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "pool_worker.hpp"

namespace thread_system {

thread_worker::thread_worker(std::string name) : state_(std::make_unique<detail::pool_worker>(std::move(name))) {}

thread_worker::~thread_worker() = default;

const std::string& thread_worker::get_name() const noexcept { return state_->name_; }

worker_statistics thread_worker::get_statistics() const noexcept { return state_->statistics(); }

result<void> thread_worker::set_injector_batch(std::size_t n) {
  if (n == 0 || n > max_injector_batch) {
    return make_error_nothrow(error_code::invalid_argument, [&] {
      return "thread_worker::set_injector_batch: " + std::to_string(n) + " is outside 1.." +
             std::to_string(max_injector_batch);
    });
  }
  // relaxed: a setting, read by the worker once per visit.
  state_->injector_batch_.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
  return {};
}

std::size_t thread_worker::injector_batch() const noexcept {
  return state_->injector_batch_.load(std::memory_order_relaxed);  // a setting, no data published with it
}

void thread_worker::set_batch_processing(bool enabled, std::size_t batch_size) noexcept {
  const std::size_t n = enabled ? std::clamp<std::size_t>(batch_size, 1, max_injector_batch) : 1;
  state_->injector_batch_.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);  // as set_injector_batch()
}

worker_latency thread_worker::latency() const noexcept {
  return {state_->wait_histogram_.snapshot(), state_->run_histogram_.snapshot()};
}

bool thread_worker::belongs_to_pool() const noexcept {
  return state_->owned_by_pool_.load(std::memory_order_acquire);  // pairs with the release in pool_core::adopt()
}

void thread_worker::set_responsibility_mask(std::uint64_t mask) noexcept { state_->responsibility_mask_ = mask; }

}  // namespace thread_system
