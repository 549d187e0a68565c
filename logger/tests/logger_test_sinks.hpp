// Sinks shared by the logger's tests: one that records every entry, one
// that holds the writer thread inside its first write() until released; and
// the options most tests start from.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "thread_system/logger/logger.hpp"

namespace thread_system::test {

/// Records every entry (message, line, source, thread, time) and its write thread.
class recording_sink final : public log_sink {
 public:
  struct entry {
    log_level level;
    std::string message;
    std::string line;
    std::string file;
    std::uint32_t source_line;
    std::uint32_t thread_id;
    std::chrono::system_clock::time_point time;
    bool truncated;
    std::thread::id written_on;  // the thread that called write() (the logger's writer)
  };

  result<void> write(const log_entry& e) override {
    const log_record& r = e.record();
    std::lock_guard lock(mutex_);
    entries_.push_back(entry{r.level, std::string(r.message), std::string(e.line()), std::string(r.file), r.line,
                             r.thread_id, r.time, r.truncated, std::this_thread::get_id()});
    return {};
  }
  result<void> flush() override {
    flushes_.fetch_add(1, std::memory_order_relaxed);  // test bookkeeping
    return {};
  }

  std::vector<entry> entries() const {
    std::lock_guard lock(mutex_);
    return entries_;
  }
  std::vector<std::string> messages() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.message);
    return out;
  }
  int flushes() const { return flushes_.load(std::memory_order_relaxed); }

 private:
  mutable std::mutex mutex_;
  std::vector<entry> entries_;
  std::atomic<int> flushes_{0};
};

/// A sink whose write() blocks on a latch until the test releases it, so the
/// buffer fills deterministically.
class gated_sink final : public log_sink {
 public:
  result<void> write(const log_entry& e) override {
    if (!entered_.exchange(true, std::memory_order_seq_cst)) {  // seq_cst: pairs with other writers' exchange
      entered_promise_.set_value();
      gate_.wait();
    }
    recorder_.write(e).value();
    return {};
  }
  result<void> flush() override { return recorder_.flush(); }
  void wait_until_blocked() { entered_promise_.get_future().wait(); }
  void open() { gate_.count_down(); }
  recording_sink& recorder() { return recorder_; }

 private:
  std::atomic<bool> entered_{false};
  std::promise<void> entered_promise_;
  std::latch gate_{1};
  recording_sink recorder_;
};

/// Options with the given buffer size, overflow policy and level.
inline logger_options options_with(std::size_t buffer_bytes, overflow_policy policy,
                                   log_level level = log_level::trace) {
  logger_options o;
  o.thread_buffer_bytes = buffer_bytes;
  o.overflow = policy;
  o.level = level;
  return o;
}

}  // namespace thread_system::test
