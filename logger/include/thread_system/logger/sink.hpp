// log_sink: where the async logger's records go. Implement it to send
// records anywhere; the library ships console, file, rotating-file, callback
// and null sinks (thread_system/logger/sinks/).
//
// Contract for implementers:
//   * A logger calls write() and flush() from one thread at a time, never
//     concurrently with each other, each call after the previous one has
//     returned (a mutex orders them), in the order the records were read
//     from the buffer (per producer thread: the order of its calls). That
//     thread is the logger's writer thread, or a thread inside
//     logger::flush() writing the pending records itself
//     (logger_options::flush_on_caller, the default; false keeps every call
//     on the writer thread).
//   * A sink instance should belong to one logger. Sharing one between
//     loggers means concurrent calls from several writer threads; only sinks
//     documented as internally synchronised allow that.
//   * write() receives views valid for the call only (see log_record.hpp).
//   * Report failures as `result` errors (or exceptions): the logger counts
//     each failed write/flush in `logger_statistics::sink_errors` and passes
//     the error to its error handler. A failure never stops the writer, and
//     the record still goes to the other sinks.
//   * flush(): push everything written so far to its destination (fflush, a
//     network send...). The logger calls it for `logger::flush()`, at stop,
//     when its buffer runs empty (if `flush_when_idle`), and after records at
//     or above `flush_level`.
//   * The logger keeps its sinks (shared_ptr) alive until its writer thread
//     has exited; a sink is destroyed when the last owner lets go.
#pragma once

#include "thread_system/core/error.hpp"
#include "thread_system/logger/log_record.hpp"

namespace thread_system {

/// Where a logger's records go: implement write() and flush(); both are called by one thread at a time
/// (see the header comment).
class log_sink {
 public:
  /// Destroyed when its last owner (a logger or the application) lets go.
  virtual ~log_sink() = default;

  /// Writes one record. Called by one thread at a time (see the header comment).
  virtual result<void> write(const log_entry& entry) = 0;

  /// Pushes buffered output to its destination. Called by one thread at a time (see the header comment).
  virtual result<void> flush() = 0;

 protected:
  /// For derived classes.
  log_sink() = default;
  /// Copyable by derived classes; the base holds no state.
  log_sink(const log_sink&) = default;
  /// Copyable by derived classes; the base holds no state.
  log_sink& operator=(const log_sink&) = default;
};

}  // namespace thread_system
