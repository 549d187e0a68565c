// log_module: the seed API of the logger, a facade over one process-wide
// thread_system::logger (the "default logger", also logger::handle()).
//
//   log_module::start();                                   // console sink on stdout
//   log_module::write_information("Message: {}", value);
//   log_module::write_error("Error: {}", error);
//   log_module::stop();                                    // everything written
//
// Contract:
//   * start() starts the default logger: a console sink on stdout, level
//     trace, unless start(sinks, options) names its own. Errors:
//     already_started when one is running; invalid_argument or
//     resource_exhausted as logger's constructor throws them.
//   * write_*(format, args...) log at the level of their seed type
//     (log_level.hpp: Exception -> critical, Error -> error, Information ->
//     info, Debug -> debug, Sequence and Parameter -> trace), with the
//     logger's contract (format checked at compile time, records never lost
//     once accepted, refusals counted). With no default logger running
//     (before start(), after stop()) the call is refused: counted in
//     statistics().rejected, never silently dropped.
//   * stop() stops the default logger: every accepted record is written and
//     the sinks flushed - also when another thread's stop() is in progress
//     (it waits for it). Idempotent. A later start() starts a new one.
//     Called from one of its sinks, it only begins the stop (logger::stop()
//     on the writer thread); the next stop() from another thread, or the
//     exit handler, waits until everything is written - also when a new
//     default was started meanwhile (stop() stops every default there has
//     been; a stopped one costs nothing).
//   * start(sinks, options) never destroys the caller's sinks or options
//     while it holds the facade's lock: a sink whose destructor calls
//     log_module (a refused start, a logger constructor that throws) is
//     safe.
//   * statistics(): the counters of the current default logger (of the last
//     one after stop()), with the refusals of calls made while none ran,
//     and of calls that reached a replaced default logger after its stop,
//     added to `rejected`.
//   * lockfree_logger (the seed's other logger) is logger: its producers
//     already share a lock-free buffer.
//   * Any function may be called from any thread, also from a sink of the
//     default logger. A logger that was stopped is not destroyed before the
//     process exits (a thread still inside a write_*() can never touch a
//     destroyed logger; each start/stop cycle keeps one stopped logger, its
//     buffer included, until exit). At exit a running default logger is
//     stopped, so its records are written; afterwards start() returns
//     pool_stopped and logger::handle() returns the stopped logger (its
//     calls refused and counted).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "thread_system/core/error.hpp"
#include "thread_system/logger/log_level.hpp"
#include "thread_system/logger/logger.hpp"
#include "thread_system/logger/sink.hpp"

namespace thread_system {
/// The seed's name of its lock-free logger: logger (already lock-free on the producer side).
using lockfree_logger = logger;
}  // namespace thread_system

namespace thread_system::log_module {

namespace detail {
// The running default logger, or null (acquire load: pairs with start()).
logger* running() noexcept;
// Counts a call refused because no default logger runs.
void refuse_not_running() noexcept;
}  // namespace detail

/// Starts the default logger with a console sink on stdout (see the header).
result<void> start();
/// Starts the default logger with `sinks` and `options`.
result<void> start(std::vector<std::shared_ptr<log_sink>> sinks, logger_options options = {});
/// Stops the default logger; every accepted record is written. Idempotent.
void stop();
/// True while a default logger runs.
[[nodiscard]] bool is_running() noexcept;
/// The default logger's counters, plus calls refused while none ran (in `rejected`).
[[nodiscard]] logger_statistics statistics() noexcept;

/// Logs `format` with `args` as a message of seed type `type` (see the header).
template <typename... Args>
void write(log_types type, log_format<Args...> format, Args&&... args) {
  if (type == log_types::None) return;
  if (logger* l = detail::running()) {
    l->log(to_log_level(type), format, std::forward<Args>(args)...);
  } else {
    detail::refuse_not_running();
  }
}

/// write(log_types::Exception, ...): log_level::critical.
template <typename... Args>
void write_exception(log_format<Args...> format, Args&&... args) {
  write(log_types::Exception, format, std::forward<Args>(args)...);
}
/// write(log_types::Error, ...): log_level::error.
template <typename... Args>
void write_error(log_format<Args...> format, Args&&... args) {
  write(log_types::Error, format, std::forward<Args>(args)...);
}
/// write(log_types::Information, ...): log_level::info.
template <typename... Args>
void write_information(log_format<Args...> format, Args&&... args) {
  write(log_types::Information, format, std::forward<Args>(args)...);
}
/// write(log_types::Debug, ...): log_level::debug.
template <typename... Args>
void write_debug(log_format<Args...> format, Args&&... args) {
  write(log_types::Debug, format, std::forward<Args>(args)...);
}
/// write(log_types::Sequence, ...): log_level::trace.
template <typename... Args>
void write_sequence(log_format<Args...> format, Args&&... args) {
  write(log_types::Sequence, format, std::forward<Args>(args)...);
}
/// write(log_types::Parameter, ...): log_level::trace.
template <typename... Args>
void write_parameter(log_format<Args...> format, Args&&... args) {
  write(log_types::Parameter, format, std::forward<Args>(args)...);
}

}  // namespace thread_system::log_module
