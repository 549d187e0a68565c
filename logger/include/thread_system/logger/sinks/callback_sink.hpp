// callback_sink: hands each record to a user function.
//
// The function runs on the thread writing the logger's records (its writer
// thread, or a thread in flush() with logger_options::flush_on_caller; one
// at a time), once per record, in the order the logger writes them; its argument (and the views in the record)
// is valid only during the call. An exception it throws is caught by the
// logger and counted as a sink error. It may log to the same logger (such
// calls never block: if the buffer is full they are dropped and counted) but
// must not call that logger's flush() (it returns invalid_argument).
#pragma once

#include <functional>
#include <utility>

#include "thread_system/logger/sink.hpp"

namespace thread_system {

/// A sink that hands each record to a user function on the thread writing the logger's records (see the header
/// comment).
class callback_sink final : public log_sink {
 public:
  /// Called once per record; the entry and the views in its record are valid only during the call.
  using callback = std::function<void(const log_entry&)>;
  /// Called each time the sink is flushed.
  using flush_callback = std::function<void()>;

  /// Calls `on_write` for each record (an empty one ignores records) and `on_flush`, if set, at each flush.
  explicit callback_sink(callback on_write, flush_callback on_flush = {})
      : on_write_(std::move(on_write)), on_flush_(std::move(on_flush)) {}

  result<void> write(const log_entry& entry) override {
    if (on_write_) on_write_(entry);
    return {};
  }
  result<void> flush() override {
    if (on_flush_) on_flush_();
    return {};
  }

 private:
  callback on_write_;
  flush_callback on_flush_;
};

}  // namespace thread_system
