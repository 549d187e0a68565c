// null_sink: discards records (does not even format them) and counts them.
// For benchmarks and for loggers whose output is switched off.
//
// Thread-safety: write() and flush() from one logger, one thread at a time;
// records() may be read from any thread (a relaxed snapshot; exact after the
// logger's flush() or stop() returned).
#pragma once

#include <atomic>
#include <cstdint>

#include "thread_system/logger/sink.hpp"

namespace thread_system {

/// Discards records without formatting them and counts them; for benchmarks and switched-off output.
class null_sink final : public log_sink {
 public:
  result<void> write(const log_entry& /*entry*/) override {
    // relaxed: single writer; readers synchronise through flush()/stop().
    records_.store(records_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return {};
  }
  result<void> flush() override { return {}; }

  /// Records written so far: a relaxed snapshot, exact after the logger's flush() or stop() returned.
  [[nodiscard]] std::uint64_t records() const noexcept {
    return records_.load(std::memory_order_relaxed);  // a snapshot; see the header comment
  }

 private:
  std::atomic<std::uint64_t> records_{0};
};

}  // namespace thread_system
