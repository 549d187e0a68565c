// The queue model (queue_model_suite.hpp) over the sharded queue, unbounded and
// bounded.
#include <gtest/gtest.h>

#include "queue_model_suite.hpp"

namespace {

using sharded_queues = ::testing::Types<ts::sharded_queue, bounded_sharded_queue>;
INSTANTIATE_TYPED_TEST_SUITE_P(Sharded, QueueModel, sharded_queues, queue_names);

}  // namespace
