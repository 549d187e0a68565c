// logger: an asynchronous logger. A log call on the caller's thread takes a
// cheap timestamp (detail/log_clock.hpp), copies its arguments in binary form
// (detail/arg_codec.hpp: numbers, enums, pointers and strings; other types
// are formatted on the caller's thread) into a buffer that belongs to the
// calling thread (detail/thread_buffer.hpp: one producer, one consumer, no
// read-modify-write on the common path). One writer thread drains every
// thread's buffer, formats the messages and the text lines (timestamp,
// level, thread id, source location) and hands them to the sinks.
//
//   auto console = std::make_shared<console_sink>();
//   logger log{{console}};                       // writer thread started
//   log.info("listening on port {}", port);      // cheap: a copy of `port`
//   log.flush();                                  // everything so far reached the sinks
//
// Contract:
//   * Producers: any thread may call the logging members (trace() ...
//     critical(), log(), log_text(), try_log(), try_log_text()),
//     set_level(), level(), should_log(), flush() and statistics()
//     concurrently. Sinks are fixed at construction.
//   * Format strings are checked at compile time (fmt::runtime(text) for one
//     known only at run time). A call is formatted when written, on the
//     thread writing the records (the writer thread, or one in flush(): see
//     "Who writes"; "deferred"), when every argument is deferrable (arg_codec.hpp) and the
//     format string has no dynamic width or precision ("{:{}}"); otherwise
//     on the caller's thread, as is a fmt::runtime() string. The text is the
//     same either way. A trivially copyable type whose text depends only on
//     its value can opt in: specialise thread_system::log_by_value<T> as
//     std::true_type (detail/arg_codec.hpp).
//   * Level filter: checked before anything is formatted, copied or timed;
//     arguments of a filtered call are not touched. A filtered call is not a
//     refusal (try_log returns success) and is not counted.
//   * Buffers: each thread that logs gets a buffer of
//     `logger_options::thread_buffer_bytes` in this logger at its first
//     call (an allocation; the only one a deferred call ever makes), kept
//     until the thread exits and its records are written.
//   * Accepted: a call is accepted when its record is in its thread's buffer
//     (try_log returns success). Every accepted record is written to every
//     sink exactly once. Per producer thread, records reach the sinks in the
//     order of the calls. Across threads the writer merges by timestamp the
//     records it finds published when it looks; a record published late (its
//     thread was preempted between the timestamp and the publication) can
//     follow records with later timestamps.
//   * Refused calls are never silent: with overflow_policy::drop a call that
//     finds its buffer full returns `queue_full`, is counted in `dropped`, and
//     the writer writes a warning record "N messages dropped" (N exact, the
//     drops since the previous such record) before the next records it
//     writes, at flush() and at stop. A call after stop() returns
//     `pool_stopped` and is counted in `rejected`; a call formatted on the
//     caller's thread whose formatting throws returns `invalid_argument`, and
//     one that runs out of memory (formatting, or allocating the thread's
//     buffer) returns `resource_exhausted`, both counted in `rejected`; so
//     is a call at a level no record may have (log_level::off, a value
//     outside log_level, a seed log_types value outside the enumeration):
//     `invalid_argument`, whatever the level filter. No
//     logging member throws std::bad_alloc (tests:
//     logger_fault_sweep_test.cpp fails each allocation in turn).
//   * A deferred record whose formatting fails when written (a
//     formatter that throws, or memory running out) is still written, with
//     the message "<format error: what>", and counted in `format_errors`.
//   * overflow_policy::block: a call that finds its buffer full spins
//     briefly, then sleeps until the writer frees room (no busy wait). It
//     fails with `pool_stopped` if stop() begins while it waits. A call from
//     the writer thread itself (a sink that logs) never blocks: it is
//     treated as under the drop policy.
//   * flush(): returns after every record accepted before the call (by any
//     thread, if that acceptance happens-before the call) has been written
//     to the sinks and the sinks were flushed. Calling it from the writer
//     thread (inside a sink) returns `invalid_argument` instead of
//     deadlocking. After stop() it succeeds at once (stop() wrote and
//     flushed every accepted record).
//   * Who writes: the writer thread, or, with
//     `logger_options::flush_on_caller` (the default), a thread in flush()
//     that is no logger's writer: it takes the writer's role, spinning up to
//     20 us while the writer thread (in a round of its own) or another
//     flusher holds it, and writes the pending records and flushes the
//     sinks itself, instead of waking the writer and sleeping until it is
//     done. If the role stays taken (a long round, slow sinks), or the
//     holder served its flush meanwhile, it waits (or returns) as without
//     the option. One thread
//     at a time holds the role, so sinks are never called concurrently
//     (sink.hpp). While it holds it, that thread counts as the writer
//     thread everywhere in this contract (a sink's log call never blocks,
//     its flush() returns `invalid_argument`, its stop() only begins the
//     stop, the error handler runs there). While threads flush this way,
//     the idle writer thread leaves new records to them for up to ~50 us
//     (it would otherwise pull the lines they write). A thread that is
//     another logger's writer (a sink's flush() of this logger) waits for
//     this logger's writer thread as before.
//   * Sinks that use other loggers: a sink of logger A may log into, flush
//     or stop logger B, and B's sinks may do the same with A. A writer
//     thread waits in another logger (for room under `block`, in flush(),
//     in stop()) only while that logger's writer is not itself waiting in
//     a logger; otherwise the log call is refused as under the drop policy
//     (`queue_full`, counted in `dropped`), flush() returns
//     `invalid_argument`, and stop() only begins the stop (as from the
//     logger's own sink). So writers that wait for each other in a cycle
//     cannot deadlock: the last to arrive does not wait. The destructor
//     always waits for its writer; run by another logger's sink, it first
//     marks that logger's writer as waiting, so a wait of the destroyed
//     logger's writer in that logger (for room, in flush()) gives up as
//     above and the destructor returns. (One cycle is left to the user:
//     a sink of the destroyed logger that was already inside stop() of
//     the destroying logger - two joins of each other.)
//   * stop() / destructor: refuses new calls, writes every accepted record
//     (it waits for calls already past the stop check to finish), writes the
//     final "dropped" notice if any, flushes the sinks, joins the writer.
//     Nothing accepted is lost. After stop() returns the statistics are
//     final: accepted == written. The destructor must not run while another
//     thread is still inside a member of this logger. stop() called from a
//     sink (on the writer thread) only begins the stop - new calls are
//     refused, and the writer writes every accepted record once the sink
//     returns, then exits - and returns at once; a later stop() from another
//     thread, or the destructor, waits for that and joins the writer.
//   * Visibility: everything a producer did before an accepted call is
//     visible to the sinks when they receive its record.
//   * Timestamps: the producer reads a cheap clock at the call (the TSC where
//     it is invariant, else steady_clock); the writer converts it to
//     system_clock time, calibrating the rate against steady_clock and the
//     offset against system_clock at least every 50 ms (a wall-clock step
//     shows in the records within that time), and formats it (UTC).
//   * Sink failures (error results or exceptions from write/flush) are
//     counted in `sink_errors` and passed to `logger_options::error_handler`
//     on the thread writing (default: a line on stderr); the record still
//     counts as written and still goes to the other sinks.
//
// Messages longer than `max_message_bytes` are cut to that length, marked
// " [truncated]" in the line and counted in `truncated`. A deferred call
// whose encoded arguments do not fit in half a thread buffer is formatted on
// the caller's thread (and then cut).
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
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/asymmetric_fence.hpp"
#include "thread_system/logger/detail/arg_codec.hpp"
#include "thread_system/logger/detail/log_clock.hpp"
#include "thread_system/logger/detail/thread_buffer.hpp"
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
  /// Bytes of each producer thread's buffer (rounded up to a power of two;
  /// 1 KiB to 1 GiB). A record takes a 48-byte header plus its message text
  /// or its encoded arguments, rounded up to 128 bytes (a 17-character text:
  /// 128 bytes; 123 characters: 256).
  std::size_t thread_buffer_bytes = std::size_t{256} * 1024;
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
  /// 16 KiB, or less if a thread buffer is smaller (what fits in half of it).
  /// An explicit value must fit in half a thread buffer.
  std::size_t max_message_bytes = 0;
  /// Records the writer takes per batch (across all thread buffers).
  std::size_t batch_size = 256;
  /// flush() called on a thread that is no logger's writer writes the
  /// pending records itself (if it gets the writer's role within 20 us),
  /// instead of waking the writer and sleeping until it is done: a flush
  /// then costs the writing, not two thread hand-offs. The sinks, and the
  /// formatting of deferred records, then run on that thread (one thread at
  /// a time, sink.hpp). false: only the writer thread does.
  bool flush_on_caller = true;
  /// Called on the thread writing the records (the writer thread, or one in flush()) for each failed sink write
  /// or flush.
  /// Default: one line on stderr.
  std::function<void(const error&)> error_handler{};
};

/// Counters of a logger (logger::statistics()); final once stop() has returned.
struct logger_statistics {
  std::uint64_t accepted = 0;        ///< Calls whose record entered the buffer.
  std::uint64_t written = 0;         ///< Records handed to the sinks (excludes the "dropped" notices).
  std::uint64_t dropped = 0;         ///< Calls refused because the buffer was full (drop policy).
  std::uint64_t rejected = 0;        ///< Calls refused after stop(), because formatting threw, or out of memory.
  std::uint64_t format_errors = 0;   ///< Deferred records whose formatting failed on the writer (written anyway).
  std::uint64_t truncated = 0;       ///< Accepted records whose message was cut.
  std::uint64_t blocked = 0;         ///< Times a producer slept waiting for room (block policy).
  std::uint64_t sink_errors = 0;     ///< Failed sink writes and flushes.
  std::uint64_t queued_bytes = 0;    ///< Bytes in the thread buffers not yet consumed (approximate).
  std::uint64_t thread_buffers = 0;  ///< Thread buffers the logger holds now.
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
      : format(s), location(l) {
    const fmt::string_view text(s);
    deferrable = format_is_deferrable(std::string_view(text.data(), text.size()));
  }
  /// A format string known only at run time: fmt::runtime(text). Formatted on the caller's thread.
  format_with_location(fmt::basic_runtime<char> s,  // NOLINT(google-explicit-constructor)
                       std::source_location l = std::source_location::current())
      : format(s), location(l) {}

  fmt::format_string<Args...> format;
  std::source_location location;
  /// A literal with no dynamic width or precision: may be formatted on the writer thread.
  bool deferrable = false;
};

}  // namespace detail

/// The format-string parameter of the logging members: a format string checked at compile time (or
/// fmt::runtime(text)) plus the caller's source location.
template <typename... Args>
using log_format = detail::format_with_location<std::type_identity_t<Args>...>;

/// An asynchronous logger: producers copy their arguments into per-thread buffers; one writer thread formats the
/// messages and hands them to the sinks (see the header comment).
class logger {
 public:
  /// Starts the writer thread. Throws error_exception: invalid_argument (a
  /// null sink, thread_buffer_bytes outside [1 KiB, 1 GiB], max_message_bytes
  /// not fitting half a thread buffer, batch_size 0), resource_exhausted (the thread could not be started, or
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
  /// True when a call at `level` would pass the filter (never for log_level::off, nor for a value outside the
  /// enumeration).
  [[nodiscard]] bool should_log(log_level level) const noexcept {
    return level < log_level::off && level >= level_.load(std::memory_order_relaxed);  // as level()
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
  /// Queues the message (its arguments, or its formatted text) at `level`, as try_log() but without the outcome:
  /// refusals are only counted in statistics().
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
  /// The seed's write(): log() at to_log_level(type); log_types::None logs nothing; a value outside the
  /// enumeration is refused (invalid_argument, counted in `rejected`).
  template <typename... Args>
  void write(log_types type, log_format<Args...> format, Args&&... args) {
    if (type == log_types::None) return;
    log(to_log_level(type), format, std::forward<Args>(args)...);
  }

  // ---- logging with the outcome -------------------------------------------
  /// Success when accepted or filtered by level; otherwise queue_full (drop
  /// policy), pool_stopped (stopped), invalid_argument (formatting threw, or
  /// `level` is not a record level: log_level::off or a value outside the
  /// enumeration) or resource_exhausted (formatting ran out of memory).
  /// Never throws.
  template <typename... Args>
  [[nodiscard]] result<void> try_log(log_level level, log_format<Args...> format, Args&&... args) {
    // Refused only on the filtered path: an accepted call tests nothing more.
    if (!should_log(level)) return is_record_level(level) ? result<void>{} : refuse_level(level);
    const fmt::string_view text = format.format;
    if constexpr (sizeof...(Args) == 0) {
      // Literal without replacement fields: the text is the message.
      if (!contains_brace(text)) return push_text(level, format.location, std::string_view(text.data(), text.size()));
    }
    if constexpr ((detail::deferrable_log_arg<Args> && ...)) {
      // A null C string makes {fmt} throw: such a call is formatted here, so it is refused like any call whose
      // formatting throws.
      if (format.deferrable && (detail::encodable(args) && ...)) {
        // Strings are measured once: the size reserved and the bytes copied agree.
        const std::tuple views{detail::encode_view(args)...};
        const std::size_t payload =
            std::apply([](const auto&... v) { return (std::size_t{0} + ... + detail::encoded_size(v)); }, views);
        if (payload <= max_deferred_payload_) {
          detail::record_header header;
          header.ticks = detail::log_clock_ticks(use_tsc_);
          header.formatter = &detail::format_encoded<detail::log_stored_t<Args>...>;
          header.format = text.data();
          header.format_size = static_cast<std::uint32_t>(text.size());
          header.level = level;
          header.location = format.location;
          return push(header, payload, [&views]([[maybe_unused]] std::byte* out) noexcept {
            std::apply([&out](const auto&... v) { ((out = detail::encode_arg(out, v)), ...); }, views);
          });
        }
      }
    }
    // A buffer on the stack (500 bytes inline): safe in a nested call (a
    // formatter that logs) and in a thread_local destructor.
    fmt::memory_buffer buffer;
    try {
      const std::tuple<decltype(detail::caller_format_view(args))...> views{detail::caller_format_view(args)...};
      std::apply([&](const auto&... v) { fmt::vformat_to(fmt::appender(buffer), text, fmt::make_format_args(v...)); },
                 views);
    } catch (const std::bad_alloc&) {
      return refuse_out_of_memory();
    } catch (const std::exception& e) {
      return refuse_format(e.what());
    } catch (...) {
      return refuse_format("a non-standard exception");
    }
    return push_text(level, format.location, std::string_view(buffer.data(), buffer.size()));
  }
  /// try_log() for a message that is already text (not a format string).
  [[nodiscard]] result<void> try_log_text(log_level level, std::string_view text,
                                          std::source_location location = std::source_location::current()) {
    // Refused only on the filtered path: an accepted call tests nothing more.
    if (!should_log(level)) return is_record_level(level) ? result<void>{} : refuse_level(level);
    return push_text(level, location, text);
  }

  // ---- control -------------------------------------------------------------
  /// See the contract (the calling thread may write the pending records itself: flush_on_caller).
  /// invalid_argument when called on the writer thread.
  [[nodiscard]] result<void> flush();
  /// Drains, flushes and joins; idempotent and safe to call concurrently.
  /// Called from a sink (the writer thread), it only begins the stop (see
  /// the contract).
  void stop();

  /// A snapshot of the counters.
  [[nodiscard]] logger_statistics statistics() const noexcept;
  /// Bytes of each thread's buffer (logger_options::thread_buffer_bytes rounded up to a power of two).
  [[nodiscard]] std::size_t thread_buffer_bytes() const noexcept { return thread_buffer_bytes_; }
  /// The longest message kept whole (logger_options::max_message_bytes, or its default).
  [[nodiscard]] std::size_t max_message_bytes() const noexcept { return max_message_bytes_; }
  /// The options given at construction (`level` there is the initial level; level() gives the current one).
  [[nodiscard]] const logger_options& options() const noexcept { return options_; }

 private:
  static bool contains_brace(fmt::string_view text) noexcept {
    for (const char c : text) {
      if (c == '{' || c == '}') return true;
    }
    return false;
  }

  // Producer path. The stop protocol: a producer sets its buffer's `busy`,
  // runs the light side of the asymmetric fence, then checks closed_; stop()
  // sets closed_, runs the heavy side, and the writer then waits for every
  // `busy` to clear before its final drain. Either the producer sees closed_
  // (and refuses), or the writer sees it busy (and waits for its record).
  template <typename Fill>
  result<void> push(detail::record_header& header, std::size_t payload, Fill&& fill) {
    detail::thread_buffer* b = nullptr;
    bool one_shot = false;  // a buffer for this call only (see attach_thread())
    if (detail::last_thread_buffer.owner == id_) [[likely]] {
      b = detail::last_thread_buffer.buffer;
    } else {
      if (result<void> attached = attach_thread(b, payload, one_shot); !attached) return attached;
    }
    const std::size_t bytes = detail::record_bytes(payload);
    header.bytes = static_cast<std::uint32_t>(bytes);
    header.payload = static_cast<std::uint32_t>(payload);
    // relaxed + the light fence: the Dekker pair with stop() (see above).
    b->busy.store(1, std::memory_order_relaxed);
    detail::asymmetric_fence_light();
    if (closed_.load(std::memory_order_relaxed)) [[unlikely]] {
      b->busy.store(0, std::memory_order_release);  // pairs with the writer's acquire in its final wait
      if (one_shot) release_one_shot(b);
      return refuse_stopped();
    }
    std::byte* out = b->try_reserve(bytes);
    if (out == nullptr) [[unlikely]] {
      if (result<void> room = wait_for_room(*b, bytes, out); !room) {
        b->busy.store(0, std::memory_order_release);  // as above
        if (one_shot) release_one_shot(b);
        return room;
      }
    }
    // A copy construction, not a memcpy of the header's bytes: the header
    // was just assembled field by field, and a memcpy copies it with wide
    // loads that each span several of those stores, which the CPU cannot
    // forward (a stall of ~15 cycles per load, a quarter of the call).
    ::new (static_cast<void*>(out)) detail::record_header(header);
    fill(out + sizeof header);
    // Counted before the record is published, so a statistics() snapshot
    // never shows more written than accepted.
    b->count_accepted();
    if (header.truncated) [[unlikely]]
      note_truncated();
    b->commit(bytes);
    // release: the record (published by commit) happens-before the writer's
    // acquire load of busy == 0 in its final wait.
    b->busy.store(0, std::memory_order_release);
    if (one_shot) [[unlikely]]
      release_one_shot(b);
    // The record is published; the light fence orders that before reading
    // writer_parked_ (pairs with the writer's store of it and its heavy
    // fence in park_writer()). Only the call that takes the flag wakes the
    // writer: one system call per park, not one per record.
    detail::asymmetric_fence_light();
    if (writer_parked_.load(std::memory_order_relaxed)) [[unlikely]]
      wake_writer();
    return {};
  }

  result<void> push_text(log_level level, const std::source_location& location, std::string_view text) {
    detail::record_header header;
    header.ticks = detail::log_clock_ticks(use_tsc_);
    header.level = level;
    header.location = location;
    std::size_t length = text.size();
    if (length > max_message_bytes_) [[unlikely]] {
      length = max_message_bytes_;
      header.truncated = true;  // counted once accepted
    }
    return push(header, length, [&](std::byte* out) noexcept {
      if (length != 0) std::memcpy(out, text.data(), length);
    });
  }

  result<void> attach_thread(detail::thread_buffer*& out, std::size_t payload, bool& one_shot) noexcept;
  void release_one_shot(detail::thread_buffer* b) noexcept;
  result<void> wait_for_room(detail::thread_buffer& b, std::size_t bytes, std::byte*& out) noexcept;
  result<void> refuse_stopped() noexcept;
  // Refuses new calls and tells the writer to drain and exit (the first
  // half of stop(); idempotent).
  void request_stop() noexcept;
  result<void> refuse_format(const char* what) noexcept;
  // trace..critical: the levels a record may have (off, and values outside
  // the enumeration, are not).
  static constexpr bool is_record_level(log_level level) noexcept {
    return static_cast<std::uint8_t>(level) <= static_cast<std::uint8_t>(log_level::critical);
  }
  result<void> refuse_level(log_level level) noexcept;
  result<void> refuse_out_of_memory() noexcept;
  void note_truncated() noexcept;
  void writer_main();
  bool refresh_buffers();
  std::size_t drain_batch();
  bool write_one(const detail::thread_buffer& b, const detail::record_header& h, const std::byte* payload);
  void write_record(const log_record& record);
  void write_dropped_notice();
  void flush_sinks();
  bool service_flush_request();  // false: not served (out of memory), retried later
  void reap_gone_buffers();
  void final_drain();
  void report_sink_error(const thread_system::error& e) noexcept;
  void sink_threw(const char* what_failed, const char* what) noexcept;
  bool writer_has_work() noexcept;
  // What the idle writer thread finds: nothing, work, or the role taken by
  // a flush() writing on its caller's thread.
  enum class idle_look : std::uint8_t { nothing, work, role_taken };
  idle_look look_for_work() noexcept;
  void take_role(std::unique_lock<std::mutex>& role);
  // true: the ticket is served (by this thread or by the holder of the role);
  // false: not (the role stayed taken, or out of memory): wait for the writer.
  [[nodiscard]] bool flush_on_this_thread(std::uint64_t ticket);
  bool writer_pending() const noexcept;
  void park_writer();
  void wake_writer() noexcept;

  logger_options options_;
  std::vector<std::shared_ptr<log_sink>> sinks_;
  std::size_t thread_buffer_bytes_ = 0;
  std::size_t max_message_bytes_ = 0;
  std::size_t max_deferred_payload_ = 0;
  std::uint64_t id_ = 0;  // unique per logger in the process (thread buffers are looked up by it)
  bool use_tsc_ = false;
  alignas(64) std::atomic<log_level> level_{log_level::info};
  std::atomic<bool> closed_{false};  // set by stop(); read by every producer call (see push())

  // Producer-side counters of rare events (accepted and dropped are per buffer).
  alignas(64) std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> truncated_{0};
  std::atomic<std::uint64_t> blocked_{0};
  std::atomic<std::uint64_t> dropped_late_{0};   // late calls dropped (no buffer to count them in)
  std::atomic<std::uint64_t> one_shot_live_{0};  // one-shot buffers not yet reaped

  // Writer-side counters (single writer; read by statistics()).
  alignas(64) std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> sink_errors_{0};
  std::atomic<std::uint64_t> format_errors_{0};

  // Flush hand-shake: each flush() takes a ticket; the writer publishes the
  // highest ticket it has served after flushing the sinks.
  alignas(64) std::atomic<std::uint64_t> flush_request_{0};
  std::atomic<std::uint64_t> flushed_{0};
  std::atomic<bool> stop_requested_{false};             // set (release) by stop() after its heavy fence
  alignas(64) std::atomic<bool> writer_parked_{false};  // the writer is about to sleep or asleep (park_writer())

  event_count writer_wakeup_;  // the writer parks here; producers, flush() and stop() notify
  event_count room_freed_;     // blocked producers park here; the writer notifies
  event_count flush_done_;     // flush() callers park here; the writer notifies

  // The thread buffers. buffers_ is guarded by buffers_mutex_; a change bumps
  // buffers_version_ (release) so the writer re-reads the list. The retired_
  // counters keep the statistics of buffers the writer has let go.
  mutable std::mutex buffers_mutex_;
  std::vector<detail::thread_buffer*> buffers_;
  std::uint64_t retired_accepted_ = 0;  // guarded by buffers_mutex_
  std::uint64_t retired_dropped_ = 0;   // guarded by buffers_mutex_
  std::atomic<std::uint64_t> buffers_version_{0};

  // The writer's role: the state below and the calls into the sinks are the
  // holder's. The writer thread holds it while it drains (not while it polls
  // or sleeps); a flush() on a thread that is no logger's writer takes it to
  // write the pending records itself (logger_options::flush_on_caller).
  std::mutex writer_role_;

  // The writer's state (guarded by writer_role_).
  std::vector<detail::thread_buffer*> writer_buffers_;
  std::uint64_t writer_version_ = 0;
  // Per writer_buffers_ entry (at least as long): where the batch has read
  // to, the published end, the next record's ticks, a flush's targets.
  std::vector<std::uint64_t> positions_;
  std::vector<std::uint64_t> ends_;
  std::vector<std::uint64_t> heads_;
  std::vector<std::uint64_t> ends_snapshot_;
  fmt::memory_buffer message_;         // a deferred record's formatted message
  detail::format_cache format_cache_;  // the writer's parsed format strings (detail/arg_codec.hpp)
  line_formatter formatter_;
  std::unique_ptr<detail::tick_converter> clock_;
  std::uint64_t dropped_reported_ = 0;
  std::uint64_t flushed_local_ = 0;
  std::uint64_t written_local_ = 0;
  bool sinks_dirty_ = false;

  std::mutex stop_mutex_;
  bool stopped_ = false;  // guarded by stop_mutex_
  std::thread writer_;
  // Set while this logger's writer waits in another logger (a sink's call:
  // room under `block`, flush(), stop()); see writer_wait_mark (logger.cpp).
  std::atomic<bool> writer_waiting_elsewhere_{false};

  class writer_wait_mark;
  // A wait of another logger's writer thread (`writer_of`) in this logger
  // ends: this logger's writer has come to wait in a logger (logger.cpp).
  [[nodiscard]] bool gave_up_on_a_waiting_writer(const logger* writer_of) const noexcept;
  // The logger whose writer thread this is, or whose records this thread
  // writes in flush(), or null (logger_writer.cpp).
  [[nodiscard]] static logger* writer_thread_logger() noexcept;
  // Makes this thread the writer of `l` for its lifetime (the previous value
  // is restored at the end).
  class writer_thread_scope {
   public:
    explicit writer_thread_scope(logger* l) noexcept;
    writer_thread_scope(const writer_thread_scope&) = delete;
    writer_thread_scope& operator=(const writer_thread_scope&) = delete;
    ~writer_thread_scope();

   private:
    logger* previous_;
  };
  [[nodiscard]] bool on_writer_thread() const noexcept { return writer_thread_logger() == this; }
  void finish_stop();
};

}  // namespace thread_system
