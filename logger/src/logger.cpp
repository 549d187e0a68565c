// The async logger: construction, the producers' slow paths (attaching a
// thread buffer, waiting for room, refusals), flush, stop and statistics.
// The writer thread is in logger_writer.cpp; the contract is in
// include/thread_system/logger/logger.hpp.
#include "thread_system/logger/logger.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "thread_system/detail/spin.hpp"
#include "thread_system/detail/thread_attributes.hpp"
#include "tick_converter.hpp"

namespace thread_system {

namespace {

constexpr int producer_spins = 64;  // pause-spins on a full buffer before sleeping
constexpr std::size_t min_thread_buffer_bytes = 1024;
constexpr std::uint64_t max_one_shot_buffers = 1024;  // late calls' buffers alive at once (attach_thread())
constexpr std::size_t max_thread_buffer_bytes = std::size_t{1} << 30;

// relaxed: only uniqueness matters.
std::atomic<std::uint64_t> next_logger_id{0};

// The calling thread's buffers in every logger it has logged to. Released at
// thread exit: each buffer is marked producer_gone and the thread's reference
// dropped (the logger's writer drops the other once it has consumed the rest).
struct thread_registry {
  std::vector<std::pair<std::uint64_t, detail::thread_buffer*>> entries;
  thread_registry() = default;
  thread_registry(const thread_registry&) = delete;
  thread_registry& operator=(const thread_registry&) = delete;
  ~thread_registry();
};

// Set when this thread's registry has been destroyed (a log call from a
// later thread_local destructor is refused).
thread_local bool registry_destroyed = false;

thread_registry::~thread_registry() {
  detail::last_thread_buffer = {};
  registry_destroyed = true;
  for (auto& entry : entries) {
    // release: every record this thread published happens-before the
    // writer's acquire load of the flag (it then reaps the buffer).
    entry.second->producer_gone.store(true, std::memory_order_release);
    detail::thread_buffer::release(entry.second);
  }
}

thread_registry& registry() noexcept {
  thread_local thread_registry r;
  return r;
}

std::vector<std::shared_ptr<log_sink>> checked_sinks(std::vector<std::shared_ptr<log_sink>> sinks) {
  for (const auto& s : sinks) {
    if (!s) throw error_exception(thread_system::error{error_code::invalid_argument, "logger: null sink"});
  }
  return sinks;
}

}  // namespace

logger::logger(std::vector<std::shared_ptr<log_sink>> sinks, logger_options options) try
    : options_(std::move(options)), sinks_(checked_sinks(std::move(sinks))) {
  if (options_.batch_size == 0) {
    throw error_exception(thread_system::error{error_code::invalid_argument, "logger: batch_size must be >= 1"});
  }
  if (options_.thread_buffer_bytes < min_thread_buffer_bytes ||
      options_.thread_buffer_bytes > max_thread_buffer_bytes) {
    throw error_exception(
        thread_system::error{error_code::invalid_argument, "logger: thread_buffer_bytes must be in [1 KiB, 1 GiB]"});
  }
  thread_buffer_bytes_ = std::bit_ceil(options_.thread_buffer_bytes);
  // A record is at most half a buffer, so an empty buffer always has room.
  max_deferred_payload_ = thread_buffer_bytes_ / 2 - sizeof(detail::record_header);
  constexpr std::size_t default_max_message_bytes = std::size_t{16} * 1024;
  if (options_.max_message_bytes > max_deferred_payload_) {
    throw error_exception(thread_system::error{error_code::invalid_argument,
                                               "logger: max_message_bytes does not fit in half a thread buffer (raise "
                                               "thread_buffer_bytes)"});
  }
  max_message_bytes_ = options_.max_message_bytes != 0 ? options_.max_message_bytes
                                                       : std::min(default_max_message_bytes, max_deferred_payload_);
  id_ = next_logger_id.fetch_add(1, std::memory_order_relaxed) + 1;  // uniqueness only
  use_tsc_ = detail::log_clock_uses_tsc();
  detail::asymmetric_fence_init();
  level_.store(options_.level, std::memory_order_relaxed);  // before the logger is shared
  clock_ = std::make_unique<detail::tick_converter>(use_tsc_);
  message_.reserve(std::size_t{4} * 1024);
  try {
    writer_ = std::thread([this] { writer_main(); });
  } catch (const std::system_error& e) {
    throw error_exception(
        thread_system::error{error_code::resource_exhausted, std::string("logger: cannot start writer: ") + e.what()});
  }
} catch (const std::bad_alloc&) {
  // Out of memory anywhere above: the same refusal as every other entry point.
  throw error_exception(detail::out_of_memory_error().value);
}

// A logger's writer thread about to wait in another logger (`target`: for
// room, a flush, a stop): marks its own logger as having its writer waiting,
// then looks whether the target's writer is waiting somewhere too. seq_cst
// store then seq_cst load on each side (Dekker): of writers about to wait
// for each other in a cycle, the last to arrive sees the mark of the writer
// it would wait for, and does not wait. Any other thread: no mark, may wait.
class logger::writer_wait_mark {
 public:
  writer_wait_mark(logger* waiter, const logger& target) noexcept : waiter_(waiter) {
    if (waiter_ == nullptr) return;
    waiter_->writer_waiting_elsewhere_.store(true, std::memory_order_seq_cst);
    may_wait_ = !target.writer_waiting_elsewhere_.load(std::memory_order_seq_cst);
  }
  writer_wait_mark(const writer_wait_mark&) = delete;
  writer_wait_mark& operator=(const writer_wait_mark&) = delete;
  ~writer_wait_mark() {
    // seq_cst: as the store above (a stale `true` seen by another writer
    // only makes it refuse once more).
    if (waiter_ != nullptr) waiter_->writer_waiting_elsewhere_.store(false, std::memory_order_seq_cst);
  }
  [[nodiscard]] bool may_wait() const noexcept { return may_wait_; }

 private:
  logger* waiter_;
  bool may_wait_ = true;
};

logger::~logger() {
  // The destructor always waits for the writer (unlike stop() from a sink).
  if (on_writer_thread()) {
    request_stop();  // a sink destroying its own logger: outside the contract; do not join self
  } else if (logger* const writer_of = writer_thread_logger()) {
    // Another logger's sink destroys this one: its writer waits here
    // whatever the mark says (the storage must outlive this writer). Marked
    // first, then its own waiters are woken: this logger's writer, waiting
    // in that logger for room or a flush, sees the mark and gives up (see
    // wait_for_room() and flush()), so the join below ends.
    const writer_wait_mark mark(writer_of, *this);
    writer_of->room_freed_.notify_all();
    writer_of->flush_done_.notify_all();
    finish_stop();
  } else {
    finish_stop();
  }
  // No thread is inside a member now (the contract): the storage can go; a
  // thread still holding a buffer keeps only its small control part until it
  // exits or next attaches to some logger.
  std::lock_guard lock(buffers_mutex_);
  for (detail::thread_buffer* b : buffers_) {
    // release: pairs with the owning thread's acquire when it prunes.
    b->logger_gone.store(true, std::memory_order_release);
    b->free_storage();
    detail::thread_buffer::release(b);
  }
  buffers_.clear();
}

// ---------------------------------------------------------------------------
// producers
// ---------------------------------------------------------------------------

result<void> logger::attach_thread(detail::thread_buffer*& out, std::size_t payload, bool& one_shot) noexcept {
  if (closed_.load(std::memory_order_relaxed)) return refuse_stopped();  // an early out; push() decides
  if (registry_destroyed) {
    // A call from a destructor that runs after this thread's thread_locals
    // (at exit: static objects' destructors on the main thread). A buffer
    // just big enough for this one record, given to the logger at once. At
    // most max_one_shot_buffers live at a time (the writer reaps them after
    // every batch): beyond that the overflow policy applies, as to a full
    // buffer.
    while (one_shot_live_.load(std::memory_order_relaxed) >= max_one_shot_buffers) {  // a bound, no data
      // (Any logger's writer thread: it never waits here, see wait_for_room().)
      if (options_.overflow == overflow_policy::drop || writer_thread_logger() != nullptr) {
        dropped_late_.fetch_add(1, std::memory_order_relaxed);  // reported like other drops (see write_dropped_notice)
        return make_error_nothrow(error_code::queue_full, [] { return "logger: buffer full, message dropped"; });
      }
      if (closed_.load(std::memory_order_relaxed)) return refuse_stopped();
      std::this_thread::yield();  // rare: a destructor logging faster than the writer writes
    }
    const std::size_t bytes = std::bit_ceil(std::max(min_thread_buffer_bytes, 2 * detail::record_bytes(payload)));
    detail::thread_buffer* b = nullptr;
    try {
      b = new detail::thread_buffer(bytes, current_thread_id());
      b->one_shot = true;
      std::lock_guard lock(buffers_mutex_);
      // Under the mutex: stop() sets closed_ before it takes the mutex to free
      // the buffers, so either it sees this buffer or we see the flag.
      if (closed_.load(std::memory_order_relaxed)) {
        delete b;
        return refuse_stopped();
      }
      buffers_.push_back(b);
      buffers_version_.fetch_add(1, std::memory_order_release);  // see below
    } catch (...) {
      delete b;
      return refuse_out_of_memory();
    }
    one_shot_live_.fetch_add(1, std::memory_order_relaxed);  // a bound; the writer decrements when it reaps
    one_shot = true;
    out = b;
    return {};
  }
  thread_registry& reg = registry();
  for (const auto& entry : reg.entries) {
    if (entry.first == id_) {
      detail::last_thread_buffer = {id_, entry.second};
      out = entry.second;
      return {};
    }
  }
  // Let go of buffers whose logger is gone (acquire: pairs with ~logger()).
  std::erase_if(reg.entries, [](const auto& entry) {
    if (!entry.second->logger_gone.load(std::memory_order_acquire)) return false;
    detail::thread_buffer::release(entry.second);
    return true;
  });
  detail::thread_buffer* b = nullptr;
  try {
    reg.entries.reserve(reg.entries.size() + 1);
    b = new detail::thread_buffer(thread_buffer_bytes_, current_thread_id());
    std::lock_guard lock(buffers_mutex_);
    if (closed_.load(std::memory_order_relaxed)) {  // under the mutex: see the one-shot case above
      delete b;
      return refuse_stopped();
    }
    buffers_.push_back(b);
    // release: the list change happens-before the writer's acquire load of
    // the version (it then re-reads the list under the mutex).
    buffers_version_.fetch_add(1, std::memory_order_release);
  } catch (...) {
    delete b;
    return refuse_out_of_memory();
  }
  reg.entries.emplace_back(id_, b);  // reserved above: does not throw
  detail::last_thread_buffer = {id_, b};
  out = b;
  return {};
}

void logger::release_one_shot(detail::thread_buffer* b) noexcept {
  // release: the record (or the refusal) is done; the writer reaps the
  // buffer after its acquire load of the flag.
  b->producer_gone.store(true, std::memory_order_release);
  detail::thread_buffer::release(b);
}

result<void> logger::wait_for_room(detail::thread_buffer& b, std::size_t bytes, std::byte*& out) noexcept {
  logger* const writer_of = writer_thread_logger();
  if (options_.overflow == overflow_policy::drop || writer_of == this) {
    b.count_dropped();
    // nothrow: a refusal is reported even when its message cannot be allocated.
    return make_error_nothrow(error_code::queue_full, [] { return "logger: buffer full, message dropped"; });
  }
  // Another logger's writer (its sink logs here) waits only while this
  // logger's writer waits nowhere (see writer_wait_mark); set for the wait.
  const writer_wait_mark mark(writer_of, *this);
  if (!mark.may_wait()) {
    b.count_dropped();
    return make_error_nothrow(error_code::queue_full, [] {
      return "logger: buffer full, message dropped (called from another logger's sink while this logger's writer "
             "waits in a logger: waiting could close a cycle)";
    });
  }
  // closed_ is checked before each try: once stop() has begun, room freed by
  // the final drain must not let a waiting call in (the contract says it fails).
  for (int i = 0; i < producer_spins; ++i) {
    detail::cpu_relax();
    if (closed_.load(std::memory_order_relaxed)) return refuse_stopped();  // stop() wakes sleepers too; see below
    out = b.try_reserve(bytes);
    if (out != nullptr) return {};
  }
  std::this_thread::yield();
  if (closed_.load(std::memory_order_relaxed)) return refuse_stopped();  // as above
  out = b.try_reserve(bytes);
  if (out != nullptr) return {};
  blocked_.fetch_add(1, std::memory_order_relaxed);  // a statistic
  for (;;) {
    const auto key = room_freed_.prepare_wait();
    // Checked after prepare_wait()'s fence; the writer frees room (release)
    // and stop() sets closed_, each then fencing in notify_all(): one of us
    // sees the other.
    if (closed_.load(std::memory_order_relaxed)) {
      room_freed_.cancel_wait();
      return refuse_stopped();
    }
    if (gave_up_on_a_waiting_writer(writer_of)) {
      room_freed_.cancel_wait();
      b.count_dropped();
      return make_error_nothrow(error_code::queue_full, [] {
        return "logger: buffer full, message dropped (called from another logger's sink; this logger's writer "
               "came to wait for that logger)";
      });
    }
    out = b.try_reserve(bytes);
    if (out != nullptr) {
      room_freed_.cancel_wait();
      return {};
    }
    room_freed_.commit_wait(key);
  }
}

bool logger::gave_up_on_a_waiting_writer(const logger* writer_of) const noexcept {
  // A writer thread waiting here gives up once this logger's writer waits in
  // a logger itself: the destructor of the waiter's own logger, run by this
  // logger's sink, marks it and then notifies (seq_cst load after
  // prepare_wait()'s fence; pairs with the mark's seq_cst store and the
  // fence in notify_all()). Other threads wait: they close no cycle.
  return writer_of != nullptr && writer_waiting_elsewhere_.load(std::memory_order_seq_cst);
}

result<void> logger::refuse_stopped() noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic
  return make_error_nothrow(error_code::pool_stopped, [] { return "logger: stopped"; });
}

result<void> logger::refuse_level(log_level level) noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic; publishes nothing
  return make_error_nothrow(error_code::invalid_argument, [level] {
    return std::string("logger: not a record level: ") + std::to_string(static_cast<unsigned>(level)) +
           " (trace..critical)";
  });
}

result<void> logger::refuse_format(const char* what) noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic; publishes nothing
  return make_error_nothrow(error_code::invalid_argument,
                            [what] { return std::string("logger: formatting failed: ") + what; });
}

result<void> logger::refuse_out_of_memory() noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);  // a statistic; publishes nothing
  return detail::out_of_memory_error();
}

void logger::note_truncated() noexcept {
  truncated_.fetch_add(1, std::memory_order_relaxed);  // a statistic
}

// ---------------------------------------------------------------------------
// control
// ---------------------------------------------------------------------------

result<void> logger::flush() {
  logger* const writer_of = writer_thread_logger();
  if (writer_of == this) {
    return make_error_nothrow(error_code::invalid_argument,
                              [] { return "logger: flush() called on the writer thread (from a sink)"; });
  }
  const writer_wait_mark mark(writer_of, *this);  // set for the wait
  if (!mark.may_wait()) {
    return make_error_nothrow(error_code::invalid_argument, [] {
      return "logger: flush() called from another logger's sink while this logger's writer waits in a logger "
             "(waiting could close a cycle)";
    });
  }
  // acq_rel: release publishes this thread's earlier records and drops to
  // the writer's acquire load (and, through the chain of increments, those
  // of earlier flushers).
  const std::uint64_t ticket = flush_request_.fetch_add(1, std::memory_order_acq_rel) + 1;
  // A thread that is no logger's writer writes the records itself unless
  // the role stays taken; another logger's writer waits (with the marks
  // above, so a cycle cannot form), as does a caller that did not get the
  // role.
  if (writer_of == nullptr && options_.flush_on_caller && flush_on_this_thread(ticket)) return {};
  writer_wakeup_.notify_one();  // the request is stored; the fence inside orders it before the waiter check
  for (;;) {
    // acquire: pairs with the writer's release store after flushing.
    if (flushed_.load(std::memory_order_acquire) >= ticket) return {};
    const auto key = flush_done_.prepare_wait();
    if (flushed_.load(std::memory_order_acquire) >= ticket) {  // as above, after the fence
      flush_done_.cancel_wait();
      return {};
    }
    if (gave_up_on_a_waiting_writer(writer_of)) {
      flush_done_.cancel_wait();
      return make_error_nothrow(error_code::invalid_argument, [] {
        return "logger: flush() called from another logger's sink; this logger's writer came to wait for that "
               "logger";
      });
    }
    flush_done_.commit_wait(key);
  }
}

void logger::request_stop() noexcept {
  // relaxed + the heavy fence: the Dekker pair with push() (see logger.hpp).
  closed_.store(true, std::memory_order_relaxed);
  if (!detail::asymmetric_fence_heavy()) {
    // membarrier failed after registration (a seccomp filter installed
    // later forbids it). Producers rely on it (their side is a compiler
    // barrier), so carrying on could lose records or hang stop(): abort
    // with the reason rather than break the contract silently.
    std::fprintf(stderr,
                 "thread_system logger: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registration; "
                 "the logger's stop protocol depends on it. Aborting.\n");
    std::abort();
  }
  // release: the writer's acquire load of this flag happens after the fence.
  stop_requested_.store(true, std::memory_order_release);
  room_freed_.notify_all();     // blocked producers re-check and see closed_
  writer_wakeup_.notify_one();  // a parked writer re-checks and drains
}

void logger::stop() {
  logger* const writer_of = writer_thread_logger();
  if (writer_of == this) {
    // From a sink: the writer cannot join itself, nor wait for the records
    // after the one it is writing. It drains them once the sink returns;
    // the next stop() from another thread (or the destructor) joins it.
    // No mutex: a stop() on another thread may hold it while joining us.
    request_stop();
    return;
  }
  const writer_wait_mark mark(writer_of, *this);  // set for the join
  if (!mark.may_wait()) {
    request_stop();  // as from this logger's own sink (see logger.hpp)
    return;
  }
  finish_stop();
}

void logger::finish_stop() {
  std::lock_guard lock(stop_mutex_);
  if (stopped_) return;
  request_stop();
  if (writer_.joinable()) writer_.join();
  stopped_ = true;
  // No call can reach a buffer's storage any more (each checks closed_
  // first, and the writer waited out those that had passed the check): free
  // it now, so a stopped logger that is never destroyed (log_module keeps
  // its stopped default loggers) holds no thread's buffer. Buffers of exited
  // threads are released; the others keep their small control part until
  // their thread exits or the logger is destroyed.
  std::lock_guard buffers_lock(buffers_mutex_);
  std::erase_if(buffers_, [this](detail::thread_buffer* b) {
    b->free_storage();
    // acquire: pairs with the release store at the owner's exit.
    if (!b->producer_gone.load(std::memory_order_acquire)) return false;
    retired_accepted_ += b->accepted();
    retired_dropped_ += b->dropped();
    detail::thread_buffer::release(b);
    return true;
  });
}

logger_statistics logger::statistics() const noexcept {
  logger_statistics s;
  // acquire, and first: every record counted here was accepted (counted)
  // before its publication, which the writer acquired before this store;
  // so the `accepted` loads below see at least as many (written <= accepted).
  s.written = written_.load(std::memory_order_acquire);
  {
    std::lock_guard lock(buffers_mutex_);
    s.accepted = retired_accepted_;
    s.dropped = retired_dropped_;
    for (const detail::thread_buffer* b : buffers_) {
      s.accepted += b->accepted();
      s.dropped += b->dropped();
      s.queued_bytes += b->queued_bytes();
    }
    s.thread_buffers = buffers_.size();
  }
  // relaxed: snapshots; exact after stop() (join) or, for one's own calls, after flush().
  s.dropped += dropped_late_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.truncated = truncated_.load(std::memory_order_relaxed);
  s.blocked = blocked_.load(std::memory_order_relaxed);
  s.sink_errors = sink_errors_.load(std::memory_order_relaxed);
  s.format_errors = format_errors_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace thread_system
