#include "thread_system/core/thread_base.hpp"

#include <exception>
#include <string>
#include <utility>

#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/thread_attributes.hpp"

namespace thread_system {

namespace {

// The thread_base whose loop runs on this thread (nullptr elsewhere): lets
// start()/stop() called from a hook answer without touching the thread
// handle that another thread may be assigning.
thread_local const thread_base* tl_current = nullptr;
// Set when the thread_base whose loop runs on this thread was destroyed by a
// hook of its own (the last reference to it dropped inside do_work(), say):
// from then on the loop touches nothing of the object and the thread ends.
thread_local bool tl_destroyed = false;

// `job_failed` naming the hook and the exception that escaped it. Never
// throws: out of memory, the error carries only its code.
error hook_exception(const std::string& name, const char* hook, std::exception_ptr e) noexcept {
  return make_error_nothrow(error_code::job_failed,
                            [&] {
                              std::string what = "a non-standard exception";
                              try {
                                std::rethrow_exception(e);
                              } catch (const std::exception& ex) {
                                what = ex.what();
                              } catch (...) {
                              }
                              return "thread_base '" + name + "': " + hook + " threw: " + what;
                            })
      .value;
}

}  // namespace

thread_base::thread_base(std::string name, std::size_t stack_size)
    : name_(std::move(name)),
      stack_size_(stack_size),
      lifecycle_(detail::throw_if_out_of_memory([] { return std::make_shared<lifecycle_state>(); })) {}

thread_base::~thread_base() {
  // A derived class should already have stopped us (its hooks must not run
  // while it is destroyed); this stop keeps the thread from outliving the
  // object when it did not.
  if (tl_current != this) {
    (void)stop();
    return;
  }
  // Destroyed by a hook, on the thread itself: it cannot join itself. It is
  // detached (its resources go when it ends) and its loop returns as soon
  // as the hook does, touching nothing of this object (tl_destroyed). The
  // thread's after_stop() does not run: the object is gone. Nor is this
  // thread its thread any more: another object built at the same address
  // (by the hook, or by the allocator's next request) is not "called from
  // its own thread" (tl_current left pointing here refused its start() and
  // stop(), and its destructor detached its running thread). A stop() on
  // another thread may be waiting for this thread: it holds the thread's
  // handle itself then (thread_ is empty) and touches nothing of the
  // object after its join.
  tl_destroyed = true;
  tl_current = nullptr;
  if (thread_.joinable()) thread_.detach();
}

result<void> thread_base::start() {
  if (tl_current == this) {
    return make_error_nothrow(error_code::already_started,
                              [&] { return "thread_base '" + name_ + "': start() called from its own thread"; });
  }
  std::unique_lock life(lifecycle_->mutex);
  if (thread_.joinable())
    return make_error_nothrow(error_code::already_started, [&] { return "thread_base '" + name_ + "' is running"; });
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = false;
    // wake_requested_ is kept: a wake() while no thread ran asks for a
    // round of the next one (it was dropped here, silently).
    phase_ = start_phase::starting;
    start_error_.reset();
  }
  auto t = detail::os_thread::start([this] { thread_main(); }, stack_size_);
  if (!t) {
    std::lock_guard lock(mutex_);
    phase_ = start_phase::idle;
    return make_error_nothrow(t.error().code(), [&] {
      return "thread_base '" + name_ + "': cannot create its thread: " + t.error().message();
    });
  }
  thread_ = std::move(*t);
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return phase_ != start_phase::starting; });
  if (phase_ == start_phase::failed) {
    // Set with phase_ = failed by the thread; the fallback is never taken.
    error e = start_error_ ? std::move(*start_error_) : error{error_code::job_failed, "start failed"};
    start_error_.reset();
    phase_ = start_phase::idle;
    lock.unlock();
    thread_.join();  // before_start() failed: the thread is returning
    return e;
  }
  // Started: the thread may destroy the object in its first hook (allowed,
  // see the header), so it waits for this confirmation before it runs one,
  // and it needs mutex_ to see it: with the lifecycle mutex released first and
  // mutex_ last, start() touches nothing of the object once the thread can
  // go on. (Without the hand-off, a do_work() that destroyed the object at
  // once could free it before start() had stored the thread in thread_, or
  // before the unlocks here.)
  phase_ = start_phase::confirmed;
  cv_.notify_all();
  life.unlock();
  lock.unlock();
  return {};
}

void thread_base::thread_main() {
  tl_current = this;
  tl_destroyed = false;
  (void)detail::set_current_thread_name(name_);  // a convenience: failure changes nothing
  std::optional<error> failure;
  try {
    if (auto r = before_start(); !r) failure = r.error();
  } catch (...) {
    failure = hook_exception(name_, "before_start()", std::current_exception());
  }
  if (tl_destroyed) {
    // before_start() destroyed the object; start() still waits on its
    // condition variable, now destroyed too: outside the contract (the
    // object was destroyed during a call of one of its members). Leave.
    tl_current = nullptr;
    return;
  }
  const bool ok = !failure.has_value();
  {
    std::lock_guard lock(mutex_);
    if (ok) {
      running_.store(true, std::memory_order_release);  // pairs with is_running()
      phase_ = start_phase::started;
    } else {
      start_error_ = std::move(failure);
      phase_ = start_phase::failed;
    }
  }
  cv_.notify_all();  // start() waits for the phase
  if (ok) {
    {
      // start() is done with the object once it confirms (see there).
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return phase_ == start_phase::confirmed; });
    }
    run();
  }
  tl_current = nullptr;  // (run() returned early if a hook destroyed the object)
}

bool thread_base::continue_work_locked() {
  // Caller holds mutex_.
  try {
    return should_continue_work();
  } catch (...) {
    continue_error_ = hook_exception(name_, "should_continue_work()", std::current_exception());
    return false;
  }
}

void thread_base::report(const error& e) noexcept {
  try {
    on_error(e);
  } catch (...) {  // the handler itself threw: nowhere left to report
  }
}

void thread_base::run() {
  for (;;) {
    std::optional<error> pending;
    bool leave = false;
    {
      std::unique_lock lock(mutex_);
      auto ready = [this] { return stop_requested_ || wake_requested_ || continue_work_locked(); };
      if (interval_) {
        // Saturating (detail/duration.hpp): a negative interval is zero, a
        // huge one means "only when woken"; wait_for() would overflow.
        const auto until =
            detail::saturating_add(std::chrono::steady_clock::now(), detail::to_clock_duration(*interval_));
        cv_.wait_until(lock, until, ready);
      } else {
        cv_.wait(lock, ready);
      }
      leave = stop_requested_ && !continue_work_locked();
      wake_requested_ = false;
      pending.swap(continue_error_);
    }
    if (pending) report(*pending);
    if (tl_destroyed) return;  // on_error() destroyed the object
    if (leave) break;
    if (!run_hook(&thread_base::do_work, "do_work()")) return;  // the object was destroyed
    rounds_.fetch_add(1, std::memory_order_relaxed);            // statistics only
  }
  if (!run_hook(&thread_base::after_stop, "after_stop()")) return;  // the object was destroyed
  running_.store(false, std::memory_order_release);                 // pairs with is_running()
}

bool thread_base::run_hook(result<void> (thread_base::*hook)(), const char* hook_name) {
  std::optional<error> failure;
  try {
    if (auto r = (this->*hook)(); !r) failure = std::move(r).error();
  } catch (...) {
    // The hook may have destroyed the object before it threw: no name_ then.
    if (!tl_destroyed) failure = hook_exception(name_, hook_name, std::current_exception());
  }
  // Destroyed by the hook: what it returned or threw has no object left to
  // go to (on_error() is a member), and nothing of the object is touched.
  if (tl_destroyed) return false;
  if (failure) report(*failure);
  return !tl_destroyed;  // on_error() may have destroyed it too
}

result<void> thread_base::stop() {
  if (tl_current == this) {
    return make_error(error_code::invalid_argument, "thread_base::stop() called from its own thread");
  }
  // A hook may destroy the object while this call waits for the thread
  // (after_stop() runs inside it): after the join, only what is held here -
  // the lifecycle state and the thread's handle - is touched.
  const std::shared_ptr<lifecycle_state> lifecycle = lifecycle_;
  std::lock_guard life(lifecycle->mutex);
  if (!thread_.joinable()) return {};
  detail::os_thread joined = std::move(thread_);
  {
    // Notified under the lock: once it is released the thread may end the
    // loop and destroy the object, condition variable included.
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
    cv_.notify_all();
  }
  joined.join();
  return {};
}

void thread_base::wake() {
  {
    std::lock_guard lock(mutex_);
    wake_requested_ = true;
  }
  cv_.notify_all();  // start() may wait on the same condition variable
}

void thread_base::set_wake_interval(std::optional<std::chrono::milliseconds> interval) {
  {
    std::lock_guard lock(mutex_);
    interval_ = interval;
  }
  cv_.notify_all();
}

std::optional<std::chrono::milliseconds> thread_base::get_wake_interval() const {
  std::lock_guard lock(mutex_);
  return interval_;
}

bool thread_base::is_running() const noexcept {
  return running_.load(std::memory_order_acquire);  // pairs with the stores in thread_main()/run()
}

std::uint64_t thread_base::work_rounds() const noexcept {
  return rounds_.load(std::memory_order_relaxed);  // statistics only
}

}  // namespace thread_system
