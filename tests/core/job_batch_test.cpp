// core/job_batch.hpp: the callable_range concept and the conversion both
// pools' enqueue_batch(range) use.
#include "thread_system/core/job_batch.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <forward_list>
#include <functional>
#include <list>
#include <memory>
#include <new>
#include <ranges>
#include <string>
#include <vector>

namespace ts = thread_system;

namespace {
struct move_only_job {
  std::unique_ptr<int> value = std::make_unique<int>(7);
  void operator()() const {}
};
}  // namespace

static_assert(ts::callable_range<std::vector<std::function<void()>>>);
static_assert(ts::callable_range<std::array<void (*)(), 3>&>);
static_assert(ts::callable_range<std::forward_list<std::function<void()>>>);
static_assert(!ts::sized_callable_range<std::forward_list<std::function<void()>>>);
static_assert(ts::sized_callable_range<std::list<std::function<void()>>>);
static_assert(!ts::callable_range<std::vector<int>>);                       // elements are not callables
static_assert(!ts::callable_range<int>);                                    // not a range
static_assert(!ts::callable_range<std::vector<std::function<void(int)>>>);  // callables that need an argument

// The batch fill_job_batch() makes of `r`.
template <typename R>
std::vector<ts::job_function> to_batch(R&& r) {
  std::vector<ts::job_function> batch;
  ts::detail::fill_job_batch(std::forward<R>(r), batch);
  return batch;
}

TEST(JobBatch, CopiesFromAnLvalueRangeInOrder) {
  std::string trace;
  std::vector<std::function<void()>> jobs;
  for (char c : std::string("abc")) jobs.emplace_back([&trace, c] { trace += c; });
  auto batch = to_batch(jobs);
  ASSERT_EQ(batch.size(), 3U);
  for (auto& fn : batch) fn();
  EXPECT_EQ(trace, "abc");
  for (auto& j : jobs) EXPECT_TRUE(static_cast<bool>(j));  // the source keeps its callables
}

TEST(JobBatch, MovesFromAnRvalueRange) {
  std::vector<move_only_job> jobs(3);
  auto batch = to_batch(std::move(jobs));
  ASSERT_EQ(batch.size(), 3U);
  for (auto& j : jobs) EXPECT_EQ(j.value, nullptr);  // NOLINT(bugprone-use-after-move): moved out, element by element
  for (auto& fn : batch) EXPECT_TRUE(static_cast<bool>(fn));
}

TEST(JobBatch, AnUnsizedRangeAndAnEmptyCallableConvert) {
  std::forward_list<std::function<void()>> jobs{[] {}, nullptr};
  auto batch = to_batch(jobs);
  ASSERT_EQ(batch.size(), 2U);
  EXPECT_TRUE(static_cast<bool>(batch[0]));
  EXPECT_FALSE(static_cast<bool>(batch[1]));  // the pools refuse this one with invalid_argument
}

// A view onto the caller's elements is copied from, even as an rvalue: the
// batch does not own them. (An rvalue view was moved from: the caller's
// std::functions were emptied, and a second batch of them was refused.)
TEST(JobBatch, AViewOfTheCallersContainerIsCopiedFrom) {
  int runs = 0;
  std::vector<std::function<void()>> jobs(3, [&runs] { ++runs; });
  auto first_two = to_batch(jobs | std::views::take(2));
  auto all = to_batch(std::views::all(jobs));
  ASSERT_EQ(first_two.size(), 2U);
  ASSERT_EQ(all.size(), 3U);
  for (auto& j : jobs) EXPECT_TRUE(static_cast<bool>(j));  // the caller's callables are still there
  for (auto& fn : first_two) fn();
  for (auto& fn : all) fn();
  EXPECT_EQ(runs, 5);
  // Temporaries (a transform view) and an owning rvalue are still moved from.
  static_assert(ts::detail::moves_elements_v<decltype(jobs | std::views::transform([](auto& f) { return f; }))>);
  static_assert(ts::detail::moves_elements_v<std::vector<std::function<void()>>>);
  static_assert(!ts::detail::moves_elements_v<std::vector<std::function<void()>>&>);
  static_assert(!ts::detail::moves_elements_v<decltype(std::views::all(jobs))>);
}

// A sized range longer than a vector can hold is std::bad_alloc (which the
// pools turn into resource_exhausted), not std::length_error (which escaped
// them).
TEST(JobBatch, ASizeBeyondAVectorsLimitIsBadAlloc) {
  auto huge = std::views::iota(std::uint64_t{0}, std::uint64_t{1} << 62) |
              std::views::transform([](std::uint64_t) { return [] {}; });
  EXPECT_THROW((void)to_batch(huge), std::bad_alloc);
}
