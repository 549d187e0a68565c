#include "thread_system/core/thread_base.hpp"

#include <future>
#include <system_error>

#include "thread_system/detail/thread_naming.hpp"

namespace thread_system {

thread_base::thread_base(std::string name) : name_(std::move(name)) {}

thread_base::~thread_base() {
  // A derived class should already have stopped us; this join keeps the
  // std::thread destructor from terminating if it did not.
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    {
      std::lock_guard lock(mutex_);
      stop_requested_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

result<void> thread_base::start() {
  if (thread_.joinable()) return make_error(error_code::already_started, "thread_base '" + name_ + "' is running");
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = false;
    wake_requested_ = false;
  }
  std::promise<result<void>> started;
  auto started_future = started.get_future();
  try {
    thread_ = std::thread([this, &started] {
      (void)detail::set_current_thread_name(name_);
      auto r = before_start();
      const bool ok = r.has_value();
      if (ok) running_.store(true, std::memory_order_release);  // pairs with is_running()
      started.set_value(std::move(r));
      if (ok) run();
    });
  } catch (const std::system_error& e) {
    return make_error(error_code::resource_exhausted, std::string("thread_base: cannot create thread: ") + e.what());
  }
  auto r = started_future.get();
  if (!r) thread_.join();  // before_start() failed: the thread has already returned
  return r;
}

void thread_base::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      auto ready = [this] { return stop_requested_ || wake_requested_ || should_continue_work(); };
      if (interval_) {
        cv_.wait_for(lock, *interval_, ready);
      } else {
        cv_.wait(lock, ready);
      }
      if (stop_requested_ && !should_continue_work()) break;
      wake_requested_ = false;
    }
    if (auto r = do_work(); !r) on_error(r.error());
    rounds_.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  if (auto r = after_stop(); !r) on_error(r.error());
  running_.store(false, std::memory_order_release);  // pairs with is_running()
}

result<void> thread_base::stop() {
  if (!thread_.joinable()) return {};
  if (thread_.get_id() == std::this_thread::get_id()) {
    return make_error(error_code::invalid_argument, "thread_base::stop() called from its own thread");
  }
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
  }
  cv_.notify_all();
  thread_.join();
  return {};
}

void thread_base::wake() {
  {
    std::lock_guard lock(mutex_);
    wake_requested_ = true;
  }
  cv_.notify_one();
}

void thread_base::set_wake_interval(std::optional<std::chrono::milliseconds> interval) {
  {
    std::lock_guard lock(mutex_);
    interval_ = interval;
  }
  cv_.notify_one();
}

std::optional<std::chrono::milliseconds> thread_base::get_wake_interval() const {
  std::lock_guard lock(mutex_);
  return interval_;
}

bool thread_base::is_running() const noexcept {
  return running_.load(std::memory_order_acquire);  // pairs with the stores in start()/run()
}

std::uint64_t thread_base::work_rounds() const noexcept {
  return rounds_.load(std::memory_order_relaxed);  // statistics only
}

}  // namespace thread_system
