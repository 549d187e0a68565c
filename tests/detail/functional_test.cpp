// detail/functional.hpp: detail::invoke has std::invoke's semantics
// ([func.require]: callables, pointers to member functions and data through
// an object, a pointer, a smart pointer or a reference_wrapper; the result
// type and noexcept of the call; not viable when the call is ill-formed),
// and std::function / std::ref work through the header. That the header
// does not include <functional> is checked by scripts/check-header-weight.sh.
#include "thread_system/detail/functional.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace {

namespace d = thread_system::detail;

struct widget {
  int value = 0;
  int add(int x) const { return value + x; }
  int& ref() { return value; }
  [[nodiscard]] int nothrow_get() const noexcept { return value; }
};

int twice(int x) { return 2 * x; }

template <typename F, typename... Args>
concept detail_invocable =
    requires(F&& f, Args&&... args) { d::invoke(std::forward<F>(f), std::forward<Args>(args)...); };

TEST(Functional, InvokeCallsFunctionsAndFunctionObjects) {
  EXPECT_EQ(d::invoke(twice, 21), 42);
  EXPECT_EQ(d::invoke(&twice, 4), 8);
  EXPECT_EQ(d::invoke([](const std::string& s) { return s.size(); }, std::string("four")), 4U);
  const auto moved_only = [p = std::make_unique<int>(7)]() { return *p; };
  EXPECT_EQ(d::invoke(moved_only), 7);
}

TEST(Functional, InvokeCallsMembersThroughObjectsPointersAndReferenceWrappers) {
  widget w{10};
  EXPECT_EQ(d::invoke(&widget::add, w, 5), 15);
  EXPECT_EQ(d::invoke(&widget::add, &w, 6), 16);
  EXPECT_EQ(d::invoke(&widget::add, std::ref(w), 7), 17);
  EXPECT_EQ(d::invoke(&widget::add, std::make_unique<widget>(widget{1}), 1), 2);  // a smart pointer
  // A data member: a reference into the object, as std::invoke gives.
  d::invoke(&widget::value, w) = 3;
  EXPECT_EQ(w.value, 3);
  d::invoke(&widget::ref, &w) = 4;
  EXPECT_EQ(w.value, 4);
}

TEST(Functional, InvokeHasTheCallsTypeAndNoexcept) {
  widget w;
  static_assert(std::is_same_v<decltype(d::invoke(&widget::value, w)), int&>);
  static_assert(std::is_same_v<decltype(d::invoke(&widget::ref, w)), int&>);
  static_assert(std::is_same_v<decltype(d::invoke(twice, 1)), int>);
  static_assert(noexcept(d::invoke(&widget::nothrow_get, w)));
  static_assert(!noexcept(d::invoke(&widget::add, w, 1)));
  // Not viable when the call is ill-formed (substitution failure, as std::invoke).
  static_assert(detail_invocable<int (*)(int), int>);
  static_assert(!detail_invocable<int (*)(int), std::string>);
  static_assert(!detail_invocable<decltype(&widget::add), int, int>);
  EXPECT_EQ(d::invoke(&widget::nothrow_get, w), 0);
}

TEST(Functional, StdFunctionAndRefWorkThroughIt) {
  int hits = 0;
  std::function<void(int)> f = [&hits](int n) { hits += n; };
  f(2);
  d::invoke(f, 3);
  EXPECT_EQ(hits, 5);
  std::reference_wrapper<int> r = std::ref(hits);
  r.get() = 9;
  EXPECT_EQ(hits, 9);
}

}  // namespace
