// The named constraints of core/concepts.hpp, and that the pools' entry
// points are constrained by them (a call that does not satisfy them does not
// compile, rather than failing deep inside the library).
#include "thread_system/core/concepts.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "thread_system/pools/task_group.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/typed_thread_pool.hpp"
#include "thread_system/services/service_registry.hpp"
#include "thread_system/sync/cancellation.hpp"

namespace ts = thread_system;

namespace {
struct widget {};
struct move_only_call {
  std::unique_ptr<int> p;
  void operator()() {}
};
[[maybe_unused]] int twice(int x) { return 2 * x; }
[[maybe_unused]] void nothing() {}
enum class colour { red };
[[maybe_unused]] const char* to_string(colour) { return "red"; }
enum class shade { dark };

template <typename Pool, typename F>
concept pool_enqueues = requires(Pool& p, F f) { p.enqueue(std::move(f)); };
template <typename Pool, typename F, typename... Args>
concept pool_submits = requires(Pool& p, F f, Args... args) { p.submit(std::move(f), std::move(args)...); };
template <typename F>
concept group_runs = requires(ts::task_group& g, F f) { g.run(std::move(f)); };
using typed_pool = ts::typed_thread_pool_t<ts::job_types>;
template <typename F>
concept typed_enqueues = requires(typed_pool& p, F f) { p.enqueue(ts::job_types::Batch, std::move(f)); };
template <typename F>
concept typed_token_enqueues =
    requires(typed_pool& p, ts::cancellation_token t, F f) { p.enqueue(ts::job_types::Batch, t, std::move(f)); };
template <typename F, typename... Args>
concept typed_token_submits = requires(typed_pool& p, ts::cancellation_token t, F f, Args... args) {
  p.submit(ts::job_types::Batch, t, std::move(f), std::move(args)...);
};
}  // namespace

TEST(Concepts, Runnable) {
  static_assert(ts::runnable<void (*)()>);
  static_assert(ts::runnable<decltype([] { return 1; })>);  // the result is ignored
  static_assert(ts::runnable<move_only_call>);
  static_assert(ts::runnable<std::function<void()>>);
  static_assert(!ts::runnable<int>);
  static_assert(!ts::runnable<int (*)(int)>);
  SUCCEED();
}

TEST(Concepts, Submittable) {
  static_assert(ts::submittable<int (*)(int), int>);
  static_assert(ts::submittable<int (*)(int), short>);
  static_assert(!ts::submittable<int (*)(int)>);
  static_assert(!ts::submittable<int (*)(int), std::string>);
  static_assert(ts::submittable<decltype([](const std::string& s) { return s; }), const char*>);
  // A future holds a value or an lvalue reference (future<T&>), never an rvalue reference.
  static_assert(ts::submittable<int& (*)()>);
  static_assert(ts::submittable<const std::string& (*)()>);
  using returns_rvalue_reference = int && (*)();
  static_assert(!ts::submittable<returns_rvalue_reference>);
  SUCCEED();
}

TEST(Concepts, NullableCallable) {
  static_assert(ts::nullable_callable<void (*)()>);
  static_assert(ts::nullable_callable<decltype(&twice)>);
  static_assert(ts::nullable_callable<std::function<void()>>);
  static_assert(ts::nullable_callable<std::function<void()>&>);
  static_assert(ts::nullable_callable<int widget::*>);
  int captured = 0;
  static_assert(!ts::nullable_callable<decltype([&captured] { ++captured; })>);
  static_assert(!ts::nullable_callable<move_only_call>);
  SUCCEED();
}

TEST(Concepts, FactoryConvertsAndToString) {
  static_assert(ts::factory_of<decltype([] { return std::make_shared<widget>(); }), widget>);
  static_assert(!ts::factory_of<decltype([] { return 1; }), widget>);
  static_assert(ts::converts_to_each<const ts::cancellation_token&, ts::cancellation_token, ts::cancellation_token>);
  static_assert(!ts::converts_to_each<const ts::cancellation_token&, ts::cancellation_token, int>);
  static_assert(ts::has_to_string<colour>);
  static_assert(!ts::has_to_string<shade>);
  static_assert(ts::not_same_as<int, long>);
  static_assert(!ts::not_same_as<const widget&, widget>);
  SUCCEED();
}

TEST(Concepts, PoolEntryPointsAreConstrained) {
  static_assert(pool_enqueues<ts::thread_pool, decltype(&nothing)>);
  static_assert(!pool_enqueues<ts::thread_pool, int>);
  static_assert(!pool_enqueues<ts::thread_pool, int (*)(int)>);
  static_assert(pool_submits<ts::thread_pool, decltype(&twice), int>);
  static_assert(!pool_submits<ts::thread_pool, decltype(&twice)>);
  static_assert(!pool_submits<ts::thread_pool, decltype(&twice), std::string>);
  static_assert(group_runs<decltype(&nothing)>);
  static_assert(!group_runs<int>);
  static_assert(typed_enqueues<decltype(&nothing)>);
  static_assert(!typed_enqueues<int>);
  static_assert(typed_token_enqueues<decltype(&nothing)>);
  static_assert(!typed_token_enqueues<int>);
  static_assert(typed_token_submits<decltype(&twice), int>);
  static_assert(!typed_token_submits<decltype(&twice), std::string>);
  SUCCEED();
}
