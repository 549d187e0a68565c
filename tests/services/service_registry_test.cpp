#include "thread_system/services/service_registry.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

namespace ts = thread_system;

namespace {

struct greeter {
  greeter() = default;
  greeter(const greeter&) = delete;
  greeter& operator=(const greeter&) = delete;
  virtual ~greeter() = default;
  [[nodiscard]] virtual int id() const = 0;
};

struct fixed_greeter final : greeter {
  explicit fixed_greeter(int v) : value(v) {}
  [[nodiscard]] int id() const override { return value; }
  int value;
};

struct other_service {
  int x = 5;
};

std::shared_ptr<greeter> make_greeter_7() { return std::make_shared<fixed_greeter>(7); }

}  // namespace

// A factory named directly (a function, bound by reference) is accepted; it
// failed to compile under -Werror (the null check compared the reference).
TEST(ServiceRegistry, AFactoryFunctionNamedDirectlyIsAccepted) {
  ts::service_registry reg;
  ASSERT_TRUE(reg.register_factory<greeter>(make_greeter_7).has_value());
  auto r = reg.resolve<greeter>();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)->id(), 7);
  ASSERT_TRUE(reg.replace_factory<greeter>(make_greeter_7).has_value());
}

TEST(ServiceRegistry, RegisterAndResolveAnInstance) {
  ts::service_registry reg;
  auto g = std::make_shared<fixed_greeter>(1);
  ASSERT_TRUE(reg.register_instance<greeter>(g).has_value());
  auto r = reg.resolve<greeter>();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)->id(), 1);
  EXPECT_EQ(r->get(), g.get());
  EXPECT_TRUE(reg.contains<greeter>());
  EXPECT_EQ(reg.size(), 1U);
}

TEST(ServiceRegistry, AbsentServiceIsNotFound) {
  ts::service_registry reg;
  auto r = reg.resolve<other_service>();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ts::error_code::not_found);
  EXPECT_FALSE(reg.contains<other_service>());
  auto u = reg.unregister<other_service>();
  ASSERT_FALSE(u.has_value());
  EXPECT_EQ(u.error().code(), ts::error_code::not_found);
}

TEST(ServiceRegistry, DuplicateIsRefusedAndReplaceIsExplicit) {
  ts::service_registry reg;
  ASSERT_TRUE(reg.register_instance<greeter>(std::make_shared<fixed_greeter>(1)).has_value());
  auto dup = reg.register_instance<greeter>(std::make_shared<fixed_greeter>(2));
  ASSERT_FALSE(dup.has_value());
  EXPECT_EQ(dup.error().code(), ts::error_code::invalid_argument);
  auto dup_factory = reg.register_factory<greeter>([] { return std::make_shared<fixed_greeter>(3); });
  EXPECT_FALSE(dup_factory.has_value());
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 1);

  auto held = reg.resolve<greeter>().value();
  ASSERT_TRUE(reg.replace_instance<greeter>(std::make_shared<fixed_greeter>(4)).has_value());
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 4);
  EXPECT_EQ(held->id(), 1);  // a resolved pointer outlives the replacement

  ASSERT_TRUE(reg.unregister<greeter>().has_value());
  EXPECT_EQ(reg.resolve<greeter>().error().code(), ts::error_code::not_found);
  EXPECT_EQ(held->id(), 1);
}

TEST(ServiceRegistry, NullInstanceAndEmptyFactoryAreRefused) {
  ts::service_registry reg;
  EXPECT_EQ(reg.register_instance<greeter>(nullptr).error().code(), ts::error_code::invalid_argument);
  std::function<std::shared_ptr<greeter>()> empty;
  EXPECT_EQ(reg.register_factory<greeter>(empty).error().code(), ts::error_code::invalid_argument);
  std::shared_ptr<greeter> (*null_fn)() = nullptr;
  EXPECT_EQ(reg.register_factory<greeter>(null_fn).error().code(), ts::error_code::invalid_argument);
  EXPECT_EQ(reg.size(), 0U);
}

TEST(ServiceRegistry, ConcurrentFirstResolvesCallASingletonFactoryOnce) {
  const std::size_t rounds = ts::test::scaled(200);
  constexpr int threads = 8;
  for (std::size_t round = 0; round < rounds; ++round) {
    ts::service_registry reg;
    std::atomic<int> calls{0};
    ASSERT_TRUE(reg.register_factory<greeter>([&calls] {
                     calls.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
                     std::this_thread::sleep_for(std::chrono::microseconds(200));  // widen the window
                     return std::make_shared<fixed_greeter>(9);
                   })
                    .has_value());
    EXPECT_EQ(calls.load(std::memory_order_seq_cst), 0);  // lazy; seq_cst: pairs with the writers' RMW/store
    std::barrier start(threads);
    std::vector<const greeter*> seen(threads, nullptr);
    std::vector<std::thread> ts_;
    for (int t = 0; t < threads; ++t) {
      ts_.emplace_back([&, t] {
        start.arrive_and_wait();
        auto r = reg.resolve<greeter>();
        if (r) seen[static_cast<std::size_t>(t)] = r->get();
      });
    }
    for (auto& th : ts_) th.join();
    ASSERT_EQ(calls.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
    for (const greeter* p : seen) ASSERT_EQ(p, seen[0]);
    ASSERT_NE(seen[0], nullptr);
  }
}

TEST(ServiceRegistry, TransientFactoryRunsOnEveryResolve) {
  ts::service_registry reg;
  int calls = 0;
  ASSERT_TRUE(reg.register_factory<greeter>([&calls] { return std::make_shared<fixed_greeter>(++calls); },
                                            ts::service_lifetime::transient)
                  .has_value());
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 1);
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 2);
  EXPECT_EQ(calls, 2);
}

TEST(ServiceRegistry, FactoryReturningNullIsNotFoundAndAThrowingFactoryRetries) {
  ts::service_registry reg;
  ASSERT_TRUE(reg.register_factory<other_service>([] { return std::shared_ptr<other_service>(); }).has_value());
  EXPECT_EQ(reg.resolve<other_service>().error().code(), ts::error_code::not_found);

  int attempts = 0;
  ASSERT_TRUE(reg.register_factory<greeter>([&attempts]() -> std::shared_ptr<greeter> {
                   if (++attempts == 1) throw std::runtime_error("first attempt fails");
                   return std::make_shared<fixed_greeter>(2);
                 })
                  .has_value());
  EXPECT_THROW((void)reg.resolve<greeter>(), std::runtime_error);
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 2);
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 2);
  EXPECT_EQ(attempts, 2);
}

TEST(ServiceRegistry, FactoryMayResolveOtherServices) {
  ts::service_registry reg;
  ASSERT_TRUE(reg.register_instance<other_service>(std::make_shared<other_service>()).has_value());
  ASSERT_TRUE(reg.register_factory<greeter>(
                     [&reg] { return std::make_shared<fixed_greeter>(reg.resolve<other_service>().value()->x); })
                  .has_value());
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 5);
}

// A factory that resolves its own interface, directly or through another
// factory, gets invalid_argument from that inner resolve (a singleton's
// waited for itself for ever, a transient's overflowed the stack); the outer
// resolve goes on with whatever the factory makes of it.
TEST(ServiceRegistry, AFactoryResolvingItsOwnInterfaceIsRefused) {
  for (const auto lifetime : {ts::service_lifetime::singleton, ts::service_lifetime::transient}) {
    SCOPED_TRACE(lifetime == ts::service_lifetime::singleton ? "singleton" : "transient");
    ts::service_registry reg;
    std::optional<ts::error_code> inner;
    ASSERT_TRUE(reg.register_factory<greeter>(
                       [&reg, &inner] {
                         auto self = reg.resolve<greeter>();
                         inner = self ? ts::error_code::ok : self.error().code();
                         return std::make_shared<fixed_greeter>(1);
                       },
                       lifetime)
                    .has_value());
    auto outer = reg.resolve<greeter>();
    ASSERT_TRUE(outer) << outer.error().message();
    EXPECT_EQ(outer.value()->id(), 1);
    EXPECT_EQ(inner, ts::error_code::invalid_argument);
  }
  // Through another factory: greeter -> other_service -> greeter.
  ts::service_registry reg;
  std::optional<ts::error_code> inner;
  ASSERT_TRUE(reg.register_factory<other_service>([&reg, &inner] {
                   auto g = reg.resolve<greeter>();
                   inner = g ? ts::error_code::ok : g.error().code();
                   return std::make_shared<other_service>();
                 })
                  .has_value());
  ASSERT_TRUE(reg.register_factory<greeter>(
                     [&reg] { return std::make_shared<fixed_greeter>(reg.resolve<other_service>().value()->x); })
                  .has_value());
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 5);
  EXPECT_EQ(inner, ts::error_code::invalid_argument);
  // Resolving a service again later (not from inside its factory) is fine.
  EXPECT_TRUE(reg.resolve<greeter>());
}

TEST(ServiceRegistry, ChildFallsBackToItsParentAndShadowsIt) {
  ts::service_registry parent;
  ASSERT_TRUE(parent.register_instance<greeter>(std::make_shared<fixed_greeter>(1)).has_value());
  ts::service_registry child{&parent};
  EXPECT_EQ(child.resolve<greeter>().value()->id(), 1);
  EXPECT_TRUE(child.contains<greeter>());
  EXPECT_EQ(child.size(), 0U);
  ASSERT_TRUE(child.register_instance<greeter>(std::make_shared<fixed_greeter>(2)).has_value());
  EXPECT_EQ(child.resolve<greeter>().value()->id(), 2);
  EXPECT_EQ(parent.resolve<greeter>().value()->id(), 1);
  ASSERT_TRUE(child.unregister<greeter>().has_value());
  EXPECT_EQ(child.resolve<greeter>().value()->id(), 1);
  EXPECT_EQ(child.resolve<other_service>().error().code(), ts::error_code::not_found);
}

TEST(ServiceRegistry, ScopedOverrideRestoresThePreviousRegistration) {
  ts::service_registry reg;
  ASSERT_TRUE(reg.register_instance<greeter>(std::make_shared<fixed_greeter>(1)).has_value());
  {
    ts::scoped_override<greeter> o1(reg, std::make_shared<fixed_greeter>(2));
    EXPECT_EQ(reg.resolve<greeter>().value()->id(), 2);
    {
      ts::scoped_override<greeter> o2(reg, [] { return std::make_shared<fixed_greeter>(3); });
      EXPECT_EQ(reg.resolve<greeter>().value()->id(), 3);
    }
    EXPECT_EQ(reg.resolve<greeter>().value()->id(), 2);
  }
  EXPECT_EQ(reg.resolve<greeter>().value()->id(), 1);

  // Overriding an absent service removes it again afterwards.
  {
    ts::scoped_override<other_service> o(reg, std::make_shared<other_service>());
    EXPECT_TRUE(reg.contains<other_service>());
  }
  EXPECT_FALSE(reg.contains<other_service>());
  EXPECT_THROW((ts::scoped_override<greeter>{reg, std::shared_ptr<greeter>()}), ts::error_exception);
}

TEST(ServiceRegistry, SeedStyleGlobalRegistry) {
  ts::service_registry::register_service<other_service>(std::make_shared<other_service>());
  auto s = ts::service_registry::get_service<other_service>();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->x, 5);
  ts::service_registry::register_service<other_service>(nullptr);  // removes
  EXPECT_EQ(ts::service_registry::get_service<other_service>(), nullptr);
  EXPECT_EQ(&ts::service_registry::global(), &ts::service_registry::global());
}

TEST(ServiceRegistry, ConcurrentRegisterResolveUnregister) {
  const std::size_t iterations = ts::test::scaled(20'000);
  ts::service_registry reg;
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> found{0};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_acquire)) {
      auto r = reg.resolve<greeter>();
      if (r) {
        EXPECT_EQ((*r)->id(), 7);
        found.fetch_add(1, std::memory_order_relaxed);
      } else {
        EXPECT_EQ(r.error().code(), ts::error_code::not_found);
      }
    }
  });
  for (std::size_t i = 0; i < iterations; ++i) {
    ASSERT_TRUE(reg.register_factory<greeter>([] { return std::make_shared<fixed_greeter>(7); }).has_value());
    ASSERT_TRUE(reg.unregister<greeter>().has_value());
  }
  stop.store(true, std::memory_order_release);
  reader.join();
  EXPECT_FALSE(reg.contains<greeter>());
}

// A service whose destructor uses the registry (to resolve another
// service, say) when the registry drops it: by unregister(), clear() or the
// seed API's register_service<I>(nullptr). (They destroyed it under the
// exclusive lock: the destructor's shared lock failed with EDEADLK, a
// std::system_error out of a destructor: std::terminate.)
TEST(ServiceRegistry, AServiceDestructorMayUseTheRegistry) {
  struct peer {
    int value = 7;
  };
  struct resolving_on_destruction {
    ts::service_registry* registry;
    int* seen;
    ~resolving_on_destruction() {
      auto p = registry->resolve<peer>();
      *seen = p ? (*p)->value : -1;
    }
  };
  ts::service_registry reg;
  ASSERT_TRUE(reg.register_instance<peer>(std::make_shared<peer>()));
  int seen = 0;
  ASSERT_TRUE(reg.register_instance<resolving_on_destruction>(
      std::make_shared<resolving_on_destruction>(resolving_on_destruction{&reg, &seen})));
  ASSERT_TRUE(reg.unregister<resolving_on_destruction>());
  EXPECT_EQ(seen, 7);

  seen = 0;
  ASSERT_TRUE(reg.register_instance<resolving_on_destruction>(
      std::make_shared<resolving_on_destruction>(resolving_on_destruction{&reg, &seen})));
  reg.clear();
  EXPECT_EQ(seen, -1);  // cleared with the rest: peer may be gone already, but the lookup returns

  auto& global = ts::service_registry::global();
  (void)global.replace_instance<peer>(std::make_shared<peer>());
  seen = 0;
  ts::service_registry::register_service<resolving_on_destruction>(
      std::make_shared<resolving_on_destruction>(resolving_on_destruction{&global, &seen}));
  ts::service_registry::register_service<resolving_on_destruction>(nullptr);
  EXPECT_EQ(seen, 7);
  (void)global.unregister<peer>();
}

// The destructor drops the registrations as clear() does: a service's
// destructor that looks another one up finds nothing (it read the map while
// the map's own destructor freed it: heap-use-after-free under ASan), and a
// registration made by such a destructor is dropped too (it leaked: its
// destructor never ran).
TEST(ServiceRegistry, ADestructorRunByTheRegistrysDestructorMayUseIt) {
  struct peer {
    int value = 7;
  };
  struct late {
    int value = 1;
  };
  struct using_on_destruction {
    ts::service_registry* registry;
    int* seen;
    std::weak_ptr<late>* registered_late;
    ~using_on_destruction() {
      auto p = registry->resolve<peer>();
      *seen = p ? (*p)->value : -1;
      auto l = std::make_shared<late>();
      *registered_late = l;
      (void)registry->register_instance<late>(std::move(l));
    }
  };
  int seen = 0;
  std::weak_ptr<late> registered_late;
  {
    ts::service_registry reg;
    ASSERT_TRUE(reg.register_instance<peer>(std::make_shared<peer>()));
    ASSERT_TRUE(reg.register_instance<using_on_destruction>(
        std::make_shared<using_on_destruction>(using_on_destruction{&reg, &seen, &registered_late})));
    ASSERT_TRUE(reg.register_instance<other_service>(std::make_shared<other_service>()));
  }
  EXPECT_EQ(seen, -1);
  // A weak_ptr that was never assigned shares no control block with anything.
  const std::weak_ptr<late> never_assigned;
  EXPECT_TRUE(registered_late.owner_before(never_assigned) || never_assigned.owner_before(registered_late))
      << "no late registration was made";
  EXPECT_TRUE(registered_late.expired()) << "the registration made during destruction leaked";
}
