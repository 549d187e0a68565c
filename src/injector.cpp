// make_injector(): the injector of each kind (the classes are in
// src/injectors.hpp, a private header).
#include "thread_system/scheduler/injector.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>

#include "injectors.hpp"
#include "thread_system/detail/thread_attributes.hpp"

namespace thread_system::detail {

std::unique_ptr<injector> make_injector(pool_queue kind, std::size_t initial_capacity) {
  switch (kind) {
    case pool_queue::lockfree:
      return std::make_unique<lockfree_injector>();
    case pool_queue::adaptive:
      return std::make_unique<adaptive_injector>();
    case pool_queue::sharded: {
      // One shard per hardware thread, as the queue's default, without its
      // per-construction lookup (hardware_threads()).
      sharded_queue_options options;
      options.shards = std::max<std::size_t>(1, hardware_threads());
      return std::make_unique<counting_injector<sharded_queue>>(options);
    }
    case pool_queue::bounded:
      return std::make_unique<counting_injector<bounded_queue>>(initial_capacity);
    case pool_queue::mutex:
      break;
  }
  return std::make_unique<mutex_injector>(initial_capacity);
}

}  // namespace thread_system::detail
