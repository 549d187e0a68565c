// queues/queue_concept.hpp: every queue models job_queue_model, and the
// segmented mutex queues show the behaviour of the model (queue_model_suite.hpp;
// the other families are in queue_concept_<family>_test.cpp).
#include <gtest/gtest.h>

#include "queue_model_suite.hpp"

static_assert(ts::job_queue_model<ts::job_queue>);
static_assert(ts::job_queue_model<ts::two_lock_job_queue>);
static_assert(ts::job_queue_model<ts::bounded_queue>);
static_assert(ts::job_queue_model<ts::lockfree_queue>);
static_assert(ts::job_queue_model<ts::sharded_queue>);
static_assert(ts::job_queue_model<ts::adaptive_job_queue>);

namespace {

using mutex_queues = ::testing::Types<ts::job_queue, ts::two_lock_job_queue>;
INSTANTIATE_TYPED_TEST_SUITE_P(Mutex, QueueModel, mutex_queues, queue_names);

}  // namespace
