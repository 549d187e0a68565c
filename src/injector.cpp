// make_injector(): the injector of each kind (the classes are in
// src/injectors.hpp, a private header).
#include "thread_system/scheduler/injector.hpp"

#include <memory>

#include "injectors.hpp"

namespace thread_system::detail {

std::unique_ptr<injector> make_injector(pool_queue kind, std::size_t initial_capacity) {
  switch (kind) {
    case pool_queue::lockfree:
      return std::make_unique<lockfree_injector>();
    case pool_queue::adaptive:
      return std::make_unique<adaptive_injector>();
    case pool_queue::sharded:
      return std::make_unique<counting_injector<sharded_queue>>();
    case pool_queue::bounded:
      return std::make_unique<counting_injector<bounded_queue>>(initial_capacity);
    case pool_queue::mutex:
      break;
  }
  return std::make_unique<mutex_injector>(initial_capacity);
}

}  // namespace thread_system::detail
