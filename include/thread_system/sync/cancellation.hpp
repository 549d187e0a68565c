// Cooperative cancellation: cancellation_source / cancellation_token /
// cancellation_registration.
//
//   cancellation_source src;
//   cancellation_token tok = src.token();          // cheap to copy, share freely
//   auto reg = tok.register_callback([&] { wake_my_waiter(); });
//   ... while (!tok.is_cancelled()) { do_a_slice(); }
//   src.cancel();                                   // from any thread
//
// Contract:
//   * Every member of every type here may be called from any thread. Copies
//     of a token (and of a source) share one state; the state lives while a
//     source, a token or a registration refers to it. A moved-from source
//     has no state (as std::stop_source): cancel() and is_cancelled()
//     return false, token() is a token that can never be cancelled.
//   * cancel() is idempotent: the first call (on any source or token of the
//     state) returns true and runs the callbacks, later calls return false.
//     Whatever the cancelling thread did before cancel() is visible to a
//     thread that sees is_cancelled() == true (release in cancel(), acquire
//     in is_cancelled(); the fast path is that one acquire load), and to
//     every callback.
//   * is_cancelled() turns true as cancel() begins, before the callbacks
//     have run. The cancel() that cancels (returns true) returns after
//     every callback registered before it has finished; a concurrent or
//     later one returns false at once, maybe while those callbacks still run
//     (as std::stop_source::request_stop()): wait for a callback's effect,
//     not for cancel(), when the first call may be another thread's.
//   * register_callback(f): f runs exactly once if the state is cancelled
//     while the registration is alive. Callbacks run on the cancelling
//     thread, one after another, in registration order. Registered after
//     cancellation began, f runs at once on the registering thread, and the
//     registration returned is empty. f must not throw (a throwing callback
//     terminates the program, as with std::stop_callback).
//   * cancellation_registration is a move-only RAII handle. Its destructor
//     (or unregister()) removes the callback. When it returns, the callback
//     is not running and never will run, and (called from anywhere but the
//     callback itself) its function object, with what it captured, has
//     been destroyed — if the callback is running on
//     another thread, unregister waits for it to return; if it is called
//     from inside that same callback (or from another callback of the same
//     cancel() on that thread), it does not wait (no self-deadlock). So a
//     callback may safely capture references to objects that outlive its
//     registration. detach() keeps the callback registered for the lifetime
//     of the state without a handle.
//   * register_callback() is [[nodiscard]]: discarding the handle would
//     unregister at once. The seed API's fire-and-forget form
//     `token.register_callback(f);` is spelled
//     `token.register_callback(f).detach();` here.
//   * Linked states: cancellation_source::linked(a, b, ...) (and the seed's
//     cancellation_token::create_linked({a, b})) is cancelled when any parent
//     is; it unregisters from its parents when its last source, token and
//     registration are gone. Parents are not kept alive by the child.
//     Cancellation runs down a chain of linked states as nested calls (a
//     parent's callback cancels the child), about 100 bytes of stack per
//     link in release: a chain of ~80 000 links fills an 8 MiB stack.
//   * std::stop_token interop goes both ways, through callback bridges
//     (where the standard library has std::stop_token: see
//     THREAD_SYSTEM_HAS_STOP_TOKEN in detail/config.hpp; libc++ up to 19
//     keeps it behind -fexperimental-library, and everything else here is
//     the same without it):
//     cancellation_source::from_stop_token(st) gives a state cancelled when
//     `st` has stop requested; token.get_stop_token() gives a std::stop_token
//     whose stop is requested (after this state's own callbacks ran) when
//     the state is cancelled. Cancelling never flows from the std::stop_source
//     side back into the returned std::stop_token's state.
//   * Destruction: a source, token or registration may be destroyed at any
//     time, including inside a callback; destroying the last reference to a
//     state from inside one of its own callbacks is safe.
//   * Out of memory: every call that allocates (a new source or seed token,
//     register_callback(), linked(), from_stop_token(), get_stop_token())
//     throws error_exception{resource_exhausted}, never std::bad_alloc.
//
// Default construction: like std::stop_token{}, a default-constructed
// `cancellation_token` has no state — it allocates nothing, is never
// cancelled, cancel() on it returns false and registering does nothing
// (`cancellation_token::none()` is the same token by name). A token that can
// be cancelled comes from a cancellation_source or from create().
//
// Cost of a copy: a token is a reference-counted handle (16 bytes); a copy
// and its destruction are one atomic read-modify-write each on the state's
// shared count, a cache line that every thread copying or dropping a token
// of that state writes; a move is free. So with one token per job, pass it
// as `pool.enqueue(tok, f)` (one copy per job), or capture a movable copy,
// `[t = tok] { ... }`: capturing a `const` token by copy (`[tok]`, with
// `tok` declared const) makes the closure's member const, and every move
// of the job on its way through the pool (about four per job) copies it
// instead: four more increments and decrements per job. Measured with empty
// jobs on a 2-worker pool (thread_system_control_benchmarks, BM_CancelJobs,
// medians of 7 interleaved repetitions; docs/PERFORMANCE.md, *A token
// captured in a job*): `[t = tok]` 21.6 M jobs/s, enqueue(tok, f) 21.3,
// `[tok]` of a const token 8.6 (plain jobs 40.2).
//
// Seed API (kept): `cancellation_token::create()` (a token with a new state
// of its own), `create_linked({...})`, `cancel()`, `is_cancelled()`,
// `check_cancelled()` (a result) and `throw_if_cancelled()` (error_exception
// with error_code::cancelled).
//
// Algorithm: the callback list and the handshake between unregister and a
// concurrent cancel follow the design of std::stop_callback (P0660, as in
// libstdc++) and folly::CancellationToken: an intrusive list under a small
// lock; the cancelling thread pops one node at a time, runs it outside the
// lock, then marks it finished; unregister either unlinks the node under the
// lock or, finding it popped, waits for the finished mark unless it runs on
// the cancelling thread. Here each node is heap-allocated and reference
// counted by the list and the handle, so the cancelling thread's last touch
// (the finished mark and its futex wake) never meets freed memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include "thread_system/core/concepts.hpp"
#include "thread_system/detail/config.hpp"
#if THREAD_SYSTEM_HAS_STOP_TOKEN
#include <stop_token>
#endif
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/futex.hpp"
#include "thread_system/sync/spin_lock.hpp"

namespace thread_system {

class cancellation_token;
class cancellation_source;
class cancellation_registration;

namespace detail {

class cancellation_state;

// One registered callback. Owned jointly (refs_) by the state's list and by
// the registration handle; the last owner deletes it.
class cancellation_node {
 public:
  cancellation_node(const cancellation_node&) = delete;
  cancellation_node& operator=(const cancellation_node&) = delete;

  virtual void invoke() noexcept = 0;
  // Destroys the callback's function object (after invoke(), before
  // mark_finished(): an unregister() that returns finds it gone, so what
  // it captured may die right after).
  virtual void discard() noexcept = 0;

  // Marks the callback finished and wakes an unregister waiting for it.
  void mark_finished() noexcept {
    // release: pairs with the acquire loads in wait_finished(); everything
    // the callback did is visible to the thread whose unregister returns.
    if (finished_.exchange(1, std::memory_order_release) == 2) futex_wake(finished_, futex_wake_all);
  }

  // Blocks until mark_finished() (the callback was popped by a canceller).
  void wait_finished() noexcept {
    std::uint32_t v = finished_.load(std::memory_order_acquire);  // pairs with mark_finished()
    while (v != 1) {
      // Announce a sleeper (0 -> 2) so that mark_finished() wakes us; on
      // failure v holds the fresh value (acquire: may be the final 1).
      if (v == 0 && !finished_.compare_exchange_weak(v, 2, std::memory_order_acquire, std::memory_order_acquire)) {
        continue;
      }
      futex_wait(finished_, 2);
      v = finished_.load(std::memory_order_acquire);  // pairs with mark_finished()
    }
  }

  // Drops one owner; the last one deletes the node.
  void release() noexcept {
    // acq_rel: the deleting owner sees every write of the other owner.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 protected:
  cancellation_node() = default;
  virtual ~cancellation_node() = default;

 private:
  friend class cancellation_state;
  cancellation_node* prev_ = nullptr;       // guarded by the state's lock
  cancellation_node* next_ = nullptr;       // guarded by the state's lock
  bool linked_ = false;                     // guarded by the state's lock
  std::atomic<std::uint32_t> finished_{0};  // 0 pending/running, 1 finished, 2 running + a waiter sleeps
  std::atomic<std::uint32_t> refs_{2};      // the list and the handle
};

template <typename F>
class cancellation_callback_node final : public cancellation_node {
 public:
  template <typename G>
  // NOLINTNEXTLINE(bugprone-forwarding-reference-overload): nodes are never copied or moved (heap, refcounted)
  explicit cancellation_callback_node(G&& g) : fn_(std::in_place, std::forward<G>(g)) {}
  void invoke() noexcept override {
    if (fn_) (*fn_)();  // (always set here: discard() comes after the one invoke())
  }
  void discard() noexcept override { fn_.reset(); }

 private:
  std::optional<F> fn_;
};

// Bridges a std::stop_token into a state (see cancellation_source::from_stop_token).
// The base exists without std::stop_token too, so the state's layout does not change.
struct std_stop_link_base {
  std_stop_link_base() = default;
  std_stop_link_base(const std_stop_link_base&) = delete;
  std_stop_link_base& operator=(const std_stop_link_base&) = delete;
  virtual ~std_stop_link_base() = default;
};
#if THREAD_SYSTEM_HAS_STOP_TOKEN
template <typename F>
struct std_stop_link final : std_stop_link_base {
  std_stop_link(const std::stop_token& t, F f) : callback(t, std::move(f)) {}
  std::stop_callback<F> callback;
};
#endif

// A linked child's registration with one parent (cancellation_source::linked).
// Unlike a cancellation_registration it holds the parent's state weakly, so a
// child never keeps its parents alive. Destroyed with the child's state: it
// unregisters from a parent still alive (waiting, as unregister() does, for
// the callback if another thread runs it); a parent already gone released its
// list's reference to the node when it died, and only ours is left.
struct parent_link {
  parent_link() noexcept = default;
  parent_link(const parent_link&) = delete;
  parent_link& operator=(const parent_link&) = delete;
  parent_link(parent_link&& o) noexcept : parent(std::move(o.parent)), node(std::exchange(o.node, nullptr)) {}
  parent_link& operator=(parent_link&&) = delete;
  ~parent_link();  // defined after cancellation_state

  std::weak_ptr<cancellation_state> parent;
  cancellation_node* node = nullptr;  // the handle's reference, or null
};

}  // namespace detail

/// RAII handle of one registered callback. Move-only. Empty when the
/// callback already ran at registration (the state was cancelled) or when
/// the token had no state.
class cancellation_registration {
 public:
  /// An empty handle.
  cancellation_registration() noexcept = default;
  /// Not copyable.
  cancellation_registration(const cancellation_registration&) = delete;
  /// Not copyable.
  cancellation_registration& operator=(const cancellation_registration&) = delete;
  /// Takes over `o`'s registration; `o` becomes empty.
  cancellation_registration(cancellation_registration&& o) noexcept
      : state_(std::move(o.state_)), node_(std::exchange(o.node_, nullptr)) {}
  /// Unregisters the callback this handle holds (as unregister()), then takes over `o`'s registration.
  cancellation_registration& operator=(cancellation_registration&& o) noexcept {
    if (this != &o) {
      (void)unregister();
      state_ = std::move(o.state_);
      node_ = std::exchange(o.node_, nullptr);
    }
    return *this;
  }
  /// Unregisters the callback (as unregister()).
  ~cancellation_registration() { (void)unregister(); }

  /// Removes the callback. Returns true when it was removed before it ran
  /// (it never will), false when it had already run, was running (then this
  /// waited for it, unless called on the cancelling thread) or there was
  /// nothing registered. Afterwards the handle is empty.
  bool unregister() noexcept;

  /// Leaves the callback registered for the state's lifetime and empties the
  /// handle (the seed API's fire-and-forget registration).
  void detach() noexcept;

  /// True while the handle holds a registration (ran or not).
  [[nodiscard]] bool active() const noexcept { return node_ != nullptr; }
  /// Same as active().
  explicit operator bool() const noexcept { return active(); }

 private:
  friend class cancellation_token;
  friend class cancellation_source;  // turns a parent registration into a detail::parent_link
  cancellation_registration(std::shared_ptr<detail::cancellation_state> s, detail::cancellation_node* n) noexcept
      : state_(std::move(s)), node_(n) {}

  std::shared_ptr<detail::cancellation_state> state_;
  detail::cancellation_node* node_ = nullptr;
};

namespace detail {

class cancellation_state {
 public:
  cancellation_state() = default;
  cancellation_state(const cancellation_state&) = delete;
  cancellation_state& operator=(const cancellation_state&) = delete;

  ~cancellation_state() {
    // Only detached callbacks and linked children's nodes can remain (a live
    // registration keeps the state alive); nobody else can reach them now.
    // A child's node also has its parent_link's reference, dropped when the
    // child dies (before or after this).
    for (cancellation_node* n = head_; n != nullptr;) {
      cancellation_node* next = n->next_;
      n->release();
      n = next;
    }
    // parent_links_ and std_link_ are destroyed after this body and
    // unregister from the parents (waiting for a parent callback that is
    // running on another thread; it finds this state gone and returns).
  }

  [[nodiscard]] bool is_cancelled() const noexcept {
    return cancelled_.load(std::memory_order_acquire);  // pairs with the release store in request_cancel()
  }

  // Sets the state cancelled and runs the callbacks. Precondition: the
  // caller holds a shared_ptr to this state for the duration (a callback may
  // drop every other reference).
  bool request_cancel() noexcept {
    if (cancelled_.load(std::memory_order_acquire)) return false;  // pairs with the release store below
    lock_.lock();
    if (cancelled_.load(std::memory_order_relaxed)) {  // the lock orders it
      lock_.unlock();
      return false;
    }
    cancelling_thread_ = std::this_thread::get_id();
    // release: publishes the canceller's earlier writes to is_cancelled()
    // readers (acquire). Under the lock, so a registration that takes the
    // lock afterwards sees it and runs its callback inline.
    cancelled_.store(true, std::memory_order_release);
    // A plain stop_source (nostopstate when there is no bridge) rather than a
    // copy of the optional: GCC 12 misreports the optional's copy as
    // maybe-uninitialized at -O2.
    while (head_ != nullptr) {
      cancellation_node* n = head_;
      unlink(n);
      lock_.unlock();
      n->invoke();
      n->discard();  // its captures die before an unregister() waiting for it returns
      n->mark_finished();
      n->release();  // the list's reference
      lock_.lock();
    }
    // The std::stop_token bridge is read after the callbacks, under the lock
    // that stop_token() takes: a bridge made while they ran (even by one of
    // them) is stopped here, after them, and one made later sees
    // callbacks_done_ and stops itself.
    callbacks_done_ = true;
#if THREAD_SYSTEM_HAS_STOP_TOKEN
    std::stop_source bridge{std::nostopstate};
    if (stop_bridge_) bridge = *stop_bridge_;
#endif
    lock_.unlock();
#if THREAD_SYSTEM_HAS_STOP_TOKEN
    if (bridge.stop_possible()) bridge.request_stop();
#endif
    return true;
  }

  // Links `n` (refs_ == 2) unless already cancelled; returns false then, and
  // the caller runs the callback itself.
  bool try_link(cancellation_node* n) noexcept {
    lock_.lock();
    if (cancelled_.load(std::memory_order_relaxed)) {  // the lock orders it against request_cancel()
      lock_.unlock();
      return false;
    }
    n->prev_ = tail_;
    n->next_ = nullptr;
    if (tail_ != nullptr) {
      tail_->next_ = n;
    } else {
      head_ = n;
    }
    tail_ = n;
    n->linked_ = true;
    lock_.unlock();
    return true;
  }

  // The body of cancellation_registration::unregister().
  bool remove(cancellation_node* n) noexcept {
    lock_.lock();
    if (n->linked_) {
      unlink(n);
      lock_.unlock();
      n->release();  // the list's reference; the caller drops the handle's
      return true;
    }
    // Popped by the canceller: running now or finished.
    const std::thread::id canceller = cancelling_thread_;
    lock_.unlock();
    if (canceller != std::this_thread::get_id()) n->wait_finished();
    return false;
  }

#if THREAD_SYSTEM_HAS_STOP_TOKEN
  std::stop_token stop_token() {
    lock_.lock();
    if (!stop_bridge_) {
      try {
        stop_bridge_.emplace();
      } catch (...) {
        lock_.unlock();
        throw;
      }
    }
    std::stop_source src = *stop_bridge_;
    const bool done = callbacks_done_;
    lock_.unlock();
    // A cancel() that finished its callbacks before we took the lock did not
    // see the bridge: we request the stop for it. One still running them (or
    // yet to come) reads the bridge after them and requests it itself.
    if (done) src.request_stop();
    return src.get_token();
  }
#endif

  // Filled once, before the state is shared (see the factories).
  std::vector<parent_link> parent_links_;
  std::unique_ptr<std_stop_link_base> std_link_;

 private:
  void unlink(cancellation_node* n) noexcept {
    if (n->prev_ != nullptr) {
      n->prev_->next_ = n->next_;
    } else {
      head_ = n->next_;
    }
    if (n->next_ != nullptr) {
      n->next_->prev_ = n->prev_;
    } else {
      tail_ = n->prev_;
    }
    n->prev_ = n->next_ = nullptr;
    n->linked_ = false;
  }

  std::atomic<bool> cancelled_{false};
  spin_lock lock_;
  cancellation_node* head_ = nullptr;  // guarded by lock_
  cancellation_node* tail_ = nullptr;  // guarded by lock_
  std::thread::id cancelling_thread_;  // guarded by lock_; set once
  bool callbacks_done_ = false;        // guarded by lock_: the cancel() ran every callback
#if THREAD_SYSTEM_HAS_STOP_TOKEN
  std::optional<std::stop_source> stop_bridge_;  // guarded by lock_
#endif
};

inline parent_link::~parent_link() {
  if (node == nullptr) return;
  if (const std::shared_ptr<cancellation_state> p = parent.lock()) (void)p->remove(node);
  node->release();  // our reference; the parent dropped the list's when it ran or died
}

}  // namespace detail

inline bool cancellation_registration::unregister() noexcept {
  // node_ and state_ are set and cleared together; testing both also keeps
  // GCC's flow analysis from assuming a null state after a move.
  if (node_ == nullptr || state_ == nullptr) return false;
  detail::cancellation_node* n = std::exchange(node_, nullptr);
  std::shared_ptr<detail::cancellation_state> s = std::move(state_);
  const bool removed = s->remove(n);
  n->release();  // the handle's reference
  return removed;
}

inline void cancellation_registration::detach() noexcept {
  if (node_ == nullptr) return;
  std::exchange(node_, nullptr)->release();  // the list keeps its own reference
  state_.reset();
}

/// A copyable view of a cancellation state: ask, register callbacks, and
/// (seed API) cancel.
class cancellation_token {
 public:
  /// A token with no state, as cheap as `std::stop_token{}` (no allocation,
  /// noexcept): never cancelled; cancel() does nothing and returns false;
  /// register_callback() returns an empty registration without running f.
  /// A token that can be cancelled comes from a cancellation_source or from
  /// create().
  cancellation_token() noexcept = default;

  /// Seed API: a token with a new state of its own (allocates; throws
  /// error_exception{resource_exhausted} when it cannot), cancelled by
  /// cancel() on it or on any copy.
  [[nodiscard]] static cancellation_token create() {
    return cancellation_token{
        detail::throw_if_out_of_memory([] { return std::make_shared<detail::cancellation_state>(); })};
  }

  /// The same as a default-constructed token (kept for code that names it).
  [[nodiscard]] static cancellation_token none() noexcept { return cancellation_token{}; }

  /// Seed API: a new token cancelled when any of `parents` is.
  [[nodiscard]] static cancellation_token create_linked(std::initializer_list<cancellation_token> parents);

#if THREAD_SYSTEM_HAS_STOP_TOKEN
  /// A new token cancelled when `st` has stop requested (see from_stop_token
  /// on the source).
  [[nodiscard]] static cancellation_token from_stop_token(const std::stop_token& st);
#endif

  /// True once the state has been cancelled; always false for none().
  [[nodiscard]] bool is_cancelled() const noexcept { return state_ != nullptr && state_->is_cancelled(); }
  /// False only for none(): such a token can never be cancelled.
  [[nodiscard]] bool can_be_cancelled() const noexcept { return state_ != nullptr; }

  /// Cancels the state (seed API; new code cancels through a source).
  /// Returns true when this call cancelled it.
  bool cancel() const noexcept {
    if (state_ == nullptr) return false;
    const std::shared_ptr<detail::cancellation_state> keep = state_;  // a callback may destroy *this
    return keep->request_cancel();
  }

  /// Seed API: `cancelled` error when cancelled, success otherwise.
  [[nodiscard]] result<void> check_cancelled() const {
    if (is_cancelled()) return make_error(error_code::cancelled, "operation cancelled");
    return {};
  }

  /// Throws error_exception{cancelled} when cancelled.
  void throw_if_cancelled() const {
    if (is_cancelled()) throw error_exception(error{error_code::cancelled, "operation cancelled"});
  }

  /// Registers `f` (invocable as `f()`, must not throw). See the header
  /// comment for exactly-once, inline-after-cancel and unregister semantics.
  /// Throws error_exception{resource_exhausted} if the node cannot be allocated.
  template <runnable F>
  [[nodiscard(
      "the callback is unregistered when the handle dies; keep it or call .detach()")]] cancellation_registration
  register_callback(F&& f) const {
    using D = std::decay_t<F>;
    if (state_ == nullptr) return {};
    if (state_->is_cancelled()) {  // no allocation when already cancelled
      D local(std::forward<F>(f));
      // Through a noexcept call: a callback that throws terminates here as
      // it would when run by cancel() (see the header comment).
      [&local]() noexcept { local(); }();
      return {};
    }
    auto* n =
        detail::throw_if_out_of_memory([&] { return new detail::cancellation_callback_node<D>(std::forward<F>(f)); });
    if (!state_->try_link(n)) {
      n->invoke();
      delete n;  // never shared
      return {};
    }
    return cancellation_registration{state_, n};
  }

#if THREAD_SYSTEM_HAS_STOP_TOKEN
  /// A std::stop_token whose stop is requested when this state is cancelled
  /// (after this state's callbacks ran). Every call on one state returns a
  /// token of the same std::stop_source. none() gives a default
  /// std::stop_token (stop_possible() == false).
  [[nodiscard]] std::stop_token get_stop_token() const {
    if (state_ == nullptr) return {};
    return detail::throw_if_out_of_memory([this] { return state_->stop_token(); });
  }
#endif

  /// True when both tokens view the same state (or both have none).
  friend bool operator==(const cancellation_token& a, const cancellation_token& b) noexcept {
    return a.state_ == b.state_;
  }

 private:
  friend class cancellation_source;
  explicit cancellation_token(std::shared_ptr<detail::cancellation_state> s) noexcept : state_(std::move(s)) {}

  std::shared_ptr<detail::cancellation_state> state_;  // null: no state (default, none())
};

/// Owns (shares) a cancellation state and is the side that cancels.
/// Copyable like std::stop_source: copies cancel the same state.
class cancellation_source {
 public:
  /// A new, uncancelled state.
  cancellation_source()
      : state_(detail::throw_if_out_of_memory([] { return std::make_shared<detail::cancellation_state>(); })) {}

  /// A new state cancelled as soon as any of `parents` is (at once if one
  /// already is). Tokens of none() are ignored.
  template <typename... Tokens>
  [[nodiscard]] static cancellation_source linked(const Tokens&... parents)
    requires converts_to_each<const cancellation_token&, Tokens...>
  {
    return detail::throw_if_out_of_memory([&] {
      cancellation_source s;
      s.state_->parent_links_.reserve(sizeof...(Tokens));
      (s.link_to(parents), ...);
      return s;
    });
  }
  /// As linked(parents...), for a list of tokens.
  [[nodiscard]] static cancellation_source linked(std::initializer_list<cancellation_token> parents) {
    return detail::throw_if_out_of_memory([&] {
      cancellation_source s;
      s.state_->parent_links_.reserve(parents.size());
      for (const cancellation_token& p : parents) s.link_to(p);
      return s;
    });
  }

#if THREAD_SYSTEM_HAS_STOP_TOKEN
  /// A new state cancelled when `st` has stop requested (at once if it
  /// already has). The bridge is a std::stop_callback held by the state.
  [[nodiscard]] static cancellation_source from_stop_token(const std::stop_token& st) {
    return detail::throw_if_out_of_memory([&] {
      cancellation_source s;
      std::weak_ptr<detail::cancellation_state> w = s.state_;
      auto fire = [w]() noexcept {
        if (auto live = w.lock()) live->request_cancel();
      };
      s.state_->std_link_ = std::make_unique<detail::std_stop_link<decltype(fire)>>(st, std::move(fire));
      return s;
    });
  }
#endif

  /// A token viewing this source's state.
  [[nodiscard]] cancellation_token token() const noexcept { return cancellation_token{state_}; }

  /// Cancels the state and runs its callbacks (see the header). Returns true
  /// when this call cancelled it.
  bool cancel() const noexcept {
    const std::shared_ptr<detail::cancellation_state> keep = state_;  // a callback may destroy *this
    return keep != nullptr && keep->request_cancel();  // a moved-from source has no state: nothing to cancel
  }

  /// True once the state has been cancelled (false for a moved-from source).
  [[nodiscard]] bool is_cancelled() const noexcept { return state_ != nullptr && state_->is_cancelled(); }

 private:
  void link_to(const cancellation_token& parent) {
    if (!parent.can_be_cancelled()) return;
    // The parent's callback holds only a weak reference: the child may die
    // first, and its destructor then unregisters this callback.
    std::weak_ptr<detail::cancellation_state> w = state_;
    // The slot first (the factories reserved room: no reallocation), so that
    // nothing can throw once the registration is taken apart below.
    detail::parent_link& slot = state_->parent_links_.emplace_back();
    cancellation_registration r = parent.register_callback([w]() noexcept {
      if (auto live = w.lock()) live->request_cancel();
    });
    if (r.node_ == nullptr) return;  // the parent was cancelled: so is this state, nothing to keep
    slot.parent = r.state_;          // weak: the child does not keep its parent alive
    slot.node = std::exchange(r.node_, nullptr);
  }

  std::shared_ptr<detail::cancellation_state> state_;
};

inline cancellation_token cancellation_token::create_linked(std::initializer_list<cancellation_token> parents) {
  return cancellation_source::linked(parents).token();
}

#if THREAD_SYSTEM_HAS_STOP_TOKEN
inline cancellation_token cancellation_token::from_stop_token(const std::stop_token& st) {
  return cancellation_source::from_stop_token(st).token();
}
#endif

}  // namespace thread_system
