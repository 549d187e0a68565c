// pool_queue, the one enum that names a queue implementation, and its seed
// spelling queue_strategy (include/thread_system/queues/queue_kind.hpp).
#include "thread_system/queues/queue_kind.hpp"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

namespace ts = thread_system;

namespace {

static_assert(std::is_same_v<ts::queue_strategy, ts::pool_queue>, "one enum, two names");
static_assert(ts::pool_queue::ADAPTIVE == ts::pool_queue::adaptive);
static_assert(ts::pool_queue::FORCE_MUTEX == ts::pool_queue::mutex);
static_assert(ts::pool_queue::FORCE_LOCKFREE == ts::pool_queue::lockfree);

TEST(QueueKind, EveryKindHasItsName) {
  EXPECT_EQ(std::string(ts::to_string(ts::pool_queue::mutex)), "mutex");
  EXPECT_EQ(std::string(ts::to_string(ts::pool_queue::lockfree)), "lockfree");
  EXPECT_EQ(std::string(ts::to_string(ts::pool_queue::adaptive)), "adaptive");
  EXPECT_EQ(std::string(ts::to_string(ts::pool_queue::sharded)), "sharded");
  EXPECT_EQ(std::string(ts::to_string(ts::pool_queue::bounded)), "bounded");
}

TEST(QueueKind, TheSeedNamesPrintAsTheKindTheyAlias) {
  EXPECT_EQ(std::string(ts::to_string(ts::queue_strategy::ADAPTIVE)), "adaptive");
  EXPECT_EQ(std::string(ts::to_string(ts::queue_strategy::FORCE_MUTEX)), "mutex");
  EXPECT_EQ(std::string(ts::to_string(ts::queue_strategy::FORCE_LOCKFREE)), "lockfree");
}

TEST(QueueKind, AValueOutsideTheEnumIsUnknown) {
  const auto stray = static_cast<ts::pool_queue>(99);
  EXPECT_EQ(std::string(ts::to_string(stray)), "unknown");
  static_assert(ts::to_string(ts::pool_queue::sharded)[0] == 's', "usable in constant expressions");
}

}  // namespace
