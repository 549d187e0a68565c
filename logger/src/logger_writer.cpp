// The async logger's writer thread: its loop and sleep, draining and
// merging the thread buffers, formatting deferred records, the sinks, flush
// requests, reaping buffers of exited threads and the final drain at stop.
// The contract is in include/thread_system/logger/logger.hpp.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

#include "thread_system/detail/spin.hpp"
#include "thread_system/detail/thread_attributes.hpp"
#include "thread_system/logger/logger.hpp"
#include "tick_converter.hpp"

namespace thread_system {

namespace {

// Polls of empty buffers (writer_poll_interval apart, ~50 us in all) before
// yielding and then sleeping: a longer spin would keep a core busy at
// moderate log rates.
constexpr int writer_spins = 48;
constexpr int writer_yields = 4;  // yields before the writer sleeps
// Polls after a flush() written on its caller's thread during which the
// idle writer does not look for records (writer_main()).
constexpr int writer_defer_polls = 16;
// While it is awake and the producers are slower than it, the writer looks
// for new records at most this often. Each look pulls the lines a producer
// has just written (and, through the hardware prefetchers, the next ones it
// is about to write) into the writer's cache; the producer's next stores
// then wait for them to come back, a cross-core round trip per call. Reading
// right behind a producer (no pause, or 0.5 us) made the median call 60 ns
// here and a single producer's rate fall to 6 M/s; every 1 us keeps the
// call at 20 ns, and a burst reaches the sinks sooner than with a longer
// pause (bursts of 10: 6.5 M/s at 1 us, 2.1 M/s at 4 us; docs/PERFORMANCE.md).
constexpr std::chrono::nanoseconds writer_poll_interval{1'000};

// How long flush() spins for the writer's role before it waits for the
// writer thread instead: a round of the writer thread over a burst of
// records is shorter.
constexpr std::chrono::microseconds flush_role_spin{20};

// A few pause instructions between two reads of the clock (or of a word).
void relax_briefly() noexcept {
  for (int i = 0; i < 8; ++i) detail::cpu_relax();
}

void poll_pause() noexcept {
  const auto until = std::chrono::steady_clock::now() + writer_poll_interval;
  do {
    relax_briefly();
  } while (std::chrono::steady_clock::now() < until);
}
}  // namespace

// ---------------------------------------------------------------------------
// writer
// ---------------------------------------------------------------------------

bool logger::refresh_buffers() {
  // acquire: pairs with the release increments in attach_thread() and
  // reap_gone_buffers(); the list is then read under the mutex.
  const std::uint64_t version = buffers_version_.load(std::memory_order_acquire);
  if (version == writer_version_) return true;
  try {
    std::lock_guard lock(buffers_mutex_);
    // The per-entry vectors first: if an allocation fails they are only
    // longer than the list, never shorter.
    const std::size_t n = std::max(buffers_.size(), positions_.size());
    positions_.resize(n);
    ends_.resize(n);
    heads_.resize(n);
    ends_snapshot_.resize(n);
    writer_buffers_ = buffers_;
    writer_version_ = version;
    return true;
  } catch (const std::bad_alloc&) {
    return false;  // the old list stays valid; retried next pass
  }
}

bool logger::writer_pending() const noexcept {
  for (const detail::thread_buffer* b : writer_buffers_) {
    if (b->published() != b->consumed()) return true;
  }
  return false;
}

bool logger::writer_has_work() noexcept {
  // acquire loads: see refresh_buffers(), flush() and stop().
  if (buffers_version_.load(std::memory_order_acquire) != writer_version_) return true;
  if (flush_request_.load(std::memory_order_acquire) > flushed_local_) return true;
  if (stop_requested_.load(std::memory_order_acquire)) return true;
  for (const detail::thread_buffer* b : writer_buffers_) {
    if (b->published() != b->consumed()) return true;
    // relaxed: a hint to reap; reap_gone_buffers() re-reads with acquire.
    if (b->producer_gone.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

// Producers publish a record, run the light fence and read writer_parked_
// (push()). The writer stores the flag, announces itself to the event count
// and runs the heavy fence before its last check. A producer that reads
// false either read it before its barrier point (the heavy fence's effect on
// its thread), so its record is visible to that check, or read it after
// another producer had taken the flag, and that producer notifies. One that
// reads true takes the flag (exchange) and notifies, and the event count's
// own protocol makes that notification reach a writer that has announced
// itself. The writer re-checks everything when it wakes or cancels, and sets
// the flag again before its next sleep.
void logger::park_writer() {
  // relaxed: ordered by the heavy fence below (the Dekker pair with push()).
  writer_parked_.store(true, std::memory_order_relaxed);
  const auto key = writer_wakeup_.prepare_wait();
  // Without the barrier (membarrier failed after registration: a seccomp
  // filter installed later) a producer's record may be invisible to the
  // check below while it skipped the notification: the writer then sleeps
  // at most 1 ms at a time, so such a record waits that long, never forever.
  const bool paired = detail::asymmetric_fence_heavy();
  if (look_for_work() != idle_look::nothing) {  // a flush() holding the role may leave records: look again
    writer_wakeup_.cancel_wait();
  } else if (paired) {
    writer_wakeup_.commit_wait(key);
  } else {
    (void)writer_wakeup_.commit_wait_until(key, std::chrono::steady_clock::now() + std::chrono::milliseconds(1));
  }
  // relaxed: a hint (producers stop taking the slow path). Written only if
  // still set, so the line producers read stays shared.
  if (writer_parked_.load(std::memory_order_relaxed)) writer_parked_.store(false, std::memory_order_relaxed);
}

void logger::wake_writer() noexcept {
  // relaxed: only which producer wins matters (one system call per park);
  // the records' visibility comes from their release stores and the event
  // count's fences (see park_writer()).
  if (writer_parked_.exchange(false, std::memory_order_relaxed)) writer_wakeup_.notify_one();
}

namespace {
// The logger whose writer runs on this thread (set for the writer's life),
// or whose records this thread writes in flush() (set meanwhile).
thread_local logger* tl_writer_of = nullptr;
}  // namespace

logger* logger::writer_thread_logger() noexcept { return tl_writer_of; }

logger::writer_thread_scope::writer_thread_scope(logger* l) noexcept : previous_(tl_writer_of) { tl_writer_of = l; }
logger::writer_thread_scope::~writer_thread_scope() { tl_writer_of = previous_; }

void logger::writer_main() {
  const writer_thread_scope scope(this);
  (void)detail::set_current_thread_name(options_.name);  // cosmetic; failure does not matter
  // While threads write their records at flush() (flushed_ moves while this
  // thread is not writing), it leaves new records to them: a look would pull
  // the lines they are writing, and a drain would make their flush() wait
  // for it. It looks again at the end of its spin phase, so a record that no
  // flush takes waits about 50 us at most.
  std::uint64_t flushes_seen = 0;
  int since_caller_flush = writer_defer_polls;  // polls since flushed_ was seen to move
  const auto callers_flushed_lately = [&] {
    // relaxed: a hint; the role and the records' release stores order the data.
    const std::uint64_t flushes = flushed_.load(std::memory_order_relaxed);
    if (flushes != flushes_seen) {
      flushes_seen = flushes;
      since_caller_flush = 0;
    }
    if (since_caller_flush == writer_defer_polls) return false;
    ++since_caller_flush;  // stops at writer_defer_polls (a writer may idle for years)
    return true;
  };
  for (;;) {
    // The writer's state and the sinks belong to whoever holds the role: this
    // thread, or a thread in flush() writing the records itself.
    std::unique_lock role(writer_role_, std::defer_lock);
    take_role(role);
    refresh_buffers();
    const std::size_t n = drain_batch();
    service_flush_request();
    flushes_seen = flushed_local_;  // this thread's own flushes are not callers'
    if (n != 0) {
      reap_gone_buffers();  // keeps the list short while threads come and go
      role.unlock();
      if (n == options_.batch_size) continue;
      // A short batch means the producers are slower than the writer: do not
      // come back for their next record at once (see poll_pause()).
      poll_pause();
      if (!callers_flushed_lately()) continue;
    } else {
      // acquire: pairs with the release store in stop() after its heavy fence.
      if (stop_requested_.load(std::memory_order_acquire)) {
        final_drain();  // the role held to the end: a flush() that gets it later finds flushed_ final
        return;
      }
      reap_gone_buffers();
      if (sinks_dirty_ && options_.flush_when_idle) {
        write_dropped_notice();
        flush_sinks();
      }
      role.unlock();
    }
    // Nothing ready, or left to flushing threads: poll briefly, then yield,
    // then sleep until a producer, flush() or stop() notifies.
    bool found = false;
    for (int i = 0; i < writer_spins && !found; ++i) {
      // A flush() holding the role writes what is there: keep polling.
      found = !callers_flushed_lately() && look_for_work() == idle_look::work;
      if (!found) poll_pause();
    }
    for (int i = 0; i < writer_yields && !found; ++i) {
      std::this_thread::yield();
      found = look_for_work() == idle_look::work;
    }
    if (!found) park_writer();
  }
}

void logger::take_role(std::unique_lock<std::mutex>& role) {
  // A flush() holds the role while it writes: poll for it as for records, so
  // that its unlock does not have to wake this thread (a system call on the
  // flusher's path); a long hold (slow sinks) is waited out asleep. (Flushers
  // never sleep on the role: flush_on_this_thread().)
  for (int i = 0; i < writer_spins; ++i) {
    if (role.try_lock()) return;
    poll_pause();
  }
  role.lock();
}

logger::idle_look logger::look_for_work() noexcept {
  // writer_has_work() reads state that the role guards.
  const std::unique_lock role(writer_role_, std::try_to_lock);
  if (!role.owns_lock()) return idle_look::role_taken;
  return writer_has_work() ? idle_look::work : idle_look::nothing;
}

std::size_t logger::drain_batch() {
  const std::size_t k = writer_buffers_.size();
  if (k == 0) return 0;
  // With several buffers, records stamped after `horizon` wait for the next
  // batch. Otherwise: we read A's end, A publishes x, B sees x's effect and
  // logs y, we read B's end; y (later stamp) would be written before x.
  // With the horizon read first, y is stamped after it and waits, and x
  // joins it in the next batch (stamped before y, so merged first).
  const std::uint64_t horizon = k > 1 ? detail::log_clock_ticks(use_tsc_) : ~std::uint64_t{0};
  detail::clock_read_fence();  // the ends below are read after the clock
  bool any = false;
  for (std::size_t i = 0; i < k; ++i) {
    detail::thread_buffer* b = writer_buffers_[i];
    positions_[i] = b->consumed();
    ends_[i] = b->published();  // acquire: the records up to here are visible
    any = any || positions_[i] != ends_[i];
  }
  if (!any) return 0;
  // The records just made visible may follow drops: report those first.
  write_dropped_notice();
  clock_->refresh();
  // Head ticks of buffer i, skipping wrap markers (meaningful while it has a record).
  auto load_head = [&](std::size_t i) {
    const detail::thread_buffer* b = writer_buffers_[i];
    while (positions_[i] != ends_[i]) {
      std::uint32_t first[2];
      std::memcpy(first, b->at(positions_[i]), sizeof first);
      if (first[1] != detail::wrap_marker) {
        std::uint64_t ticks = 0;
        std::memcpy(&ticks, b->at(positions_[i]) + offsetof(detail::record_header, ticks), sizeof ticks);
        heads_[i] = ticks;
        return;
      }
      positions_[i] += first[0];
    }
  };
  for (std::size_t i = 0; i < k; ++i) load_head(i);
  std::size_t n = 0;
  bool flush_after = false;
  while (n < options_.batch_size) {
    // The buffer whose next record is oldest (per-buffer order is kept: only
    // heads compete).
    std::size_t pick = k;
    for (std::size_t i = 0; i < k; ++i) {
      // Ready: stamped before the horizon, or already visible at the previous
      // batch (so a clock that runs ahead on the producer's core delays a
      // record by one batch at most).
      const bool ready = heads_[i] <= horizon || positions_[i] < writer_buffers_[i]->seen_end;
      if (positions_[i] != ends_[i] && ready && (pick == k || heads_[i] < heads_[pick])) pick = i;
    }
    if (pick == k) break;
    const detail::thread_buffer& b = *writer_buffers_[pick];
    detail::record_header h;
    std::memcpy(&h, b.at(positions_[pick]), sizeof h);
    if (write_one(b, h, b.at(positions_[pick]) + sizeof h)) flush_after = true;
    positions_[pick] += h.bytes;
    ++n;
    load_head(pick);
  }
  for (std::size_t i = 0; i < k; ++i) {
    if (positions_[i] != writer_buffers_[i]->consumed()) writer_buffers_[i]->release_to(positions_[i]);
    writer_buffers_[i]->seen_end = ends_[i];
  }
  if (options_.overflow == overflow_policy::block) {
    // Room was freed with release stores; notify_all()'s fence orders them
    // before reading the waiter count (pairs with wait_for_room()).
    room_freed_.notify_all();
  }
  written_local_ += n;
  // release: pairs with statistics()' acquire load, which then sees every
  // `accepted` count made before these records were published.
  written_.store(written_local_, std::memory_order_release);
  if (flush_after) flush_sinks();
  return n;
}

bool logger::write_one(const detail::thread_buffer& b, const detail::record_header& h, const std::byte* payload) {
  log_record record;
  record.level = h.level;
  record.time = clock_->to_system(h.ticks);
  record.thread_id = b.thread_id();
  record.file = h.location.file_name();
  record.line = h.location.line();
  record.function = h.location.function_name();
  record.truncated = h.truncated;
  if (h.formatter == nullptr) {
    record.message = std::string_view(reinterpret_cast<const char*>(payload), h.payload);  // NOLINT
  } else {
    message_.clear();
    // The error text goes into a fixed buffer (no allocation), written while
    // the exception (and its what()) is alive.
    static thread_local char failure_text[256];
    int failure_length = -1;
    const auto note_failure = [&](const char* what) noexcept {
      failure_length = std::snprintf(failure_text, sizeof failure_text, "<format error: %s>", what);
      if (failure_length < 0) failure_length = 0;
      if (static_cast<std::size_t>(failure_length) >= sizeof failure_text) failure_length = sizeof failure_text - 1;
    };
    try {
      h.formatter(format_cache_, message_, fmt::string_view(h.format, h.format_size), payload);
    } catch (const std::bad_alloc&) {
      note_failure("out of memory");
    } catch (const std::exception& e) {
      note_failure(e.what());
    } catch (...) {
      note_failure("a non-standard exception");
    }
    if (failure_length >= 0) {
      format_errors_.fetch_add(1, std::memory_order_relaxed);  // a statistic
      record.message = std::string_view(failure_text, static_cast<std::size_t>(failure_length));
    } else {
      std::size_t length = message_.size();
      if (length > max_message_bytes_) {
        length = max_message_bytes_;
        record.truncated = true;
        note_truncated();
      }
      record.message = std::string_view(message_.data(), length);
    }
  }
  write_record(record);
  return h.level >= options_.flush_level && options_.flush_level != log_level::off;
}

void logger::write_record(const log_record& record) {
  log_entry entry(record, formatter_);
  for (const auto& sink : sinks_) {
    try {
      if (auto r = sink->write(entry); !r) report_sink_error(r.error());
    } catch (const std::exception& e) {
      sink_threw("sink write threw: ", e.what());
    } catch (...) {
      sink_threw("sink write threw: ", "a non-standard exception");
    }
  }
  sinks_dirty_ = true;
}

void logger::sink_threw(const char* what_failed, const char* what) noexcept {
  try {
    report_sink_error(thread_system::error{error_code::job_failed, std::string(what_failed) + what});
  } catch (...) {
    // Out of memory building the error: counted, and a line that needs no allocation.
    sink_errors_.fetch_add(1, std::memory_order_relaxed);  // a statistic
    std::fprintf(stderr, "thread_system logger: %s%s (error not reported: out of memory)\n", what_failed, what);
  }
}

void logger::write_dropped_notice() {
  // relaxed: every drop that must be reported here was ordered before this
  // load by an acquire (a later record's publication or a flush request).
  // relaxed (dropped_late_): as the per-buffer counts.
  std::uint64_t dropped = retired_dropped_ + dropped_late_.load(std::memory_order_relaxed);  // retired_: ours
  for (const detail::thread_buffer* b : writer_buffers_) dropped += b->dropped();
  if (dropped <= dropped_reported_) return;
  const std::uint64_t count = dropped - dropped_reported_;
  dropped_reported_ = dropped;
  char text[64];
  const int length = std::snprintf(text, sizeof text, "%llu messages dropped", static_cast<unsigned long long>(count));
  log_record record;
  record.level = log_level::warn;
  record.time = std::chrono::system_clock::now();
  record.thread_id = current_thread_id();
  record.message = std::string_view(text, length < 0 ? 0 : static_cast<std::size_t>(length));
  write_record(record);
}

void logger::flush_sinks() {
  for (const auto& sink : sinks_) {
    try {
      if (auto r = sink->flush(); !r) report_sink_error(r.error());
    } catch (const std::exception& e) {
      sink_threw("sink flush threw: ", e.what());
    } catch (...) {
      sink_threw("sink flush threw: ", "a non-standard exception");
    }
  }
  sinks_dirty_ = false;
}

bool logger::service_flush_request() {
  // acquire: pairs with the acq_rel increment in flush(); every record the
  // flushers' calls were ordered after is published before that increment.
  const std::uint64_t request = flush_request_.load(std::memory_order_acquire);
  if (request <= flushed_local_) return true;
  if (!refresh_buffers()) return false;  // out of memory: retried next pass
  // Everything published now (the targets) is written before the flush.
  for (std::size_t i = 0; i < writer_buffers_.size(); ++i) ends_snapshot_[i] = writer_buffers_[i]->published();
  for (;;) {
    bool done = true;
    for (std::size_t i = 0; i < writer_buffers_.size(); ++i) {
      if (writer_buffers_[i]->consumed() < ends_snapshot_[i]) done = false;
    }
    if (done) break;
    (void)drain_batch();
  }
  write_dropped_notice();
  flush_sinks();
  flushed_local_ = request;
  // release: the records written and the flushes above happen-before the
  // flusher's acquire load of flushed_; pairs with flush().
  flushed_.store(request, std::memory_order_release);
  flush_done_.notify_all();
  return true;
}

bool logger::flush_on_this_thread(std::uint64_t ticket) {
  // acquire: pairs with the release store of flushed_ by whichever thread
  // served the ticket (its writes and sink flushes happen-before our return).
  if (flushed_.load(std::memory_order_acquire) >= ticket) return true;
  // The holder (the writer thread in a round, or another flusher) may serve
  // this ticket itself. Spin a while for the role; if it stays taken, give
  // up and let flush() wait for the writer thread as without the option. Not
  // asleep in lock(): the writer thread takes the role back right after each
  // round, ahead of a sleeper the unlock wakes, so under a steady load a
  // sleeper could lose every round and, asleep, never see its ticket served.
  std::unique_lock role(writer_role_, std::defer_lock);
  const auto spin_until = std::chrono::steady_clock::now() + flush_role_spin;
  while (!role.try_lock()) {
    if (flushed_.load(std::memory_order_acquire) >= ticket) return true;  // acquire: as above
    if (std::chrono::steady_clock::now() >= spin_until) return false;
    relax_briefly();
  }
  // That round served the ticket, or the writer ran its final drain (which
  // leaves flushed_ at its maximum before it lets the role go).
  if (flushed_.load(std::memory_order_acquire) >= ticket) return true;
  // A sink that logs, flushes or stops this logger from here is treated as
  // one on the writer thread (logger.hpp).
  const writer_thread_scope scope(this);
  return service_flush_request();
}

void logger::reap_gone_buffers() {
  for (std::size_t i = 0; i < writer_buffers_.size();) {
    detail::thread_buffer* b = writer_buffers_[i];
    // acquire: pairs with the release store at the owner's exit; its last
    // record is then visible to published().
    if (!b->producer_gone.load(std::memory_order_acquire) || b->published() != b->consumed()) {
      ++i;
      continue;
    }
    {
      std::lock_guard lock(buffers_mutex_);
      std::erase(buffers_, b);
      retired_accepted_ += b->accepted();
      retired_dropped_ += b->dropped();
      buffers_version_.fetch_add(1, std::memory_order_release);  // see refresh_buffers()
    }
    writer_buffers_.erase(writer_buffers_.begin() + static_cast<std::ptrdiff_t>(i));
    if (b->one_shot) one_shot_live_.fetch_sub(1, std::memory_order_relaxed);  // a bound, no data
    detail::thread_buffer::release(b);
  }
}

void logger::final_drain() {
  // closed_ is set and the heavy fence has run: a producer either refused,
  // or is marked busy in a buffer the list holds (it registered before its
  // check). Wait for those calls to finish, writing as they come.
  for (;;) {
    refresh_buffers();
    while (drain_batch() != 0) {
    }
    if (buffers_version_.load(std::memory_order_acquire) != writer_version_) continue;  // retry the refresh
    bool busy = false;
    for (const detail::thread_buffer* b : writer_buffers_) {
      // acquire: pairs with the release store of 0 at the end of push().
      if (b->busy.load(std::memory_order_acquire) != 0) busy = true;
    }
    if (!busy) break;
    room_freed_.notify_all();  // a producer waiting for room re-checks and sees closed_
    std::this_thread::yield();
  }
  // Records stamped after a batch's horizon wait for the next one: loop
  // until every buffer is consumed, not until a batch comes back empty.
  while (drain_batch() != 0 || writer_pending()) {
  }
  write_dropped_notice();
  flush_sinks();
  flushed_local_ = std::numeric_limits<std::uint64_t>::max();
  // release: the writes and flushes above (and written_) happen-before a
  // flusher's acquire of flushed_.
  flushed_.store(flushed_local_, std::memory_order_release);
  flush_done_.notify_all();
}

void logger::report_sink_error(const thread_system::error& e) noexcept {
  sink_errors_.fetch_add(1, std::memory_order_relaxed);  // a statistic
  if (options_.error_handler) {
    try {
      options_.error_handler(e);
    } catch (...) {  // NOLINT(bugprone-empty-catch): a failing handler must not stop the writer
    }
    return;
  }
  try {
    std::fprintf(stderr, "thread_system logger '%s': sink error: %s\n", options_.name.c_str(), e.to_string().c_str());
  } catch (...) {  // to_string() ran out of memory: the message alone, no allocation
    std::fprintf(stderr, "thread_system logger '%s': sink error: %s\n", options_.name.c_str(), e.message().c_str());
  }
}

}  // namespace thread_system
