// Shared check for bounded queues: exactly `capacity` pushes succeed, the
// next is refused with queue_full without moving from the caller's job, and
// one pop makes room for exactly one more.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <utility>

#include "thread_system/core/job_function.hpp"

namespace thread_system::test {

/// Fills `queue` to `capacity` with jobs from `make_job()`, then checks the
/// boundary. Leaves the queue full.
template <typename Queue, typename MakeJob>
void expect_full_exactly_at(Queue& queue, std::size_t capacity, MakeJob make_job) {
  for (std::size_t i = 0; i < capacity; ++i) ASSERT_TRUE(queue.try_push(make_job())) << "push " << i;
  EXPECT_EQ(queue.size_approx(), capacity);
  job_function extra = make_job();
  auto full = queue.try_push(std::move(extra));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code(), error_code::queue_full);
  EXPECT_TRUE(extra);  // NOLINT(bugprone-use-after-move): a refused job is not moved from
  job_function job;
  ASSERT_TRUE(queue.try_pop(job));
  job();
  ASSERT_TRUE(queue.try_push(std::move(extra))) << "one pop makes room for one push";
}

}  // namespace thread_system::test
