// The queue model (queue_model_suite.hpp) over the lock-free queues.
#include <gtest/gtest.h>

#include "queue_model_suite.hpp"

namespace {

using lockfree_queues = ::testing::Types<ts::bounded_queue, ts::lockfree_queue>;
INSTANTIATE_TYPED_TEST_SUITE_P(LockFree, QueueModel, lockfree_queues, queue_names);

}  // namespace
