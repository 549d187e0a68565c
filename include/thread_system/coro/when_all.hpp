// when_all: awaits several tasks in parallel (part of the coroutine API of
// coro/task.hpp, which includes this header).
//
//   auto [a, b] = co_await when_all(half(pool), half(pool));
//   std::vector<int> all = co_await when_all(std::move(tasks));
//
// Contract:
//   * when_all(tasks...) / when_all(vector<task<T>>) runs the children in
//     parallel: awaited inside a resumption of a pool (after schedule(), a
//     sleep, or in a task spawned on it), every child but the first is
//     pushed to that pool and the first runs on this thread; from the first
//     child the pool refuses (its stop() has begun, or out of memory), that
//     child and the rest are not offered to it again but start on this
//     thread as below, after the first. Elsewhere -
//     after sync_wait() started the chain on its own thread, or after a
//     future resumed it inside the job that completed it (on a worker, but
//     not in a resumption: co_await pool.schedule() first to fork there) -
//     they start one after another on this thread, each until its first
//     suspension: the first, then the others in order once it suspends,
//     started by the library's loop that runs the chain (nested when_alls
//     use constant stack).
//   * When a coroutine of another type drives the chain (it may resume it
//     by hand): a task of that chain awaiting a when_all starts the others
//     first, inside the co_await, and the first after them (a few stack
//     frames per nested when_all). Such a coroutine awaiting a when_all
//     itself starts every child inside the co_await (the others first, on a
//     pool pushed to it, then the first); when all have finished by then it
//     goes on from the co_await at the depth it had, so a loop of such
//     awaits uses constant stack whatever the compiler's flags; otherwise
//     the thread that finishes the last child resumes it.
//     The awaiter resumes once all have finished, with their results in
//     order (a tuple; void children give std::monostate; a vector for the
//     range form); if any failed, the first failure in order is rethrown
//     after all finished. A child abandoned abandons the when_all once the
//     others have finished.
//   * The children get the awaiting task's token: this_job::token() and
//     cancellation_point() inside them see it.
//   * A when_all awaitable is awaited once: a second co_await of it throws
//     error_exception{invalid_argument} (its children have run).
//   * Memory: when_all(tasks...) allocates nothing. when_all(vector)
//     allocates its per-child slots and the room for its results when it is
//     called; out of memory it throws error_exception{resource_exhausted}
//     then, before any child starts (the tasks are destroyed unrun), and
//     the await itself allocates nothing.
//
// Thread-safety: the children finish on any threads; the last to finish
// resumes the awaiter (acq_rel on the count, so every child's result is
// visible to it).
#pragma once

#include <array>
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "thread_system/coro/coro_base.hpp"
#include "thread_system/coro/task.hpp"
#include "thread_system/detail/functional.hpp"

namespace thread_system {
namespace detail {

template <typename T>
using when_all_value_t = std::conditional_t<
    std::is_void_v<T>, std::monostate,
    std::conditional_t<std::is_reference_v<T>, std::reference_wrapper<std::remove_reference_t<T>>, T>>;

template <typename T>
when_all_value_t<T> take_for_when_all(task_promise<T>& p) {
  if constexpr (std::is_void_v<T>) {
    p.take();
    return {};
  } else if constexpr (std::is_reference_v<T>) {
    return std::ref(p.take());
  } else {
    return p.take();
  }
}

// The counting part of when_all (not a template). Its deferred_start
// base is the node that starts the children after the first off a pool.
class when_all_core : deferred_start {
 public:
  when_all_core() = default;
  when_all_core(const when_all_core&) = delete;
  when_all_core& operator=(const when_all_core&) = delete;

 protected:
  // Its children ran once: a second co_await is refused (invalid_argument,
  // as for a finished task), never a resumption of finished frames.
  // (await_ready() marks it: an empty when_all never suspends.)
  bool awaited_ = false;
  void mark_awaited() {
    if (awaited_) throw error_exception(error{error_code::invalid_argument, "when_all() awaited a second time"});
    awaited_ = true;
  }
  class slot final : public coro_waiter {
   public:
    slot() noexcept = default;
    explicit slot(when_all_core* core) noexcept : core_(core) {}
    std::coroutine_handle<> on_complete() noexcept override { return core_->child_done(); }
    void on_abandon() noexcept override {
      // relaxed: published by the acq_rel decrement in child_done().
      core_->abandoned_.store(true, std::memory_order_relaxed);
      // The last child then abandons the parent instead of returning it.
      (void)core_->child_done();
    }

   private:
    when_all_core* core_ = nullptr;
  };

  // A task<T> awaiting: starts the children (frames[i] with promises[i]
  // waiting on slots[i]); returns the one to run on this thread. `take` is the derived class's
  // deferred_start::take (take_deferred() and its frames).
  template <library_promise P>
  std::coroutine_handle<> start(std::coroutine_handle<P> parent, std::size_t n, auto&& child_frame,
                                auto&& child_promise, slot* slots, decltype(detail::deferred_start::take) take_fn) {
    parent_ = parent;
    const cancellation_token* token = token_of(parent);
    // A task whose chain a coroutine of another type drives (it may resume
    // it by hand, and destroy its own frame once resume() returns) gets its
    // children started before await_suspend() returns, not deferred to a
    // resume_loop() that may not be running it.
    parent_promise_ = &parent.promise();
    const bool foreign_driven = parent_promise_->foreign_driven();
    // relaxed: the children are started after this, through the pool's
    // hand-off or on this thread.
    remaining_.store(n, std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i) {
      promise_base& cp = child_promise(i);
      cp.waiter = &slots[i];
      cp.set_chain(token, foreign_driven);
    }
    const std::coroutine_handle<> first = child_frame(0);
    const resume_target* target = t_current_target;
    if (target == nullptr && !foreign_driven && n > 1 && n - 1 <= max_deferred) {
      // Not on a pool: the resume_loop() running this chain (only the
      // library resumes a chain no foreign coroutine drives) starts the
      // others once the first child suspends, so nested when_alls use
      // constant stack.
      next_deferred_ = 1;
      take = take_fn;
      if (defer_start(*this)) return transfer(parent, first);
    }
    for (std::size_t i = 1; i < n; ++i) {
      if (target != nullptr) {
        result<void> pushed =
            target->push_job(job_function(resume_job{child_frame(i), &child_promise(i), nullptr, *target}));
        if (pushed) continue;
        // Refused (the pool is stopping, or out of memory): this child and
        // the rest start on this thread. Deferred to the resume_loop()
        // running the chain, as off a pool, so that nested when_alls whose
        // pushes are refused still use constant stack (started here, each
        // level nested a loop in its parent's await_suspend(): a stack
        // overflow in a deep recursion once stop() had begun).
        if (!foreign_driven) {
          next_deferred_ = static_cast<std::uint32_t>(i);  // used only when n - 1 <= max_deferred (below)
          take = take_fn;
          if (n - 1 <= max_deferred && defer_start(*this)) return transfer(parent, first);
        }
      }
      // The pool refused with no resume_loop() here to defer to, or a
      // foreign coroutine drives the parent, or no resume_loop() runs here:
      // start it now (it runs until it first suspends). The first child has
      // not started, so the parent cannot be resumed yet.
      resume_scope scope(token, target);
      resume_loop(child_frame(i));
    }
    return transfer(parent, first);
  }

  // A coroutine of another type awaiting (it may be resumed by hand,
  // outside any resume_loop()): every child starts inside this call, the
  // others first, then the first, each in a resume loop of its own (or, on
  // a pool, the others pushed to it). If they have all finished by then,
  // the awaiter goes on from the co_await at the depth it had (false: not
  // suspended), as task<T>'s awaiter does for such a coroutine; a transfer
  // back into it from the last child would nest one resume() deeper per
  // co_await of a loop wherever the compiler does not make symmetric
  // transfer a tail call. Otherwise the thread that finishes the last child
  // resumes it (child_done()).
  template <typename P>
  bool start_foreign(std::coroutine_handle<P> parent, std::size_t n, auto&& child_frame, auto&& child_promise,
                     slot* slots) noexcept {
    parent_ = parent;  // parent_promise_ stays null: child_done() tells the cases apart by it
    // relaxed: the children are started after this, through the pool's
    // hand-off or on this thread.
    remaining_.store(n, std::memory_order_relaxed);
    foreign_state_.store(foreign_starting, std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i) {
      promise_base& cp = child_promise(i);
      cp.waiter = &slots[i];
      cp.set_chain(nullptr, true);
    }
    const resume_target* target = t_current_target;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t k = (i + 1) % n;  // the others, then the first
      if (target != nullptr && k != 0) {
        result<void> pushed =
            target->push_job(job_function(resume_job{child_frame(k), &child_promise(k), nullptr, *target}));
        if (pushed) continue;
      }
      const resume_scope scope(nullptr, target);
      resume_loop_reporting(child_frame(k), nullptr);
    }
    std::uint8_t seen = foreign_starting;
    // Success (release): the last child_done() on another thread resumes
    // `parent`, whose suspension is complete from here; nothing of this
    // object is touched after it. Failure (acquire): pairs with that
    // exchange - every child's outcome is visible to await_resume().
    return foreign_state_.compare_exchange_strong(seen, foreign_suspended, std::memory_order_release,
                                                  std::memory_order_acquire);
  }

  // The core whose node `node` is (for the derived class's take function).
  static when_all_core& of(deferred_start& node) noexcept { return static_cast<when_all_core&>(node); }

  // For the derived class's take function: the index of the next deferred
  // child, out of `n`, and its chain's token.
  std::size_t take_deferred(std::size_t n, const cancellation_token*& token, bool& last) noexcept {
    const std::size_t i = next_deferred_++;
    last = i + 1 == n;
    token = parent_promise_->token();  // deferred only below a task<T> (see start())
    return i;
  }

  [[nodiscard]] bool parent_abandoned() const noexcept { return foreign_abandoned_; }

 private:
  std::coroutine_handle<> child_done() noexcept {
    // acq_rel: the last child sees every child's result (and abandoned_).
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return std::noop_coroutine();
    if (parent_promise_ == nullptr) return foreign_done();
    if (!abandoned_.load(std::memory_order_relaxed)) return parent_;
    abandon(parent_promise_);  // destroys this object: nothing after
    return std::noop_coroutine();
  }

  // The last child of a when_all a foreign coroutine awaits (start_foreign()).
  std::coroutine_handle<> foreign_done() noexcept {
    const std::coroutine_handle<> parent = parent_;  // before the exchange: this object may go after it
    const bool abandoned = abandoned_.load(std::memory_order_relaxed);
    foreign_abandoned_ = abandoned;  // published by the exchange below
    // acq_rel: release publishes the children's outcomes (and the flag
    // above) to start_foreign()'s failed CAS; acquire pairs with its
    // successful one.
    if (foreign_state_.exchange(foreign_done_state, std::memory_order_acq_rel) == foreign_starting) {
      return std::noop_coroutine();  // start_foreign() is still running: it goes on with `parent`
    }
    if (!abandoned) return parent;
    resume_loop_reporting(parent, nullptr);
    return std::noop_coroutine();
  }

  // Children started by deferred_start (the index of the next is 32 bits,
  // so that the fields below fit with the flags in one word).
  static constexpr std::size_t max_deferred = UINT32_MAX - 1;

  std::atomic<std::size_t> remaining_{0};
  std::coroutine_handle<> parent_;
  promise_base* parent_promise_ = nullptr;
  std::uint32_t next_deferred_ = 0;  // the next child the deferred_start base starts
  std::atomic<bool> abandoned_{false};
  bool foreign_abandoned_ = false;
  // start_foreign()'s hand-shake with the last child (one byte: it fits
  // beside the flags above, so a task's when_all frame keeps its size).
  enum : std::uint8_t { foreign_starting, foreign_suspended, foreign_done_state };
  std::atomic<std::uint8_t> foreign_state_{foreign_starting};
};

template <typename... Ts>
class when_all_awaitable final : when_all_core {
 public:
  explicit when_all_awaitable(task<Ts>... tasks) : tasks_(std::move(tasks)...) {
    std::apply(
        [](const auto&... t) {
          if ((!t.startable() || ...))
            throw error_exception(
                error{error_code::invalid_argument, "when_all() of an empty or already awaited task"});
        },
        tasks_);
  }
  [[nodiscard]] bool await_ready() {
    mark_awaited();
    return sizeof...(Ts) == 0;
  }
  template <library_promise P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
    const std::array<std::coroutine_handle<>, sizeof...(Ts)> frames = child_frames();
    const std::array<promise_base*, sizeof...(Ts)> promises = prepare();
    return start(
        parent, sizeof...(Ts), [&](std::size_t k) { return frames[k]; },
        [&](std::size_t k) -> promise_base& { return *promises[k]; }, slots_.data(), &take_next);
  }
  // A coroutine of another type (see when_all_core::start_foreign()).
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> parent) noexcept {
    const std::array<std::coroutine_handle<>, sizeof...(Ts)> frames = child_frames();
    const std::array<promise_base*, sizeof...(Ts)> promises = prepare();
    return start_foreign(
        parent, sizeof...(Ts), [&](std::size_t k) { return frames[k]; },
        [&](std::size_t k) -> promise_base& { return *promises[k]; }, slots_.data());
  }
  std::tuple<when_all_value_t<Ts>...> await_resume() {
    if (parent_abandoned()) throw_abandoned();
    std::apply([](const auto&... t) { (rethrow(t), ...); }, tasks_);
    return std::apply(
        [](const auto&... t) {
          return std::tuple<when_all_value_t<Ts>...>(
              take_for_when_all(task_access<typename std::remove_cvref_t<decltype(t)>::value_type>::promise(t))...);
        },
        tasks_);
  }

 private:
  template <typename T>
  static void rethrow(const task<T>& t) {
    task_access<T>::promise(t).rethrow_if_failed();
  }

  // Points the slots at this core; the children's promises.
  std::array<promise_base*, sizeof...(Ts)> prepare() noexcept {
    for (std::size_t i = 0; i < sizeof...(Ts); ++i) slots_[i] = slot(this);
    std::array<promise_base*, sizeof...(Ts)> promises;
    std::size_t i = 0;
    std::apply(
        [&](const auto&... t) {
          ((promises[i++] = &task_access<typename std::remove_cvref_t<decltype(t)>::value_type>::promise(t)), ...);
        },
        tasks_);
    return promises;
  }

  [[nodiscard]] std::array<std::coroutine_handle<>, sizeof...(Ts)> child_frames() const noexcept {
    return std::apply(
        [](const auto&... t) {
          return std::array<std::coroutine_handle<>, sizeof...(Ts)>{
              task_access<typename std::remove_cvref_t<decltype(t)>::value_type>::frame(t)...};
        },
        tasks_);
  }

  static std::coroutine_handle<> take_next(detail::deferred_start& node, const cancellation_token*& token,
                                           bool& last) noexcept {
    auto& self = static_cast<when_all_awaitable&>(of(node));
    return self.child_frames()[self.take_deferred(sizeof...(Ts), token, last)];
  }

  std::tuple<task<Ts>...> tasks_;
  std::array<slot, sizeof...(Ts)> slots_{};
};

template <typename T>
class when_all_range_awaitable final : when_all_core {
 public:
  // Everything the await needs is allocated here, before any child starts:
  // the slots and (for a value type) the result vector's room, so that
  // await_resume() allocates nothing and a result is never lost to memory.
  explicit when_all_range_awaitable(std::vector<task<T>> tasks) : tasks_(std::move(tasks)) {
    for (const auto& t : tasks_) {
      if (!t.startable()) {
        throw error_exception(error{error_code::invalid_argument, "when_all() of an empty or already awaited task"});
      }
    }
    try {
      slots_.resize(tasks_.size());
      if constexpr (!std::is_void_v<T>) results_.reserve(tasks_.size());
    } catch (const std::bad_alloc&) {
      throw error_exception(make_error(error_code::resource_exhausted, "no memory for when_all()'s slots").value);
    }
  }
  [[nodiscard]] bool await_ready() {
    mark_awaited();
    return tasks_.empty();
  }
  template <library_promise P>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
    for (auto& s : slots_) s = slot(this);
    return start(
        parent, tasks_.size(), [&](std::size_t k) { return task_access<T>::frame(tasks_[k]); },
        [&](std::size_t k) -> promise_base& { return task_access<T>::promise(tasks_[k]); }, slots_.data(), &take_next);
  }
  // A coroutine of another type (see when_all_core::start_foreign()).
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> parent) noexcept {
    for (auto& s : slots_) s = slot(this);
    return start_foreign(
        parent, tasks_.size(), [&](std::size_t k) { return task_access<T>::frame(tasks_[k]); },
        [&](std::size_t k) -> promise_base& { return task_access<T>::promise(tasks_[k]); }, slots_.data());
  }
  auto await_resume() {
    if (parent_abandoned()) throw_abandoned();
    for (const auto& t : tasks_) task_access<T>::promise(t).rethrow_if_failed();
    if constexpr (std::is_void_v<T>) {
      return;
    } else {
      // Within the room reserved by the constructor: no allocation.
      for (auto& t : tasks_) results_.push_back(take_for_when_all(task_access<T>::promise(t)));
      return std::move(results_);
    }
  }

 private:
  static std::coroutine_handle<> take_next(detail::deferred_start& node, const cancellation_token*& token,
                                           bool& last) noexcept {
    auto& self = static_cast<when_all_range_awaitable&>(of(node));
    return task_access<T>::frame(self.tasks_[self.take_deferred(self.tasks_.size(), token, last)]);
  }

  struct no_results {};
  using results_type = std::conditional_t<std::is_void_v<T>, no_results, std::vector<when_all_value_t<T>>>;

  std::vector<task<T>> tasks_;
  std::vector<slot> slots_;
  [[no_unique_address]] results_type results_;
};

}  // namespace detail

/// Awaits every task in parallel; the results in order (see the header).
template <typename... Ts>
[[nodiscard]] detail::when_all_awaitable<Ts...> when_all(task<Ts>... tasks) {
  return detail::when_all_awaitable<Ts...>(std::move(tasks)...);
}

/// Awaits every task of `tasks` in parallel; a vector of results in order
/// (nothing for task<void>).
template <typename T>
[[nodiscard]] detail::when_all_range_awaitable<T> when_all(std::vector<task<T>> tasks) {
  return detail::when_all_range_awaitable<T>(std::move(tasks));
}

}  // namespace thread_system
