#include "thread_system/core/job_function.hpp"

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <memory>
#include <string>

#include "../support/test_support.hpp"

namespace ts = thread_system;

TEST(JobFunction, EmptyByDefault) {
  ts::job_function f;
  EXPECT_FALSE(f);
  ts::job_function g = nullptr;
  EXPECT_FALSE(g);
}

TEST(JobFunction, NullCallablesGiveEmptyJobs) {
  void (*fp)() = nullptr;
  ts::job_function a(fp);
  EXPECT_FALSE(a);
  std::function<void()> empty;
  ts::job_function b(empty);
  EXPECT_FALSE(b);
}

// A job_function compares with nullptr as std::function does, and only a
// job_function does: a callable that merely converts to one (a std::bind of
// a member returning a job_function, a reference_wrapper) is not taken for
// a nullable one. (A friend taking `const job_function&` made those
// comparable through the conversion: the empty-callable check built a
// job_function from the callable, which checked it again - a stack
// overflow.)
namespace {
struct relay {
  ts::job_function held;
  ts::job_function take() { return std::move(held); }
};
}  // namespace

TEST(JobFunction, ComparesWithNullptrAndCallablesThatConvertToOneDoNot) {
  EXPECT_TRUE(ts::job_function{} == nullptr);
  EXPECT_TRUE(nullptr == ts::job_function{});
  EXPECT_TRUE(ts::job_function([] {}) != nullptr);
  relay r{ts::job_function([] {})};
  auto bound = std::bind(&relay::take, &r);
  static_assert(!ts::nullable_callable<decltype(bound)>);
  static_assert(!ts::nullable_callable<std::reference_wrapper<ts::job_function>>);
  ts::job_function wrapped(bound);  // recursed until the stack overflowed
  EXPECT_TRUE(wrapped);
}

// Running an empty job is a mistake reported with the library's error, not
// a null dereference (it crashed), as std::function throws bad_function_call.
TEST(JobFunction, RunningAnEmptyJobThrowsInvalidArgument) {
  ts::job_function empty;
  for (const bool call_operator : {false, true}) {
    try {
      if (call_operator) {
        empty();
      } else {
        (void)empty.run();
      }
      ADD_FAILURE() << "an empty job ran";
    } catch (const ts::error_exception& e) {
      EXPECT_EQ(e.code(), ts::error_code::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("empty job"), std::string::npos) << e.what();
    }
  }
  ts::job_function moved_from([] {});
  ts::job_function taker = std::move(moved_from);
  EXPECT_THROW(moved_from.run(), ts::error_exception);  // NOLINT(bugprone-use-after-move): empty by contract
}

TEST(JobFunction, RunsTheCallable) {
  int hits = 0;
  ts::job_function f([&hits] { ++hits; });
  ASSERT_TRUE(f);
  f();
  EXPECT_EQ(hits, 1);
  EXPECT_EQ(f.run(), ts::job_outcome::succeeded);
  EXPECT_EQ(hits, 2);
}

TEST(JobFunction, InlineCapacityIsAtLeast48Bytes) {
  struct big48 {
    std::array<char, 48> bytes{};
    void operator()() const {}
  };
  struct big56 {
    std::array<char, 56> bytes{};
    void operator()() const {}
  };
  struct big64 {
    std::array<char, 64> bytes{};
    void operator()() const {}
  };
  static_assert(ts::job_function::stored_inline<big48>);
  static_assert(!ts::job_function::stored_inline<big56>);  // the last word holds the metadata
  static_assert(!ts::job_function::stored_inline<big64>);
  EXPECT_EQ(ts::job_function::inline_capacity, 48U);
}

TEST(JobFunction, MetadataTravelsWithTheCallableAndResetClearsIt) {
  int hits = 0;
  ts::job_function f([&hits] { ++hits; });
  EXPECT_EQ(f.enqueue_stamp(), 0U);
  EXPECT_EQ(f.tag(), 0U);
  f.set_enqueue_stamp(123456789);
  f.set_tag(7);
  EXPECT_EQ(f.enqueue_stamp(), 123456789U);
  EXPECT_EQ(f.tag(), 7U);
  f.set_enqueue_stamp(ts::job_function::max_stamp + 10);  // clamped, tag untouched
  EXPECT_EQ(f.enqueue_stamp(), ts::job_function::max_stamp);
  EXPECT_EQ(f.tag(), 7U);
  f.set_enqueue_stamp(42);

  ts::job_function g(std::move(f));
  EXPECT_EQ(g.enqueue_stamp(), 42U);
  EXPECT_EQ(g.tag(), 7U);
  EXPECT_EQ(f.enqueue_stamp(), 0U);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(f.tag(), 0U);            // NOLINT(bugprone-use-after-move)

  ts::job_function h;
  h = std::move(g);
  EXPECT_EQ(h.enqueue_stamp(), 42U);
  EXPECT_EQ(h.tag(), 7U);
  h();
  EXPECT_EQ(hits, 1);
  h.reset();
  EXPECT_EQ(h.enqueue_stamp(), 0U);
  EXPECT_EQ(h.tag(), 0U);
}

TEST(JobFunction, MoveTransfersOwnershipAndDestroysOnce) {
  ts::test::lifetime_tracker t;
  {
    ts::job_function a{ts::test::counting_functor(t)};
    ts::job_function b(std::move(a));
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from state is specified
    ASSERT_TRUE(b);
    ts::job_function c;
    c = std::move(b);
    c();
    // seq_cst: relaxed tracker count, ordered by the wait/join above
    EXPECT_EQ(t.invoked.load(std::memory_order_seq_cst), 1);
  }
  EXPECT_EQ(t.alive(), 0);
}

TEST(JobFunction, LargeCallableLivesOnHeapAndIsDestroyed) {
  ts::test::lifetime_tracker t;
  {
    std::array<char, 200> padding{};
    padding[0] = 'x';
    ts::job_function f([c = ts::test::counting_functor(t), padding] {
      c();
      EXPECT_EQ(padding[0], 'x');
    });
    ts::job_function g(std::move(f));
    g();
  }
  // seq_cst: relaxed tracker count, ordered by the wait/join above
  EXPECT_EQ(t.invoked.load(std::memory_order_seq_cst), 1);
  EXPECT_EQ(t.alive(), 0);
}

TEST(JobFunction, CancelHookIsCalled) {
  struct cancellable {
    int* runs;
    int* cancels;
    void operator()() const { ++*runs; }
    void cancel() noexcept { ++*cancels; }
  };
  int runs = 0;
  int cancels = 0;
  ts::job_function f(cancellable{&runs, &cancels});
  f.cancel();
  f.reset();
  EXPECT_FALSE(f);
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(cancels, 1);
}

TEST(JobFunction, ExceptionsPropagateFromRun) {
  ts::job_function f([] { throw std::runtime_error("boom"); });
  EXPECT_THROW(f(), std::runtime_error);
}

TEST(JobFunction, MoveOnlyCapture) {
  auto p = std::make_unique<int>(41);
  int seen = 0;
  ts::job_function f([p = std::move(p), &seen] { seen = *p + 1; });
  ts::job_function g(std::move(f));
  g();
  EXPECT_EQ(seen, 42);
}

// A job that holds its continuation, advanced in place: the continuation
// lives inside the callable the assignment replaces. (The assignment
// destroyed the held callable first and then read the continuation from
// it: freed memory, or a continuation already emptied by its destructor.)
TEST(JobFunction, MoveAssignFromInsideTheHeldCallable) {
  struct chain {
    ts::job_function next;
    int* last;
    int id;
    std::array<char, 64> pad{};  // larger than the inline buffer: held on the heap
    void operator()() const { *last = id; }
  };
  struct small_chain {
    ts::job_function next;
    void operator()() const {}
  };
  int last = 0;
  ts::job_function job{chain{ts::job_function{chain{ts::job_function{}, &last, 2}}, &last, 1}};
  job();
  EXPECT_EQ(last, 1);
  job = std::move(job.get_if<chain>()->next);
  ASSERT_TRUE(job);
  job();
  EXPECT_EQ(last, 2);

  bool ran = false;
  ts::job_function inner([&ran] { ran = true; });
  ts::job_function outer{small_chain{std::move(inner)}};
  outer = std::move(outer.get_if<small_chain>()->next);
  ASSERT_TRUE(outer);
  outer();
  EXPECT_TRUE(ran);
}
