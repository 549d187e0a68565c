// The process-wide default logger behind log_module and logger::handle().
#include "thread_system/logger/log_module.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>

#include "thread_system/logger/sinks/console_sink.hpp"

namespace thread_system {
namespace {

// Every logger the default has been, newest last: a stopped one is kept
// until exit, so a thread that loaded it just before stop() still writes to
// a live object (its call is then refused and counted by that logger).
struct default_loggers {
  std::mutex mutex;
  std::vector<std::unique_ptr<logger>> all;  // guarded by mutex
  std::atomic<logger*> current{nullptr};     // the running one, or null
  std::atomic<std::uint64_t> refused{0};     // calls refused while none ran
  logger* last = nullptr;                    // guarded by mutex: current, or the one stopped last
  bool exiting = false;                      // guarded by mutex: the exit handler ran; no new logger

  // Why a new default cannot start now, or nothing.
  [[nodiscard]] result<void> refusal_locked() const {
    if (current.load(std::memory_order_relaxed) != nullptr) {  // written only under mutex
      return make_error(error_code::already_started, "log_module: the default logger is already running");
    }
    if (exiting) return make_error(error_code::pool_stopped, "log_module: the process is exiting");
    return {};
  }

  // Makes `made` (built outside the mutex) the running default; on refusal
  // it stays with the caller, who destroys it after unlocking.
  result<void> install_locked(std::unique_ptr<logger>& made) {
    if (auto no = refusal_locked(); !no) return no;
    try {
      all.reserve(all.size() + 1);  // push_back below cannot throw
    } catch (const std::bad_alloc&) {
      return thread_system::detail::out_of_memory_error();
    }
    last = made.get();
    all.push_back(std::move(made));
    current.store(last, std::memory_order_release);  // pairs with the acquire in running()
    return {};
  }

  result<void> start_locked(std::vector<std::shared_ptr<log_sink>> sinks, logger_options options) {
    if (auto no = refusal_locked(); !no) return no;
    auto made = make_locked(std::move(sinks), std::move(options));
    if (!made) return made;
    // release: the constructed logger is visible to a thread that loads it
    // (pairs with the acquire in running()).
    current.store(last, std::memory_order_release);
    return {};
  }

  // Makes a logger the last one (not running as the default yet).
  result<void> make_locked(std::vector<std::shared_ptr<log_sink>> sinks, logger_options options) {
    try {
      all.reserve(all.size() + 1);  // push_back below cannot throw
      auto l = std::make_unique<logger>(std::move(sinks), std::move(options));
      last = l.get();
      all.push_back(std::move(l));
    } catch (const error_exception& e) {
      return thread_system::detail::error_of(e);
    } catch (const std::bad_alloc&) {
      return thread_system::detail::out_of_memory_error();
    }
    return {};
  }

  static std::vector<std::shared_ptr<log_sink>> console() { return {std::make_shared<console_sink>(stdout)}; }
  static logger_options console_options() {
    logger_options o;
    o.level = log_level::trace;  // every seed type passes; set_level() narrows it
    return o;
  }
};

// Never destroyed: a static destructor (or a detached thread) that logs
// after exit began still finds it, and its call is refused and counted
// instead of touching a destroyed object. The running logger is stopped at
// exit (std::atexit), so everything it accepted is written.
// Built in static storage (no allocation, so the noexcept entry points
// cannot fail) and never destroyed.
default_loggers& defaults() noexcept {
  alignas(default_loggers) static unsigned char storage[sizeof(default_loggers)];
  static default_loggers* const d = [] {
    auto* p = ::new (static_cast<void*>(storage)) default_loggers;
    (void)std::atexit([] {
      {
        std::lock_guard lock(defaults().mutex);
        defaults().exiting = true;  // handle() and start() start nothing after this
      }
      log_module::stop();
    });
    return p;
  }();
  return *d;
}

}  // namespace

namespace log_module {

namespace detail {
logger* running() noexcept {
  return defaults().current.load(std::memory_order_acquire);  // pairs with the release in start_locked()
}
void refuse_not_running() noexcept {
  defaults().refused.fetch_add(1, std::memory_order_relaxed);  // statistics only
}
}  // namespace detail

result<void> start() {
  return thread_system::detail::refuse_if_out_of_memory([]() -> result<void> {
    default_loggers& d = defaults();
    std::lock_guard lock(d.mutex);
    return d.start_locked(default_loggers::console(), default_loggers::console_options());
  });
}

result<void> start(std::vector<std::shared_ptr<log_sink>> sinks, logger_options options) {
  // The user's sinks and options (an error handler's captures) may run user
  // code as they are destroyed - and that code may call log_module: none of
  // them is destroyed under the mutex. A refusal found first returns before
  // anything is built (the arguments die with this call, unlocked); the
  // logger is built unlocked; one refused at install dies after unlocking.
  default_loggers& d = defaults();
  {
    std::lock_guard lock(d.mutex);
    if (auto no = d.refusal_locked(); !no) return no;
  }
  std::unique_ptr<logger> made;
  try {
    made = std::make_unique<logger>(std::move(sinks), std::move(options));
  } catch (const error_exception& e) {
    return thread_system::detail::error_of(e);
  } catch (const std::bad_alloc&) {
    return thread_system::detail::out_of_memory_error();
  }
  result<void> r;
  {
    std::lock_guard lock(d.mutex);
    r = d.install_locked(made);
  }
  return r;  // `made`, if refused, is destroyed here, unlocked
}

void stop() {
  default_loggers& d = defaults();
  std::vector<logger*> every;
  logger* only_last = nullptr;  // no memory for the list: the last one, as before
  {
    std::lock_guard lock(d.mutex);
    // relaxed: current is written only under the mutex; a writer that still
    // loads the old pointer finds a live logger that refuses after stop().
    d.current.store(nullptr, std::memory_order_relaxed);
    // Every default there has been, oldest first - not only the last: one
    // whose stop a sink began (logger::stop() from its writer, which only
    // begins it) or that another thread is stopping may have been replaced
    // since; stopping it again waits for that stop or joins its writer, so
    // everything any of them accepted is written when this returns. (A
    // stopped one returns at once.)
    try {
      every.reserve(d.all.size());
      for (const auto& l : d.all) every.push_back(l.get());
    } catch (const std::bad_alloc&) {
      every.clear();
      only_last = d.last;
    }
  }
  // Outside the mutex: stopping joins the writer threads, whose sinks may
  // call log_module or logger::handle() themselves. Stopped loggers are
  // never destroyed, so the pointers stay valid; logger::stop() is
  // idempotent and safe to call concurrently.
  for (logger* l : every) l->stop();  // writes everything it accepted
  if (only_last != nullptr) only_last->stop();
}

bool is_running() noexcept { return detail::running() != nullptr; }

logger_statistics statistics() noexcept {
  default_loggers& d = defaults();
  logger_statistics s;
  {
    std::lock_guard lock(d.mutex);
    if (d.last != nullptr) s = d.last->statistics();
    // The replaced loggers' refusals: calls that reached one after its stop
    // (through a pointer or reference taken while it ran), then or since.
    for (const auto& l : d.all) {
      if (l.get() != d.last) s.rejected += l->statistics().rejected;
    }
  }
  s.rejected += d.refused.load(std::memory_order_relaxed);  // statistics only
  return s;
}

}  // namespace log_module

logger& logger::handle() {
  if (logger* l = log_module::detail::running()) return *l;
  default_loggers& d = defaults();
  std::lock_guard lock(d.mutex);
  if (logger* l = d.current.load(std::memory_order_relaxed)) return *l;  // started meanwhile (under mutex)
  if (d.exiting) {
    if (d.last == nullptr) {
      // None ever ran: a stopped one to hand out (a static destructor's
      // calls are then refused and counted, as with a default stopped at
      // exit).
      auto made = thread_system::detail::refuse_if_out_of_memory(
          [&] { return d.make_locked(default_loggers::console(), default_loggers::console_options()); });
      if (!made) throw error_exception(made.error());
      d.last->stop();  // no sink of its can call log_module (a console sink)
    }
    return *d.last;  // stopped: its calls are refused and counted
  }
  auto r = thread_system::detail::refuse_if_out_of_memory(
      [&] { return d.start_locked(default_loggers::console(), default_loggers::console_options()); });
  if (!r) throw error_exception(r.error());
  return *d.last;
}

}  // namespace thread_system
