// The queue model (queue_model_suite.hpp) over the adaptive queue (both mutex
// sides: job_queue and two_lock_job_queue), as it is and switching at every window.
#include <gtest/gtest.h>

#include "queue_model_suite.hpp"

namespace {

using adaptive_queues = ::testing::Types<ts::adaptive_job_queue, switching_adaptive_queue,
                                         ts::two_lock_adaptive_job_queue, switching_two_lock_adaptive_queue>;
INSTANTIATE_TYPED_TEST_SUITE_P(Adaptive, QueueModel, adaptive_queues, queue_names);

}  // namespace
