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
// Threading: every public member may be called from any thread at any time,
// concurrently. start() and stop() are serialised: two start() calls on one
// object start one thread (the other returns `already_started`); a stop()
// that meets a start() in progress waits for it and then stops. Called from
// the object's own thread (inside a hook), stop() returns `invalid_argument`
// and start() `already_started` instead of deadlocking. should_continue_work()
// is called with an internal mutex held: keep it short and do not call
// members of this object from it. A derived class must call stop() in its
// own destructor: the hooks are virtual and must not run while the derived
// part is being destroyed. Everything the thread did is visible after stop()
// returns. A hook may destroy the object itself (the last shared_ptr to it
// dropped inside do_work(), on_error() or after_stop()) while no other
// thread is inside one of its members - except the stop() that ended the
// loop, for after_stop() (and the on_error() it calls): after_stop() runs
// while that stop() waits for the thread, and that stop() then returns {}
// touching nothing of the object. The thread ends as soon as the hook
// returns, touching nothing of the object (no further hook runs;
// after_stop() not either; an error the destroying hook returns or throws
// is dropped, with no object left to report it to); with no stop()
// waiting, it is detached. Destroying it from before_start(), or while
// another thread is inside any other member call, is outside the contract.
//
// Exceptions from the hooks are reported, never fatal:
//   * before_start() throwing: start() returns `job_failed` with the
//     exception's text (the thread is joined, nothing runs);
//   * do_work() or after_stop() throwing: on_error() receives `job_failed`
//     with the text, and the loop goes on (after_stop(): the thread ends);
//   * should_continue_work() throwing counts as `false`, reported the same way;
//   * on_error() throwing: the exception is dropped.
//
// Resources: the thread is created with the stack size given to the
// constructor (0: the platform default; a size below 64 KiB gets 64 KiB of usable stack,
// detail/os_thread.hpp); when the OS refuses a thread,
// start() returns `resource_exhausted` (also for a stack larger than the
// address space or its limits leave), and `invalid_argument` for a stack
// size no mapping can have (above PTRDIFF_MAX, also once rounded up to whole
// pages) or that the platform rejects
// as such.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/os_thread.hpp"

namespace thread_system {

/// A named thread with a start/stop lifecycle that calls the virtual hooks below in a loop (see the header comment).
class thread_base {
 public:
  /// `stack_size` in bytes; 0 is the platform default (see os_thread.hpp).
  /// Out of memory: error_exception{resource_exhausted}.
  explicit thread_base(std::string name = "thread_base", std::size_t stack_size = 0);
  /// Stops the thread if it still runs; a derived class must already have called stop() in its own destructor.
  virtual ~thread_base();
  /// Not copyable.
  thread_base(const thread_base&) = delete;
  /// Not copyable.
  thread_base& operator=(const thread_base&) = delete;

  /// Starts the thread and waits for before_start(). Returns its error (or
  /// `job_failed` when it threw), `already_started` when running, or
  /// `resource_exhausted` when the thread cannot be created.
  result<void> start();
  /// Asks the loop to finish and joins. Idempotent; `invalid_argument` if
  /// called from the thread itself.
  result<void> stop();
  /// Requests one do_work() round as soon as possible. Called while the
  /// thread is not running (before start(), after stop()), the request is
  /// kept: the next start()'s thread runs a round at once.
  void wake();

  /// With an interval, do_work() also runs every `interval` without wake().
  /// A negative interval counts as zero; one too long for the steady clock
  /// means do_work() runs only when woken (never undefined behaviour). A
  /// new interval applies from the next round: wake() starts one at once.
  void set_wake_interval(std::optional<std::chrono::milliseconds> interval);
  /// The current wake interval; empty when do_work() runs only when woken.
  [[nodiscard]] std::optional<std::chrono::milliseconds> get_wake_interval() const;

  /// True from a successful before_start() until after_stop() has returned.
  [[nodiscard]] bool is_running() const noexcept;
  /// The name given at construction. The OS thread name where supported,
  /// shortened to what the OS keeps (15 bytes on Linux; detail/thread_attributes.hpp).
  [[nodiscard]] const std::string& get_name() const noexcept { return name_; }
  /// do_work() rounds completed so far.
  [[nodiscard]] std::uint64_t work_rounds() const noexcept;

 protected:
  /// Runs on the new thread before the loop; an error (or exception) aborts start(), which returns it. Default: no-op.
  virtual result<void> before_start() { return {}; }
  /// Polled under an internal mutex while the loop waits: true runs do_work() without wake() and keeps the loop
  /// going after stop(). Default: false.
  virtual bool should_continue_work() const { return false; }
  /// One round of work; an error (or exception) goes to on_error() and the loop goes on. Default: no-op.
  virtual result<void> do_work() { return {}; }
  /// Runs on the thread after the loop has left; an error (or exception) goes to on_error(). Default: no-op.
  virtual result<void> after_stop() { return {}; }
  /// Receives errors of do_work() and after_stop() (and what they throw, as
  /// `job_failed`). Default: ignore.
  virtual void on_error(const error& /*e*/) {}

 private:
  void thread_main();
  void run();
  [[nodiscard]] bool continue_work_locked();
  void report(const error& e) noexcept;
  // Runs do_work() or after_stop() and reports its error; false when a hook
  // destroyed the object (nothing of it may be touched any more).
  [[nodiscard]] bool run_hook(result<void> (thread_base::*hook)(), const char* hook_name);

  // starting -> started (before_start() succeeded) -> confirmed (start()
  // is done with the object: the thread may run the other hooks), or
  // starting -> failed -> idle.
  enum class start_phase { idle, starting, started, confirmed, failed };

  std::string name_;
  std::size_t stack_size_;
  // What a stop() needs after its join, when a hook may have destroyed the
  // object meanwhile (the lock it releases): the stop() keeps a reference.
  struct lifecycle_state {
    std::mutex mutex;  // serialises start(), stop() and the destructor
  };
  std::shared_ptr<lifecycle_state> lifecycle_;
  detail::os_thread thread_;  // guarded by lifecycle_->mutex
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_requested_ = false;                        // guarded by mutex_
  bool wake_requested_ = false;                        // guarded by mutex_
  std::optional<std::chrono::milliseconds> interval_;  // guarded by mutex_
  start_phase phase_ = start_phase::idle;              // guarded by mutex_: start() waits on cv_ for before_start()
  std::optional<error> start_error_;                   // guarded by mutex_
  std::optional<error> continue_error_;                // guarded by mutex_: should_continue_work() threw
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> rounds_{0};
};

}  // namespace thread_system
