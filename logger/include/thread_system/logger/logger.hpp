// logger: an asynchronous logger. Producer threads format a message (with
// {fmt}) and copy it into a bounded lock-free buffer (detail/record_ring.hpp,
// Vyukov's bounded queue with multi-slot records); one writer thread drains
// the buffer in batches, formats the text lines (timestamp, level, thread id,
// source location) and hands them to the sinks.
//
//   auto console = std::make_shared<console_sink>();
//   logger log{{console}};                       // writer thread started
//   log.info("listening on port {}", port);      // cheap: format + copy
//   log.flush();                                  // everything so far reached the sinks
//
// Contract:
//   * Producers: any thread may call the logging members (trace() ...
//     critical(), log(), log_text(), try_log(), try_log_text()),
//     set_level(), level(), should_log(), flush() and statistics()
//     concurrently. Sinks are fixed at construction.
//   * Level filter: checked before anything is formatted or timed; arguments
//     of a filtered call are not formatted. A filtered call is not a refusal
//     (try_log returns success) and is not counted.
//   * Accepted: a call is accepted when its record is in the buffer (try_log
//     returns success). Every accepted record is written to every sink
//     exactly once, in per-producer-thread order; across threads, records
//     appear in the order their buffer slots were claimed.
//   * Refused calls are never silent: with overflow_policy::drop a call that
//     finds the buffer full returns `queue_full`, is counted in `dropped`, and
//     the writer writes a warning record "N messages dropped" (N exact, the
//     drops since the previous such record) before the next records it
//     writes, at flush() and at stop. A call after stop() returns
//     `pool_stopped` and is counted in `rejected`; a call whose formatting
//     throws returns `invalid_argument` and is counted in `rejected`; one
//     whose formatting runs out of memory returns `resource_exhausted`,
//     counted likewise. No logging member throws std::bad_alloc
//     (tests: logger_fault_sweep_test.cpp fails each allocation in turn).
//   * overflow_policy::block: a call that finds the buffer full spins
//     briefly, then sleeps until the writer frees room (no busy wait). It
//     fails with `pool_stopped` if stop() begins while it waits. A call from
//     the writer thread itself (a sink that logs) never blocks: it is
//     treated as under the drop policy.
//   * flush(): returns after every record accepted before the call (by any
//     thread, if that acceptance happens-before the call) has been written
//     to the sinks and the sinks were flushed. Calling it from the writer
//     thread (inside a sink) returns `invalid_argument` instead of
//     deadlocking.
//   * stop() / destructor: refuses new calls, writes every accepted record,
//     writes the final "dropped" notice if any, flushes the sinks, joins the
//     writer. Nothing accepted is lost. After stop() returns the statistics
//     are final: accepted == written. The destructor must not run while
//     another thread is still inside a member of this logger.
//   * Visibility: everything a producer did before an accepted call is
//     visible to the sinks when they receive its record.
//   * Timestamps: the producer reads the wall clock (system_clock) at the
//     call; the writer formats it (UTC).
//   * Sink failures (error results or exceptions from write/flush) are
//     counted in `sink_errors` and passed to `logger_options::error_handler`
//     on the writer thread (default: a line on stderr); the record still
//     counts as written and still goes to the other sinks.
//
// Messages longer than `max_message_bytes` are cut to that length, marked
// " [truncated]" in the line and counted in `truncated`.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <source_location>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "thread_system/core/error.hpp"
#include "thread_system/logger/detail/record_ring.hpp"
#include "thread_system/logger/log_level.hpp"
#include "thread_system/logger/log_record.hpp"
#include "thread_system/logger/sink.hpp"
#include "thread_system/sync/event_count.hpp"

namespace thread_system {

/// What a log call does when the buffer is full.
enum class overflow_policy {
  block,  ///< Wait for room (spin briefly, then sleep).
  drop,   ///< Refuse with queue_full; counted and reported by the writer.
};

/// Settings of a logger, fixed at construction.
struct logger_options {
  /// Name of the writer thread (at most 15 bytes are kept on Linux).
  std::string name = "logger";
  /// Buffer size in 128-byte slots (rounded up to a power of two). A message
  /// of up to 72 bytes takes one slot; each further 120 bytes one more.
  std::size_t capacity = 8192;
  /// What a log call does when the buffer is full. Default: block.
  overflow_policy overflow = overflow_policy::block;
  /// Initial level; set_level() changes it at run time.
  log_level level = log_level::info;
  /// Records at or above this level are followed by a flush of every sink.
  log_level flush_level = log_level::off;
  /// Flush the sinks whenever the writer finds the buffer empty (output
  /// appears promptly; costs a flush per idle transition).
  bool flush_when_idle = true;
  /// Longer messages are cut (see the header comment). 0 (the default):
  /// 16 KiB, or less if the buffer is smaller (what fits in all its slots).
  /// An explicit value must fit in the buffer.
  std::size_t max_message_bytes = 0;
  /// Records popped per batch by the writer.
  std::size_t batch_size = 256;
  /// Called on the writer thread for each failed sink write or flush.
  /// Default: one line on stderr.
  std::function<void(const error&)> error_handler;
};

/// Counters of a logger (logger::statistics()); final once stop() has returned.
struct logger_statistics {
  std::uint64_t accepted = 0;      ///< Calls whose record entered the buffer.
  std::uint64_t written = 0;       ///< Records handed to the sinks (excludes the "dropped" notices).
  std::uint64_t dropped = 0;       ///< Calls refused because the buffer was full (drop policy).
  std::uint64_t rejected = 0;      ///< Calls refused after stop(), because formatting threw, or out of memory.
  std::uint64_t truncated = 0;     ///< Accepted records whose message was cut.
  std::uint64_t blocked = 0;       ///< Times a producer slept waiting for room (block policy).
  std::uint64_t sink_errors = 0;   ///< Failed sink writes and flushes.
  std::uint64_t queued_slots = 0;  ///< Buffer slots in use now (approximate).
};

namespace detail {
/// A format string checked at compile time plus the caller's source
/// location, captured by the implicit conversion at the call site.
template <typename... Args>
struct format_with_location {
  template <typename S>
    requires std::is_convertible_v<const S&, fmt::string_view>
  consteval format_with_location(const S& s,  // NOLINT(google-explicit-constructor)
                                 std::source_location l = std::source_location::current())
      : format(s), location(l) {}
  /// A format string known only at run time: fmt::runtime(text).
  format_with_location(fmt::basic_runtime<char> s,  // NOLINT(google-explicit-constructor)
                       std::source_location l = std::source_location::current())
      : format(s), location(l) {}

  fmt::format_string<Args...> format;
  std::source_location location;
};

/// The calling thread's formatting buffer (reused; no allocation in steady state).
fmt::memory_buffer& thread_format_buffer() noexcept;
}  // namespace detail

/// The format-string parameter of the logging members: a format string checked at compile time (or
/// fmt::runtime(text)) plus the caller's source location.
template <typename... Args>
using log_format = detail::format_with_location<std::type_identity_t<Args>...>;

/// An asynchronous logger: producers format and copy messages into a bounded lock-free buffer; one writer thread
/// hands them to the sinks (see the header comment).
class logger {
 public:
  /// Starts the writer thread. Throws error_exception: invalid_argument (a
  /// null sink, capacity 0, max_message_bytes not fitting the buffer,
  /// batch_size 0), resource_exhausted (the thread could not be started, or
  /// memory ran out; never a raw std::bad_alloc).
  explicit logger(std::vector<std::shared_ptr<log_sink>> sinks, logger_options options = {});
  /// Not copyable.
  logger(const logger&) = delete;
  /// Not copyable.
  logger& operator=(const logger&) = delete;
  /// stop(); see the contract for when destruction is allowed.
  ~logger();

  // ---- level -------------------------------------------------------------
  /// Sets the level filter: calls below `level` are ignored; log_level::off lets nothing through.
  void set_level(log_level level) noexcept {
    level_.store(level, std::memory_order_relaxed);  // a filter setting; publishes no data
  }
  /// The current level filter.
  [[nodiscard]] log_level level() const noexcept {
    return level_.load(std::memory_order_relaxed);  // a filter setting; publishes no data
  }
  /// True when a call at `level` would pass the filter (never for log_level::off).
  [[nodiscard]] bool should_log(log_level level) const noexcept {
    return level != log_level::off && level >= level_.load(std::memory_order_relaxed);  // as level()
  }

  // ---- logging: refusals counted in statistics(), no result --------------
  /// Logs at log_level::trace (see log()).
  template <typename... Args>
  void trace(log_format<Args...> format, Args&&... args) {
    log(log_level::trace, format, std::forward<Args>(args)...);
  }
  /// Logs at log_level::debug (see log()).
  template <typename... Args>
  void debug(log_format<Args...> format, Args&&... args) {
    log(log_level::debug, format, std::forward<Args>(args)...);
  }
  /// Logs at log_level::info (see log()).
  template <typename... Args>
  void info(log_format<Args...> format, Args&&... args) {
    log(log_level::info, format, std::forward<Args>(args)...);
  }
  /// Logs at log_level::warn (see log()).
  template <typename... Args>
  void warn(log_format<Args...> format, Args&&... args) {
    log(log_level::warn, format, std::forward<Args>(args)...);
  }
  /// Logs at log_level::error (see log()).
  template <typename... Args>
  void error(log_format<Args...> format, Args&&... args) {
    log(log_level::error, format, std::forward<Args>(args)...);
  }
  /// Logs at log_level::critical (see log()).
  template <typename... Args>
  void critical(log_format<Args...> format, Args&&... args) {
    log(log_level::critical, format, std::forward<Args>(args)...);
  }
  /// Formats the message with `args` and queues it at `level`, as try_log() but without the outcome: refusals are
  /// only counted in statistics().
  template <typename... Args>
  void log(log_level level, log_format<Args...> format, Args&&... args) {
    (void)try_log(level, format, std::forward<Args>(args)...);  // refusals are counted in statistics()
  }
  /// A message that is already text (not a format string).
  void log_text(log_level level, std::string_view text,
                std::source_location location = std::source_location::current()) {
    (void)try_log_text(level, text, location);  // refusals are counted in statistics()
  }

  // ---- the seed API (log_module.hpp has the rest) ---------------------------
  /// The process-wide default logger, the one log_module::start() starts:
  /// when none is running, the first call starts it with a console sink on
  /// stdout. Throws error_exception (resource_exhausted) when it cannot be
  /// started. The logger stays valid until the process exits.
  static logger& handle();
  /// The seed's write(): log() at to_log_level(type); log_types::None logs nothing.
  template <typename... Args>
  void write(log_types type, log_format<Args...> format, Args&&... args) {
    if (type == log_types::None) return;
    log(to_log_level(type), format, std::forward<Args>(args)...);
  }

  // ---- logging with the outcome -------------------------------------------
  /// Success when accepted or filtered by level; otherwise queue_full (drop
  /// policy), pool_stopped (stopped), invalid_argument (formatting threw) or
  /// resource_exhausted (formatting ran out of memory). Never throws.
  template <typename... Args>
  [[nodiscard]] result<void> try_log(log_level level, log_format<Args...> format, Args&&... args) {
    if (!should_log(level)) return {};
    const fmt::string_view text = format.format;
    if constexpr (sizeof...(Args) == 0) {
      // Literal without replacement fields: no formatting pass needed.
      if (!contains_brace(text)) return enqueue(level, format.location, std::string_view(text.data(), text.size()));
    }
    fmt::memory_buffer& buffer = detail::thread_format_buffer();
    buffer.clear();
    try {
      fmt::vformat_to(fmt::appender(buffer), text, fmt::make_format_args(args...));
    } catch (const std::bad_alloc&) {
      return refuse_out_of_memory();
    } catch (const std::exception& e) {
      return refuse_format(e.what());
    }
    return enqueue(level, format.location, std::string_view(buffer.data(), buffer.size()));
  }
  /// try_log() for a message that is already text (not a format string).
  [[nodiscard]] result<void> try_log_text(log_level level, std::string_view text,
                                          std::source_location location = std::source_location::current()) {
    if (!should_log(level)) return {};
    return enqueue(level, location, text);
  }

  // ---- control -------------------------------------------------------------
  /// See the contract. invalid_argument when called on the writer thread.
  [[nodiscard]] result<void> flush();
  /// Drains, flushes and joins; idempotent and safe to call concurrently.
  void stop();

  /// A snapshot of the counters.
  [[nodiscard]] logger_statistics statistics() const noexcept;
  /// Buffer size in 128-byte slots (logger_options::capacity rounded up to a power of two).
  [[nodiscard]] std::size_t capacity() const noexcept { return ring_.capacity(); }
  /// The options given at construction (`level` there is the initial level; level() gives the current one).
  [[nodiscard]] const logger_options& options() const noexcept { return options_; }

 private:
  static constexpr std::size_t counter_shards = 16;
  struct alignas(64) padded_counter {
    std::atomic<std::uint64_t> value{0};
  };

  static bool contains_brace(fmt::string_view text) noexcept {
    for (const char c : text) {
      if (c == '{' || c == '}') return true;
    }
    return false;
  }

  result<void> enqueue(log_level level, const std::source_location& location, std::string_view text);
  result<void> refuse_format(const char* what) noexcept;
  result<void> refuse_out_of_memory() noexcept;
  bool wait_for_room(std::size_t slots);
  void writer_main();
  std::size_t drain_batch();
  void write_record(const log_record& record);
  void write_dropped_notice();
  void flush_sinks();
  void service_flush_request();
  void report_sink_error(const thread_system::error& e);
  bool writer_has_work() const noexcept;

  logger_options options_;
  std::vector<std::shared_ptr<log_sink>> sinks_;
  std::size_t max_message_bytes_ = 0;
  detail::record_ring ring_;
  alignas(64) std::atomic<log_level> level_{log_level::info};

  // Producer-side counters. accepted_ is sharded by thread so that producers
  // on different cores do not contend on one line.
  std::array<padded_counter, counter_shards> accepted_{};
  alignas(64) std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> truncated_{0};
  std::atomic<std::uint64_t> blocked_{0};

  // Writer-side counters (single writer; read by statistics()).
  alignas(64) std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> sink_errors_{0};

  // Flush hand-shake: flushers raise flush_request_ to a tail position; the
  // writer publishes flushed_position_ after flushing the sinks.
  alignas(64) std::atomic<std::uint64_t> flush_request_{0};
  std::atomic<std::uint64_t> flushed_position_{0};

  event_count writer_wakeup_;  // the writer parks here; producers, flush() and stop() notify
  event_count room_freed_;     // blocked producers park here; the writer notifies
  event_count flush_done_;     // flush() callers park here; the writer notifies

  // Writer-thread state.
  std::vector<detail::popped_record> batch_;
  std::string batch_text_;
  line_formatter formatter_;
  std::uint64_t dropped_reported_ = 0;
  std::uint64_t flushed_local_ = 0;
  std::uint64_t written_local_ = 0;
  bool sinks_dirty_ = false;

  std::mutex stop_mutex_;
  bool stopped_ = false;  // guarded by stop_mutex_
  std::thread writer_;
  std::atomic<std::thread::id> writer_id_{};
};

}  // namespace thread_system
