// service_registry: look up shared services by interface type.
//
//   struct clock_service { virtual ~clock_service() = default; virtual int now() = 0; };
//   service_registry reg;
//   (void)reg.register_instance<clock_service>(std::make_shared<system_clock_service>());
//   (void)reg.register_factory<logger_service>([] { return std::make_shared<file_logger>(); });
//   result<std::shared_ptr<clock_service>> c = reg.resolve<clock_service>();
//   if (!c) { /* c.error().code() == error_code::not_found */ }
//
// Contract:
//   * Every member may be called from any thread. Registration, replacement
//     and removal take an exclusive lock; resolve() a shared one. A resolve
//     that happens after a registration returned sees it.
//   * The key is the interface type I exactly (no base/derived matching).
//     A registration holds a std::shared_ptr<I>, or a factory returning
//     something convertible to std::shared_ptr<I>.
//   * Registering I twice is refused with invalid_argument (so two modules
//     cannot silently overwrite each other); replace_*() is the explicit
//     overwrite, unregister<I>() the removal (not_found when absent). A
//     registration that runs out of memory returns resource_exhausted and
//     changes nothing.
//   * Factories:
//       - service_lifetime::singleton (default): called at most once, on
//         the first resolve, outside the registry's lock (a factory may
//         resolve other services). Concurrent first resolves call it exactly
//         once; the others wait for its result. If it throws, the exception
//         reaches that resolve's caller and the next resolve tries again.
//       - service_lifetime::transient: called on every resolve.
//     A factory that resolves its own interface, directly or through other
//     factories it calls, gets invalid_argument from that inner resolve()
//     (a singleton's would wait for itself, a transient's recurse until
//     the stack overflows). Detected per thread: two singletons whose
//     factories resolve each other, first resolved on two threads at once,
//     still wait for each other - do not build such a cycle. And a factory
//     that waits by helping (a task_group or future wait on a pool's worker)
//     may run other jobs on its thread meanwhile: their resolve() of the
//     same interface is refused the same way.
//     A factory that returns null makes resolve() return not_found. One
//     that returns a std::unique_ptr (or another non-shared owner) has it
//     made a shared_ptr by the registry; out of memory for that, resolve()
//     returns resource_exhausted (the instance is destroyed; a singleton's
//     next resolve calls the factory again).
//   * A resolved std::shared_ptr stays valid after unregister/replace: the
//     registry only drops its own reference. A registration the registry
//     drops (replace, unregister, clear, a scoped_override ending) is
//     destroyed after its lock is released, so a service's destructor may
//     use the registry.
//   * Scoped registries for tests: `service_registry child{&parent}` resolves
//     locally first and falls back to `parent` (which must outlive it);
//     registrations in the child never touch the parent. scoped_override<I>
//     replaces I's registration in a registry for its own lifetime and puts
//     the previous one (or none) back on destruction; nest them LIFO.
//   * service_registry::global() is a process-wide instance (constructed on
//     first use, thread-safe). The seed API's static
//     register_service<I>(ptr) / get_service<I>() (null when absent) act on
//     it; register_service replaces, as the seed's did, and, since it
//     returns nothing, throws error_exception{resource_exhausted} when the
//     registration runs out of memory (scoped_override's constructors too).
//   * Destruction: no other thread may be inside a member function; resolved
//     pointers stay valid. The destructor drops the registrations as clear()
//     does, so a service's destructor run by it may use the registry (it
//     finds nothing registered) - global()'s at process exit too.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <utility>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/detail/functional.hpp"

namespace thread_system {

/// How often a registered factory is called.
enum class service_lifetime {
  singleton,  ///< Once, on the first resolve; later resolves share the instance.
  transient,  ///< On every resolve.
};

/// Looks up shared services by interface type; thread-safe, with optional parent fallback (see the header comment).
class service_registry {
 public:
  service_registry() = default;
  /// A child: resolve() falls back to `*parent` for interfaces not
  /// registered here. `*parent` must outlive the child. Null: no parent.
  explicit service_registry(const service_registry* parent) noexcept : parent_(parent) {}
  service_registry(const service_registry&) = delete;
  service_registry& operator=(const service_registry&) = delete;
  service_registry(service_registry&&) = delete;
  service_registry& operator=(service_registry&&) = delete;
  /// Drops every registration as clear() does: a service destroyed here may
  /// still use the registry (it finds nothing registered). Registrations
  /// such a destructor makes are dropped the same way.
  ~service_registry() {
    // No other thread is inside a member (see the header comment), so the
    // emptiness check needs no lock; clear() destroys outside the lock.
    while (!entries_.empty()) clear();
  }

  /// Registers an instance. invalid_argument for a null pointer or when I is
  /// already registered here.
  template <typename I>
  result<void> register_instance(std::shared_ptr<I> instance) {
    return detail::refuse_if_out_of_memory([&]() -> result<void> {
      if (instance == nullptr) return null_instance<I>();
      return insert(key<I>(), make_instance_entry(std::move(instance)), /*replace=*/false);
    });
  }

  /// Registers a factory `F() -> std::shared_ptr<I or derived>`.
  /// invalid_argument for an empty factory or when I is already registered.
  template <typename I, typename F>
  result<void> register_factory(F&& factory, service_lifetime lifetime = service_lifetime::singleton)
    requires factory_of<F, I>
  {
    return detail::refuse_if_out_of_memory([&]() -> result<void> {
      auto e = make_factory_entry<I>(std::forward<F>(factory), lifetime);
      if (e == nullptr) return empty_factory<I>();
      return insert(key<I>(), std::move(e), /*replace=*/false);
    });
  }

  /// Registers or overwrites I's instance. invalid_argument for null.
  template <typename I>
  result<void> replace_instance(std::shared_ptr<I> instance) {
    return detail::refuse_if_out_of_memory([&]() -> result<void> {
      if (instance == nullptr) return null_instance<I>();
      return insert(key<I>(), make_instance_entry(std::move(instance)), /*replace=*/true);
    });
  }

  /// Registers or overwrites I's factory. invalid_argument for an empty one.
  template <typename I, typename F>
  result<void> replace_factory(F&& factory, service_lifetime lifetime = service_lifetime::singleton)
    requires factory_of<F, I>
  {
    return detail::refuse_if_out_of_memory([&]() -> result<void> {
      auto e = make_factory_entry<I>(std::forward<F>(factory), lifetime);
      if (e == nullptr) return empty_factory<I>();
      return insert(key<I>(), std::move(e), /*replace=*/true);
    });
  }

  /// Removes I's registration from this registry (not from a parent).
  /// not_found when I is not registered here.
  /// The registration is destroyed after the registry's lock is released
  /// (the service's destructor may use the registry).
  template <typename I>
  result<void> unregister() {
    std::shared_ptr<entry> old;  // destroyed after the lock is released
    {
      std::unique_lock lock(mutex_);
      const auto it = entries_.find(key<I>());
      if (it != entries_.end()) {
        old = std::move(it->second);
        entries_.erase(it);
      }
    }
    if (old == nullptr) {
      return make_error_nothrow(error_code::not_found,
                                [] { return std::string("service not registered: ") + typeid(I).name(); });
    }
    return {};
  }

  /// The service for I: from this registry, else from the parent chain.
  /// not_found when no registry in the chain has I (or its factory returned
  /// null). A singleton factory's exception propagates.
  template <typename I>
  [[nodiscard]] result<std::shared_ptr<I>> resolve() const {
    std::shared_ptr<entry> e;
    for (const service_registry* r = this; r != nullptr && e == nullptr; r = r->parent_) e = r->find(key<I>());
    if (e == nullptr) {
      return make_error_nothrow(error_code::not_found,
                                [] { return std::string("service not registered: ") + typeid(I).name(); });
    }
    // A factory resolving its own interface (see the header) on this thread.
    for (const resolving* r = tl_resolving; r != nullptr; r = r->outer) {
      if (r->what == e.get()) {
        return make_error_nothrow(error_code::invalid_argument, [] {
          return std::string("service factory resolves its own interface: ") + typeid(I).name();
        });
      }
    }
    const resolving here(e.get());
    std::shared_ptr<void> p;
    try {
      p = e->get();
    } catch (const conversion_out_of_memory&) {  // the registry's own allocation, not the factory's
      return detail::out_of_memory_error();
    }
    if (p == nullptr) {
      return make_error_nothrow(error_code::not_found,
                                [] { return std::string("service factory returned null: ") + typeid(I).name(); });
    }
    // The entry was stored under typeid(I) from a std::shared_ptr<I>.
    return std::static_pointer_cast<I>(std::move(p));
  }

  /// True when I is registered here or in a parent.
  template <typename I>
  [[nodiscard]] bool contains() const {
    for (const service_registry* r = this; r != nullptr; r = r->parent_) {
      if (r->find(key<I>()) != nullptr) return true;
    }
    return false;
  }

  /// Registrations in this registry (not counting parents).
  [[nodiscard]] std::size_t size() const {
    std::shared_lock lock(mutex_);
    return entries_.size();
  }

  /// Removes every registration from this registry; they are destroyed
  /// after the registry's lock is released (as by unregister()).
  void clear() {
    decltype(entries_) old;  // destroyed after the lock is released
    std::unique_lock lock(mutex_);
    old.swap(entries_);
    lock.unlock();
  }

  /// The process-wide registry.
  [[nodiscard]] static service_registry& global() {
    static service_registry instance;
    return instance;
  }

  // ---- seed API (on global()) ---------------------------------------------

  /// Seed API: registers or replaces I in global(); a null pointer removes
  /// it (nothing registered: nothing to do). It returns nothing, as the
  /// seed's did, so a registration refused for want of memory throws
  /// error_exception{resource_exhausted} (and changes nothing).
  template <typename I>
  static void register_service(std::shared_ptr<I> service) {
    if (service == nullptr) {
      (void)global().unregister<I>();  // not_found: already absent, which is what was asked
    } else if (auto r = global().replace_instance<I>(std::move(service)); !r) {
      throw error_exception(std::move(r).error());
    }
  }
  /// Seed API: I from global(), or null when absent.
  template <typename I>
  [[nodiscard]] static std::shared_ptr<I> get_service() {
    auto r = global().resolve<I>();
    return r ? std::move(*r) : nullptr;
  }

 private:
  template <typename I>
  friend class scoped_override;

  // The entries whose get() is running on this thread, innermost first: a
  // resolve() of one of them from inside its own factory is refused.
  class entry;
  struct resolving {
    const entry* what;
    const resolving* outer;
    explicit resolving(const entry* e) noexcept : what(e), outer(tl_resolving) { tl_resolving = this; }
    resolving(const resolving&) = delete;
    resolving& operator=(const resolving&) = delete;
    ~resolving() { tl_resolving = outer; }
  };
  static inline thread_local const resolving* tl_resolving = nullptr;

  // Thrown through a factory entry when the registry itself cannot make the
  // factory's result a shared_ptr (see make_factory_entry()).
  struct conversion_out_of_memory {};

  // One registration. Immutable after construction, except a singleton
  // factory's instance, published once through ready_.
  class entry {
   public:
    explicit entry(std::shared_ptr<void> instance) : instance_(std::move(instance)) {}
    entry(std::function<std::shared_ptr<void>()> factory, service_lifetime lifetime)
        : factory_(std::move(factory)), lifetime_(lifetime) {}

    std::shared_ptr<void> get() {
      if (!factory_) return instance_;
      if (lifetime_ == service_lifetime::transient) return factory_();
      // Double-checked: acquire pairs with the release store below, so a
      // reader that sees ready_ also sees instance_. Concurrent first callers
      // serialise on once_mutex_; exactly one runs the factory. A throw
      // leaves ready_ false: the next caller tries again. (Not std::call_once:
      // libstdc++'s, on pthread_once, is not exception-safe under TSan.)
      if (ready_.load(std::memory_order_acquire)) return instance_;
      std::lock_guard lock(once_mutex_);
      if (!ready_.load(std::memory_order_relaxed)) {  // the mutex orders it
        instance_ = factory_();
        ready_.store(true, std::memory_order_release);
      }
      return instance_;
    }

   private:
    std::shared_ptr<void> instance_;  // immutable, or written once under once_mutex_ before ready_
    std::function<std::shared_ptr<void>()> factory_;
    service_lifetime lifetime_ = service_lifetime::singleton;
    std::mutex once_mutex_;
    std::atomic<bool> ready_{false};
  };

  template <typename I>
  static std::type_index key() noexcept {
    return std::type_index(typeid(I));
  }

  template <typename I>
  static std::shared_ptr<entry> make_instance_entry(std::shared_ptr<I> instance) {
    // Through shared_ptr<I> first, so resolve()'s static cast back to I is exact.
    return std::make_shared<entry>(std::shared_ptr<void>(std::shared_ptr<I>(std::move(instance))));
  }

  template <typename I, typename F>
  static std::shared_ptr<entry> make_factory_entry(F&& factory, service_lifetime lifetime) {
    using D = std::decay_t<F>;
    if (detail::is_empty_callable(factory)) return nullptr;
    // Held through a shared_ptr so that move-only factories fit std::function.
    std::function<std::shared_ptr<void>()> erased = [f = std::make_shared<D>(std::forward<F>(factory))] {
      auto made = (*f)();  // the factory's own exceptions reach resolve()'s caller
      // A std::unique_ptr (or a raw pointer) made into a shared_ptr needs a
      // control block: out of memory, resolve() reports resource_exhausted
      // (the instance is destroyed by `made`), not std::bad_alloc.
      try {
        return std::shared_ptr<void>(std::shared_ptr<I>(std::move(made)));
      } catch (const std::bad_alloc&) {
        throw conversion_out_of_memory{};
      }
    };
    return std::make_shared<entry>(std::move(erased), lifetime);
  }

  template <typename I>
  static unexpected_error null_instance() {
    return make_error_nothrow(error_code::invalid_argument,
                              [] { return std::string("null service instance for ") + typeid(I).name(); });
  }
  template <typename I>
  static unexpected_error empty_factory() {
    return make_error_nothrow(error_code::invalid_argument,
                              [] { return std::string("empty service factory for ") + typeid(I).name(); });
  }

  result<void> insert(std::type_index k, std::shared_ptr<entry> e, bool replace) {
    std::shared_ptr<entry> old;  // destroyed after the lock is released
    std::unique_lock lock(mutex_);
    auto [it, inserted] = entries_.try_emplace(k, e);
    if (!inserted) {
      if (!replace) {
        return make_error_nothrow(error_code::invalid_argument, [&] {
          return std::string("service already registered (use replace_*): ") + k.name();
        });
      }
      old = std::exchange(it->second, std::move(e));
    }
    return {};
  }

  std::shared_ptr<entry> find(std::type_index k) const {
    std::shared_lock lock(mutex_);
    auto it = entries_.find(k);
    return it == entries_.end() ? nullptr : it->second;
  }

  // Swaps in `e` (null: remove) and returns what was there (null: nothing).
  std::shared_ptr<entry> exchange(std::type_index k, std::shared_ptr<entry> e) {
    std::unique_lock lock(mutex_);
    auto it = entries_.find(k);
    std::shared_ptr<entry> old;
    if (it != entries_.end()) {
      old = std::move(it->second);
      if (e != nullptr) {
        it->second = std::move(e);
      } else {
        entries_.erase(it);
      }
    } else if (e != nullptr) {
      entries_.emplace(k, std::move(e));
    }
    return old;
  }

  // Restores `previous` only while `mine` is still the registration for k.
  void restore(std::type_index k, const std::shared_ptr<entry>& mine, std::shared_ptr<entry> previous) {
    std::shared_ptr<entry> dropped;  // destroyed after the lock is released
    std::unique_lock lock(mutex_);
    auto it = entries_.find(k);
    if (it == entries_.end() || it->second != mine) return;  // someone else changed it since: theirs wins
    if (previous != nullptr) {
      dropped = std::exchange(it->second, std::move(previous));
    } else {
      dropped = std::move(it->second);
      entries_.erase(it);
    }
  }

  const service_registry* parent_ = nullptr;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::type_index, std::shared_ptr<entry>> entries_;  // guarded by mutex_
};

/// Replaces I's registration in `registry` for this object's lifetime (the
/// override shadows a parent's registration too); the destructor restores
/// what was registered before (or removes I if nothing was), unless the
/// registration was changed again in between, in which case the newer one is
/// left alone. Nest overrides LIFO.
template <typename I>
class scoped_override {
 public:
  /// Overrides with an instance. Throws error_exception{invalid_argument}
  /// for null (a constructor cannot return a result), and
  /// error_exception{resource_exhausted} out of memory (nothing changed).
  scoped_override(service_registry& registry, std::shared_ptr<I> instance) : registry_(registry) {
    if (instance == nullptr) throw error_exception(service_registry::null_instance<I>().value);
    detail::throw_if_out_of_memory([&] { install(service_registry::make_instance_entry(std::move(instance))); });
  }
  /// Overrides with a factory: invalid_argument for an empty one,
  /// resource_exhausted out of memory, as above.
  template <typename F>
  scoped_override(service_registry& registry, F&& factory, service_lifetime lifetime = service_lifetime::singleton)
    requires factory_of<F, I>
      : registry_(registry) {
    detail::throw_if_out_of_memory([&] {
      auto e = service_registry::make_factory_entry<I>(std::forward<F>(factory), lifetime);
      if (e == nullptr) throw error_exception(service_registry::empty_factory<I>().value);
      install(std::move(e));
    });
  }
  scoped_override(const scoped_override&) = delete;
  scoped_override& operator=(const scoped_override&) = delete;
  ~scoped_override() { registry_.restore(service_registry::key<I>(), mine_, std::move(previous_)); }

 private:
  void install(std::shared_ptr<service_registry::entry> e) {
    mine_ = e;
    previous_ = registry_.exchange(service_registry::key<I>(), std::move(e));
  }

  service_registry& registry_;
  std::shared_ptr<service_registry::entry> mine_;
  std::shared_ptr<service_registry::entry> previous_;
};

}  // namespace thread_system
