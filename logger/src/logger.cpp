// The async logger: producer path, writer loop, flush and stop. The contract
// is in include/thread_system/logger/logger.hpp.
#include "thread_system/logger/logger.hpp"

#include <cstdio>
#include <exception>
#include <string>
#include <utility>

#include "thread_system/detail/spin.hpp"
#include "thread_system/detail/thread_attributes.hpp"

namespace thread_system {

namespace detail {
fmt::memory_buffer& thread_format_buffer() noexcept {
  thread_local fmt::memory_buffer buffer;
  return buffer;
}
}  // namespace detail

namespace {

constexpr int producer_spins = 64;  // pause-spins on a full buffer before sleeping
constexpr int writer_spins = 128;   // polls of an empty buffer before yielding
constexpr int writer_yields = 4;    // yields before the writer sleeps

std::int64_t to_ns(std::chrono::system_clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::vector<std::shared_ptr<log_sink>> checked_sinks(std::vector<std::shared_ptr<log_sink>> sinks) {
  for (const auto& s : sinks) {
    if (!s) throw error_exception(error{error_code::invalid_argument, "logger: null sink"});
  }
  return sinks;
}

std::size_t checked_capacity(const logger_options& o) {
  if (o.capacity == 0 || o.capacity > detail::record_ring::max_capacity) {
    throw error_exception(error{error_code::invalid_argument, "logger: capacity must be in [1, 2^40] slots"});
  }
  if (o.batch_size == 0) throw error_exception(error{error_code::invalid_argument, "logger: batch_size must be >= 1"});
  const std::size_t rounded = std::bit_ceil(o.capacity < 2 ? std::size_t{2} : o.capacity);
  if (o.max_message_bytes != 0 && detail::record_ring::slots_for(o.max_message_bytes) > rounded) {
    throw error_exception(
        error{error_code::invalid_argument, "logger: max_message_bytes does not fit in the buffer (raise capacity)"});
  }
  return o.capacity;
}

}  // namespace

logger::logger(std::vector<std::shared_ptr<log_sink>> sinks, logger_options options) try
    : options_(std::move(options)), sinks_(checked_sinks(std::move(sinks))), ring_(checked_capacity(options_)) {
  constexpr std::size_t default_max_message_bytes = std::size_t{16} * 1024;
  const std::size_t fits = detail::record_ring::max_text_for(ring_.capacity());
  max_message_bytes_ = options_.max_message_bytes != 0
                           ? options_.max_message_bytes
                           : (fits < default_max_message_bytes ? fits : default_max_message_bytes);
  level_.store(options_.level, std::memory_order_relaxed);  // before the logger is shared
  batch_.reserve(options_.batch_size);
  batch_text_.reserve(std::size_t{64} * 1024);
  try {
    writer_ = std::thread([this] { writer_main(); });
  } catch (const std::system_error& e) {
    throw error_exception(
        thread_system::error{error_code::resource_exhausted, std::string("logger: cannot start writer: ") + e.what()});
  }
} catch (const std::bad_alloc&) {
  // Out of memory anywhere above (the buffer, the batch, the thread): the
  // same refusal as every other entry point.
  throw error_exception(detail::out_of_memory_error().value);
}

logger::~logger() { stop(); }

// ---------------------------------------------------------------------------
// producers
// ---------------------------------------------------------------------------

result<void> logger::refuse_format(const char* what) noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic; publishes nothing
  return make_error_nothrow(error_code::invalid_argument,
                            [what] { return std::string("logger: formatting failed: ") + what; });
}

result<void> logger::refuse_out_of_memory() noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic; publishes nothing
  return detail::out_of_memory_error();
}

result<void> logger::enqueue(log_level level, const std::source_location& location, std::string_view text) {
  detail::record_header header;
  header.time_ns = to_ns(std::chrono::system_clock::now());
  header.file = location.file_name();
  header.function = location.function_name();
  header.thread_id = current_thread_id();
  header.line = location.line();
  header.level = level;
  std::size_t length = text.size();
  if (length > max_message_bytes_) {
    length = max_message_bytes_;
    header.truncated = true;
  }
  header.length = static_cast<std::uint32_t>(length);
  header.slots = static_cast<std::uint32_t>(detail::record_ring::slots_for(length));

  for (;;) {
    switch (ring_.try_push(header, text.data())) {
      case detail::record_ring::push_status::ok:
        // relaxed: a statistic. Exactness for the reader comes from its own
        // synchronisation (join in stop(), or program order for this thread).
        accepted_[header.thread_id % counter_shards].value.fetch_add(1, std::memory_order_relaxed);
        if (header.truncated) truncated_.fetch_add(1, std::memory_order_relaxed);  // a statistic
        // The record is published (release in try_push); the event count's
        // fence orders that before reading its waiter count (pairs with the
        // fence in the writer's prepare_wait()).
        writer_wakeup_.notify_one();
        return {};
      case detail::record_ring::push_status::closed:
        rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic
        return make_error(error_code::pool_stopped, "logger: stopped");
      case detail::record_ring::push_status::full:
        break;
    }
    const bool on_writer = std::this_thread::get_id() == writer_id_.load(std::memory_order_relaxed);  // set once
    if (options_.overflow == overflow_policy::drop || on_writer) {
      // relaxed: the writer reads this after acquiring a later record or a
      // flush request of this thread, which orders this increment before it.
      dropped_.fetch_add(1, std::memory_order_relaxed);
      // nothrow: a refusal is reported even when its message cannot be allocated.
      return make_error_nothrow(error_code::queue_full, [] { return "logger: buffer full, message dropped"; });
    }
    if (!wait_for_room(header.slots)) {
      rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic
      return make_error_nothrow(error_code::pool_stopped, [] { return "logger: stopped while waiting for room"; });
    }
  }
}

// Block policy: spin a little, then sleep on room_freed_ until the writer
// frees slots. Returns false once the ring is closed.
bool logger::wait_for_room(std::size_t slots) {
  for (int i = 0; i < producer_spins; ++i) {
    if (ring_.has_room_or_closed(slots)) return !ring_.is_closed();
    detail::cpu_relax();
  }
  std::this_thread::yield();
  if (ring_.has_room_or_closed(slots)) return !ring_.is_closed();
  blocked_.fetch_add(1, std::memory_order_relaxed);  // a statistic
  for (;;) {
    const auto key = room_freed_.prepare_wait();
    // The check follows prepare_wait()'s fence; the writer frees slots
    // (release) and then fences in notify_all(): one of us sees the other.
    if (ring_.has_room_or_closed(slots)) {
      room_freed_.cancel_wait();
      return !ring_.is_closed();
    }
    room_freed_.commit_wait(key);
  }
}

// ---------------------------------------------------------------------------
// writer
// ---------------------------------------------------------------------------

bool logger::writer_has_work() const noexcept {
  if (ring_.ready()) return true;
  // acquire: pairs with the release CAS in flush(); the request's target
  // and the flusher's earlier drops become visible.
  if (flush_request_.load(std::memory_order_acquire) > flushed_local_) return true;
  return ring_.drained();
}

void logger::writer_main() {
  writer_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);  // read only for equality with self
  (void)detail::set_current_thread_name(options_.name);                     // cosmetic; failure does not matter
  for (;;) {
    const std::size_t n = drain_batch();
    service_flush_request();
    if (n != 0) continue;
    if (ring_.drained()) break;
    if (sinks_dirty_ && options_.flush_when_idle) {
      write_dropped_notice();
      flush_sinks();
    }
    // Nothing ready: poll briefly, then yield, then sleep until a producer,
    // flush() or stop() notifies.
    bool found = false;
    for (int i = 0; i < writer_spins && !found; ++i) {
      found = writer_has_work();
      if (!found) detail::cpu_relax();
    }
    for (int i = 0; i < writer_yields && !found; ++i) {
      std::this_thread::yield();
      found = writer_has_work();
    }
    if (found) continue;
    const auto key = writer_wakeup_.prepare_wait();
    // Checked after prepare_wait()'s fence; producers publish, then fence in
    // notify_one(): either we see their record or they see us waiting.
    if (writer_has_work()) {
      writer_wakeup_.cancel_wait();
    } else {
      writer_wakeup_.commit_wait(key);
    }
  }
  // Closed and drained: the final notice, flush and hand-off to flushers.
  write_dropped_notice();
  flush_sinks();
  flushed_local_ = ring_.head();
  // release: the writes and flushes above (and written_) happen-before a
  // flusher's acquire of this position.
  flushed_position_.store(flushed_local_, std::memory_order_release);
  flush_done_.notify_all();
}

std::size_t logger::drain_batch() {
  batch_.clear();
  batch_text_.clear();
  const std::size_t n = ring_.pop_batch(options_.batch_size, batch_, batch_text_);
  if (n == 0) return 0;
  if (options_.overflow == overflow_policy::block) {
    // Slots were freed with release stores; notify_all()'s fence orders them
    // before reading the waiter count (pairs with wait_for_room()).
    room_freed_.notify_all();
  }
  write_dropped_notice();  // drops before these records were made visible by their acquire loads
  bool flush_after = false;
  for (const detail::popped_record& popped : batch_) {
    const detail::record_header& h = popped.header;
    log_record record;
    record.level = h.level;
    record.time = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(h.time_ns)));
    record.thread_id = h.thread_id;
    record.file = h.file != nullptr ? h.file : "";
    record.line = h.line;
    record.function = h.function != nullptr ? h.function : "";
    record.message = std::string_view(batch_text_.data() + popped.text_offset, h.length);
    record.truncated = h.truncated;
    write_record(record);
    if (h.level >= options_.flush_level && options_.flush_level != log_level::off) flush_after = true;
  }
  written_local_ += n;
  written_.store(written_local_, std::memory_order_relaxed);  // single writer; readers synchronise separately
  if (flush_after) flush_sinks();
  return n;
}

void logger::write_record(const log_record& record) {
  log_entry entry(record, formatter_);
  for (const auto& sink : sinks_) {
    try {
      if (auto r = sink->write(entry); !r) report_sink_error(r.error());
    } catch (const std::exception& e) {
      report_sink_error(thread_system::error{error_code::job_failed, std::string("sink write threw: ") + e.what()});
    } catch (...) {
      report_sink_error(thread_system::error{error_code::job_failed, "sink write threw a non-standard exception"});
    }
  }
  sinks_dirty_ = true;
}

void logger::write_dropped_notice() {
  // relaxed: every drop that must be reported here was ordered before this
  // load by an acquire (a record's publication or a flush request).
  const std::uint64_t dropped = dropped_.load(std::memory_order_relaxed);
  if (dropped == dropped_reported_) return;
  const std::uint64_t count = dropped - dropped_reported_;
  dropped_reported_ = dropped;
  const std::string message = fmt::format("{} messages dropped", count);
  log_record record;
  record.level = log_level::warn;
  record.time = std::chrono::system_clock::now();
  record.thread_id = current_thread_id();
  record.message = message;
  write_record(record);
}

void logger::flush_sinks() {
  for (const auto& sink : sinks_) {
    try {
      if (auto r = sink->flush(); !r) report_sink_error(r.error());
    } catch (const std::exception& e) {
      report_sink_error(thread_system::error{error_code::job_failed, std::string("sink flush threw: ") + e.what()});
    } catch (...) {
      report_sink_error(thread_system::error{error_code::job_failed, "sink flush threw a non-standard exception"});
    }
  }
  sinks_dirty_ = false;
}

void logger::service_flush_request() {
  // acquire: pairs with the release CAS in flush() (see writer_has_work()).
  const std::uint64_t request = flush_request_.load(std::memory_order_acquire);
  if (request <= flushed_local_ || ring_.head() < request) return;
  write_dropped_notice();
  flush_sinks();
  flushed_local_ = ring_.head();
  // release: the records written and the flushes above happen-before the
  // flusher's acquire load of the position; pairs with flush().
  flushed_position_.store(flushed_local_, std::memory_order_release);
  flush_done_.notify_all();
}

void logger::report_sink_error(const thread_system::error& e) {
  sink_errors_.fetch_add(1, std::memory_order_relaxed);  // a statistic
  if (options_.error_handler) {
    try {
      options_.error_handler(e);
    } catch (...) {  // NOLINT(bugprone-empty-catch): a failing handler must not stop the writer
    }
    return;
  }
  std::fprintf(stderr, "thread_system logger '%s': sink error: %s\n", options_.name.c_str(), e.to_string().c_str());
}

// ---------------------------------------------------------------------------
// control
// ---------------------------------------------------------------------------

result<void> logger::flush() {
  if (std::this_thread::get_id() == writer_id_.load(std::memory_order_relaxed)) {  // set once by the writer
    return make_error_nothrow(error_code::invalid_argument,
                              [] { return "logger: flush() called on the writer thread (from a sink)"; });
  }
  // Every record accepted before this call claimed its slots before this
  // load (coherence on tail_), so its position is below the target.
  const std::uint64_t target = ring_.tail();
  std::uint64_t current = flush_request_.load(std::memory_order_relaxed);  // a guess for the CAS
  while (current < target) {
    // release: our earlier drops (dropped_) happen-before the writer's
    // acquire load of the request, so they are in the notice; relaxed on
    // failure: `current` is only reloaded.
    if (flush_request_.compare_exchange_weak(current, target, std::memory_order_release, std::memory_order_relaxed)) {
      break;
    }
  }
  writer_wakeup_.notify_one();  // the request is stored; the fence inside orders it before the waiter check
  for (;;) {
    // acquire: pairs with the writer's release store after flushing.
    if (flushed_position_.load(std::memory_order_acquire) >= target) return {};
    const auto key = flush_done_.prepare_wait();
    if (flushed_position_.load(std::memory_order_acquire) >= target) {  // as above, after the fence
      flush_done_.cancel_wait();
      return {};
    }
    flush_done_.commit_wait(key);
  }
}

void logger::stop() {
  std::lock_guard lock(stop_mutex_);
  if (stopped_) return;
  stopped_ = true;
  ring_.close();
  room_freed_.notify_all();     // blocked producers re-check and see closed
  writer_wakeup_.notify_one();  // a parked writer re-checks and drains
  if (writer_.joinable()) writer_.join();
}

logger_statistics logger::statistics() const noexcept {
  logger_statistics s;
  for (const auto& shard : accepted_) s.accepted += shard.value.load(std::memory_order_relaxed);  // statistics
  // relaxed: snapshots; exact after stop() (join) or, for one's own calls, after flush().
  s.written = written_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.truncated = truncated_.load(std::memory_order_relaxed);
  s.blocked = blocked_.load(std::memory_order_relaxed);
  s.sink_errors = sink_errors_.load(std::memory_order_relaxed);
  const std::uint64_t tail = ring_.tail();
  const std::uint64_t head = ring_.head_approx();
  s.queued_slots = tail > head ? tail - head : 0;
  return s;
}

}  // namespace thread_system
