// thread_base: a named thread with a start/stop lifecycle and hooks, for
// long-running services of your own (a poller, a flusher, a monitor).
//
//   class flusher : public thread_system::thread_base {
//    public:
//     flusher() : thread_base("flusher") { set_wake_interval(std::chrono::milliseconds(100)); }
//     ~flusher() override { (void)stop(); }          // stop before members die
//    protected:
//     result<void> do_work() override { flush(); return {}; }
//   };
//
// The loop, on the new thread:
//   before_start()                         (an error aborts start(), which returns it)
//   repeat:
//     sleep until wake() is called, the wake interval elapses,
//       should_continue_work() is true, or stop() is called
//     leave if stop() was called and should_continue_work() is false
//     do_work()                            (an error goes to on_error(); the loop goes on)
//   after_stop()
//
// Threading: start(), stop(), wake() and set_wake_interval() may be called
// from any thread except that stop() must not be called from the thread
// itself (it returns `invalid_argument`). should_continue_work() is called
// with an internal mutex held: keep it short and do not call members of this
// object from it. A derived class must call stop() in its own destructor:
// the hooks are virtual and must not run while the derived part is being
// destroyed. Everything the thread did is visible after stop() returns.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "thread_system/core/error.hpp"

namespace thread_system {

class thread_base {
 public:
  explicit thread_base(std::string name = "thread_base");
  virtual ~thread_base();
  thread_base(const thread_base&) = delete;
  thread_base& operator=(const thread_base&) = delete;

  /// Starts the thread and waits for before_start(). Returns its error, or
  /// `already_started` when running.
  result<void> start();
  /// Asks the loop to finish and joins. Idempotent; `invalid_argument` if
  /// called from the thread itself.
  result<void> stop();
  /// Requests one do_work() round as soon as possible.
  void wake();

  /// With an interval, do_work() also runs every `interval` without wake().
  void set_wake_interval(std::optional<std::chrono::milliseconds> interval);
  [[nodiscard]] std::optional<std::chrono::milliseconds> get_wake_interval() const;

  [[nodiscard]] bool is_running() const noexcept;
  [[nodiscard]] const std::string& get_name() const noexcept { return name_; }
  /// do_work() rounds completed so far.
  [[nodiscard]] std::uint64_t work_rounds() const noexcept;

 protected:
  virtual result<void> before_start() { return {}; }
  virtual bool should_continue_work() const { return false; }
  virtual result<void> do_work() { return {}; }
  virtual result<void> after_stop() { return {}; }
  /// Receives errors of do_work() and after_stop(). Default: ignore.
  virtual void on_error(const error& /*e*/) {}

 private:
  void run();

  std::string name_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_requested_ = false;                        // guarded by mutex_
  bool wake_requested_ = false;                        // guarded by mutex_
  std::optional<std::chrono::milliseconds> interval_;  // guarded by mutex_
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> rounds_{0};
};

}  // namespace thread_system
