#include "thread_system/core/error.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <variant>

namespace ts = thread_system;

namespace {

ts::result<int> parse_positive(int v) {
  if (v <= 0) return ts::make_error(ts::error_code::invalid_argument, "not positive: " + std::to_string(v));
  return v;
}

}  // namespace

TEST(Result, HoldsValue) {
  auto r = parse_positive(7);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(r.value(), 7);
  EXPECT_EQ(r.value_or(3), 7);
}

TEST(Result, HoldsErrorWithCodeAndMessage) {
  auto r = parse_positive(-2);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  EXPECT_EQ(r.error().message(), "not positive: -2");
  EXPECT_EQ(r.error().to_string(), "invalid_argument: not positive: -2");
  EXPECT_EQ(r.value_or(3), 3);
}

// error() on an rvalue hands the error over to be moved from: passing a
// refusal on (unexpected_error{std::move(r).error()}) copies no message.
TEST(Result, AnRvalueResultsErrorIsMovedOut) {
  auto r = parse_positive(-12345678);
  const std::string text = r.error().message();
  const char* buffer = r.error().message().data();  // long enough to live on the heap
  ts::result<void> passed = ts::unexpected_error{std::move(r).error()};
  ASSERT_FALSE(passed);
  EXPECT_EQ(passed.error().code(), ts::error_code::invalid_argument);
  EXPECT_EQ(passed.error().message(), text);
  EXPECT_EQ(passed.error().message().data(), buffer) << "the message was copied, not moved";
  ts::result<void> v = ts::make_error(ts::error_code::timeout, "a void result's error, long enough for the heap");
  const char* v_buffer = v.error().message().data();
  ts::result<int> passed_int = ts::unexpected_error{std::move(v).error()};
  ASSERT_FALSE(passed_int);
  EXPECT_EQ(passed_int.error().code(), ts::error_code::timeout);
  EXPECT_EQ(passed_int.error().message().data(), v_buffer);
}

TEST(Result, ValueOnErrorThrowsErrorException) {
  auto r = parse_positive(0);
  try {
    (void)r.value();
    FAIL() << "value() on an error must throw";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("not positive"), std::string::npos);
  }
}

TEST(Result, VoidResult) {
  ts::result<void> ok;
  EXPECT_TRUE(ok.has_value());
  EXPECT_NO_THROW(ok.value());
  ts::result_void bad = ts::make_error(ts::error_code::timeout, "slow");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ts::error_code::timeout);
  EXPECT_THROW(bad.value(), ts::error_exception);
}

TEST(Result, VoidResultCopiesMovesAndReassigns) {
  // A message longer than any small-string buffer, so copies and moves
  // really own heap memory (the sanitizer builds check it is freed once).
  const std::string message(200, 'x');
  ts::result<void> bad = ts::make_error(ts::error_code::queue_full, message);
  ts::result<void> copy = bad;
  ASSERT_FALSE(copy.has_value());
  EXPECT_EQ(copy.error().code(), ts::error_code::queue_full);
  EXPECT_EQ(copy.error().message(), message);
  ts::result<void> moved = std::move(copy);
  ASSERT_FALSE(moved.has_value());
  EXPECT_EQ(moved.error().message(), message);
  moved = ts::result<void>{};  // a success replaces the error
  EXPECT_TRUE(moved.has_value());
  EXPECT_NO_THROW(moved.value());
  moved = bad;  // and an error replaces a success
  ASSERT_FALSE(moved.has_value());
  EXPECT_EQ(moved.error().code(), ts::error_code::queue_full);
  EXPECT_EQ(bad.error().message(), message);  // the source is unchanged by the copy
}

TEST(Result, MoveOnlyValue) {
  ts::result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r);
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

TEST(ErrorCode, EveryCodeHasAName) {
  for (int c = 0; c <= 10; ++c) {
    EXPECT_NE(ts::to_string(static_cast<ts::error_code>(c)), "unknown") << c;
  }
  EXPECT_EQ(ts::to_string(ts::error_code::pool_stopped), "pool_stopped");
  EXPECT_EQ(ts::to_string(ts::error_code::queue_full), "queue_full");
  EXPECT_EQ(ts::to_string(ts::error_code::cancelled), "cancelled");
  EXPECT_EQ(ts::to_string(ts::error_code::job_failed), "job_failed");
}

namespace {
// A value whose copy and move throw while `fail` is set.
struct fragile {
  static inline bool fail = false;
  int value = 0;
  fragile() = default;
  explicit fragile(int v) : value(v) {}
  fragile(const fragile& o) : value(o.value) {
    if (fail) throw std::runtime_error("copy");
  }
  fragile(fragile&& o) : value(o.value) {  // NOLINT(performance-noexcept-move-constructor): throws by design
    if (fail) throw std::runtime_error("move");
  }
  fragile& operator=(const fragile&) = default;
  fragile& operator=(fragile&&) = default;  // NOLINT(performance-noexcept-move-constructor)
  ~fragile() = default;
};
}  // namespace

// An assignment whose new value cannot be copied or moved in leaves the old
// content: a result is always a value or an error. (std::variant's
// assignment left it valueless: neither, has_value() false and error()
// throwing bad_variant_access.)
TEST(Result, AnAssignmentThatThrowsLeavesTheOldContent) {
  ts::result<fragile> holds_value{fragile{7}};
  ts::result<fragile> holds_error = ts::make_error(ts::error_code::timeout, "late");
  fragile::fail = true;
  EXPECT_THROW(holds_error = holds_value, std::runtime_error);
  EXPECT_THROW(holds_error = std::move(holds_value), std::runtime_error);
  fragile::fail = false;
  ASSERT_FALSE(holds_error.has_value());
  EXPECT_EQ(holds_error.error().code(), ts::error_code::timeout);
  EXPECT_EQ(holds_error.error().message(), "late");
  ASSERT_TRUE(holds_value.has_value());
  // And the other directions still work.
  holds_error = holds_value;
  ASSERT_TRUE(holds_error.has_value());
  EXPECT_EQ(holds_error->value, 7);
  holds_value = ts::make_error(ts::error_code::not_found, "gone");
  ASSERT_FALSE(holds_value.has_value());
  EXPECT_EQ(holds_value.error().code(), ts::error_code::not_found);
  EXPECT_THROW((void)holds_error.error(), std::bad_variant_access);  // a value: error() throws, as documented
}
