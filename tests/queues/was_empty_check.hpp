// The check both segmented mutex queues (job_queue, two_lock_job_queue)
// share: try_push(job, was_empty) reports exactly whether the queue was
// empty - the pool wakes a worker only then - including across segments,
// after a drain, for refused pushes and after close().
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"

namespace thread_system::test {

template <typename Queue>
void expect_push_reports_whether_the_queue_was_empty() {
  Queue queue{2};
  bool was_empty = false;
  ASSERT_TRUE(queue.try_push(job_function([] {}), was_empty));
  EXPECT_TRUE(was_empty);
  for (int i = 0; i < 50; ++i) {  // 64-word segments: also across segments
    ASSERT_TRUE(queue.try_push(job_function([] {}), was_empty));
    EXPECT_FALSE(was_empty) << "push " << i;
  }
  job_function out;
  while (queue.try_pop(out)) {
  }
  ASSERT_TRUE(queue.try_push(job_function([] {}), was_empty));
  EXPECT_TRUE(was_empty);
  job_function empty;
  was_empty = false;
  auto refused = queue.try_push(std::move(empty), was_empty);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), error_code::invalid_argument);
  EXPECT_FALSE(was_empty) << "a refused push reports nothing";
  queue.close();
  auto closed = queue.try_push(job_function([] {}), was_empty);
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code(), error_code::pool_stopped);
  EXPECT_TRUE(queue.try_pop(out)) << "what was queued stays poppable after close()";
  EXPECT_FALSE(queue.try_pop(out));
  EXPECT_EQ(queue.accepted_pushes(), 52U);
}

}  // namespace thread_system::test
