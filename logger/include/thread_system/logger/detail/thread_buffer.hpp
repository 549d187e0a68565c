// thread_buffer: one producer thread's buffer in a logger. A ring of bytes
// with exactly one producer (the thread that owns it) and one consumer (the
// logger's writer thread); records are variable-length and never wrap.
//
// Algorithm: a single-producer single-consumer ring with monotonic positions
// (Lamport, "Specifying concurrent program modules", TOPLAS 1983), each side
// keeping a private copy of the other side's position and re-reading the
// shared one only when its copy says "full" (producer) or "empty" (consumer),
// as in the FastForward / MCRingBuffer line of work (Lee et al., "A lock-free,
// cache-efficient multi-core synchronization mechanism for line-rate network
// traffic monitoring", IPDPS 2010). The common path of a push is therefore a
// copy and one release store, with no read-modify-write and no load of a
// cache line the consumer writes.
//
//   * write_pos_: bytes ever published; stored (release) by the producer
//     after writing a record, loaded (acquire) by the consumer.
//   * read_pos_: bytes ever consumed; stored (release) by the consumer after
//     it is done with a batch, loaded (acquire) by the producer when its
//     cached copy says there is no room.
//   * A record starts on a 128-byte boundary with a record_header. When a record
//     does not fit before the end of the storage, the producer writes a wrap
//     marker (the first 8 bytes of a header with payload == wrap_marker) and
//     the record starts at offset 0. Records are at most half the storage, so
//     an empty ring always has room for one.
//
// Lifetime: a buffer is shared by its thread and its logger, each holding one
// reference (release()). The thread lets go at thread exit (after marking
// producer_gone); the logger's writer lets go once the thread has gone and
// every record is consumed, or the logger at its destruction.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <source_location>
#include <type_traits>

#include "thread_system/logger/detail/arg_codec.hpp"
#include "thread_system/logger/log_level.hpp"

namespace thread_system::detail {

/// The fixed part of a record, at the start of its bytes.
struct record_header {
  std::uint32_t bytes = 0;        ///< The whole record, header included, a multiple of 8.
  std::uint32_t payload = 0;      ///< Bytes after the header (text or encoded arguments); wrap_marker: skip `bytes`.
  std::uint64_t ticks = 0;        ///< The fast clock at the call (see log_clock.hpp).
  format_fn formatter = nullptr;  ///< Null: the payload is the message text; else formats the encoded arguments.
  const char* format = nullptr;   ///< The format string (static storage) when `formatter` is set.
  std::uint32_t format_size = 0;  ///< Its length.
  log_level level = log_level::info;
  bool truncated = false;  ///< The caller cut the text to max_message_bytes.
  std::source_location location;
};

inline constexpr std::uint32_t wrap_marker = 0xFFFF'FFFFU;
/// Records start on 128-byte boundaries (two cache lines, the unit of the
/// adjacent-line prefetcher): the consumer reads only lines the producer has
/// finished with (a record sharing its last line with the next one would
/// make the producer take that line back from the consumer's cache on its
/// next call, a cross-core transfer per call).
inline constexpr std::size_t record_alignment = 128;
static_assert(sizeof(record_header) % alignof(std::uint64_t) == 0 && record_alignment % alignof(record_header) == 0);
// The producer copy-constructs a header into the ring; the writer copies it
// out with memcpy (and reads its ticks at their offset), which needs a
// trivially copyable type.
static_assert(std::is_trivially_copyable_v<record_header> && std::is_trivially_destructible_v<record_header>);

/// Asks for the 128 bytes at `p` (two cache lines) in exclusive state (x86
/// PREFETCHW; a no-op on CPUs without it), so that a later store does not
/// wait for the consumer's core to give them up.
inline void prefetch_for_write(const std::byte* p) noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("prefetchw (%0)\n\tprefetchw 64(%0)" : : "r"(p));
#elif defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 1, 3);
  __builtin_prefetch(p + 64, 1, 3);
#else
  (void)p;
#endif
}

/// How far ahead of its write position a producer prefetches. The lines a
/// producer reuses were last read by the consumer's core, so a store to them
/// must first take them back (a cross-core round trip, 100-200 ns on a VM);
/// asking for them a few records ahead takes that off the call.
inline constexpr std::size_t prefetch_distance = 2048;

/// Lines commit() prefetches at most per record, and how far ahead of the
/// write position the last of them ends.
inline constexpr std::size_t prefetch_lines_max = 8;
inline constexpr std::size_t prefetch_reach = prefetch_distance + prefetch_lines_max * record_alignment;

/// Bytes of a record with `payload` bytes after its header.
constexpr std::size_t record_bytes(std::size_t payload) noexcept {
  return (sizeof(record_header) + payload + record_alignment - 1) & ~(record_alignment - 1);
}

class thread_buffer {
 public:
  /// `bytes` must be a power of two and at least 2 * record_bytes(0). Throws
  /// std::bad_alloc.
  thread_buffer(std::size_t bytes, std::uint32_t thread_id)
      : data_(new std::byte[bytes]),
        capacity_(bytes),
        mask_(bytes - 1),
        reload_margin_(bytes > 4 * prefetch_reach ? prefetch_reach : 0),
        thread_id_(thread_id) {}
  thread_buffer(const thread_buffer&) = delete;
  thread_buffer& operator=(const thread_buffer&) = delete;
  ~thread_buffer() = default;

  // ---- producer (the owning thread) ----------------------------------------

  /// Room for a record of `bytes` (a multiple of 128, at most capacity() / 2):
  /// its start, or null when the ring is full. Writes a wrap marker first when
  /// the record must start at offset 0. Does not publish.
  std::byte* try_reserve(std::size_t bytes) noexcept {
    const std::uint64_t w = write_;
    const std::size_t offset = static_cast<std::size_t>(w) & mask_;
    const std::size_t to_end = capacity_ - offset;
    const std::size_t needed = bytes <= to_end ? bytes : to_end + bytes;
    // The copy of the consumer's position is refreshed a little before the
    // ring looks full (by the farthest line commit() prefetches), so that
    // commit() does not skip the prefetch for lines already freed.
    if (w + needed + reload_margin_ - cached_read_ > capacity_) {
      // acquire: pairs with the consumer's release store in release_to();
      // its reads of the bytes we are about to overwrite are done.
      cached_read_ = read_pos_.load(std::memory_order_acquire);
      if (w + needed - cached_read_ > capacity_) return nullptr;
    }
    if (bytes > to_end) {
      const std::uint32_t marker[2] = {static_cast<std::uint32_t>(to_end), wrap_marker};
      std::memcpy(data_.get() + offset, marker, sizeof marker);
      write_ = w + to_end;
      return data_.get();
    }
    return data_.get() + offset;
  }

  /// Publishes the record of `bytes` written at the last try_reserve().
  void commit(std::size_t bytes) noexcept {
    write_ += bytes;
    // As many lines as this record took, so a stream of long records is
    // covered too (capped: beyond that the hardware prefetcher keeps up).
    // Only lines the consumer has freed, by this side's copy of its
    // position: once the ring runs nearly full, the lines ahead are the ones
    // the consumer is reading, and taking them from it would only make it
    // take them back (a transfer each way per line).
    const std::size_t lines = bytes / 128 < prefetch_lines_max ? bytes / 128 : prefetch_lines_max;
    if (write_ + prefetch_distance + lines * 128 - cached_read_ <= capacity_) {
      for (std::size_t i = 0; i < lines; ++i) {
        prefetch_for_write(data_.get() + ((write_ + prefetch_distance + i * 128) & mask_));
      }
    }
    // release: the record's bytes happen-before the consumer's acquire load
    // in published().
    write_pos_.store(write_, std::memory_order_release);
  }

  /// The owner's counters: only the owning thread writes them (a load and a
  /// store, no read-modify-write); statistics() and the writer read them.
  void count_accepted() noexcept {
    // relaxed: a statistic; single writer.
    accepted_.store(accepted_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void count_dropped() noexcept {
    // relaxed: single writer. The writer reads it after acquiring a later
    // record of this thread (or a flush request), which orders it.
    dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // ---- consumer (the writer thread) ----------------------------------------

  /// Bytes published so far. acquire: pairs with commit().
  [[nodiscard]] std::uint64_t published() const noexcept { return write_pos_.load(std::memory_order_acquire); }
  /// Bytes consumed so far (consumer's own copy).
  [[nodiscard]] std::uint64_t consumed() const noexcept { return read_; }
  /// The bytes at position `position`.
  [[nodiscard]] const std::byte* at(std::uint64_t position) const noexcept {
    return data_.get() + (static_cast<std::size_t>(position) & mask_);
  }
  /// The end the consumer saw at its previous batch (its own bookkeeping:
  /// records before it are written in the next batch whatever their stamp).
  std::uint64_t seen_end = 0;

  /// Frees everything before `position`.
  void release_to(std::uint64_t position) noexcept {
    read_ = position;
    // release: our reads of the freed bytes happen-before the producer's
    // acquire load in try_reserve() and its overwriting them.
    read_pos_.store(position, std::memory_order_release);
  }
  /// Bytes published but not consumed (a snapshot for statistics; any thread).
  [[nodiscard]] std::uint64_t queued_bytes() const noexcept {
    // relaxed: a snapshot; the two positions only grow.
    const std::uint64_t w = write_pos_.load(std::memory_order_relaxed);
    const std::uint64_t r = read_pos_.load(std::memory_order_relaxed);
    return w > r ? w - r : 0;
  }

  // ---- shared ---------------------------------------------------------------

  [[nodiscard]] std::uint32_t thread_id() const noexcept { return thread_id_; }
  // relaxed: snapshots of single-writer counters; exact for a reader ordered
  // after the owner's calls (the writer after acquiring a later record,
  // statistics() after stop()'s join or the caller's own calls).
  [[nodiscard]] std::uint64_t accepted() const noexcept { return accepted_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  /// Set (release) by the owning thread at its exit, after its last record.
  std::atomic<bool> producer_gone{false};
  /// Set (release) by the logger when it is destroyed; the thread then drops its reference.
  std::atomic<bool> logger_gone{false};
  /// A buffer for one call from a destructor that runs after its thread's
  /// buffers were released (fixed at construction).
  bool one_shot = false;

  /// Drops one of the two references; the last one deletes the buffer.
  static void release(thread_buffer* b) noexcept {
    // acq_rel: the other owner's last uses happen-before the delete.
    if (b->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete b;
  }
  /// Frees the storage (the logger's destructor; no producer may push after it).
  void free_storage() noexcept {
    data_.reset();
    capacity_ = 0;
  }

 private:
  // Cache lines by who writes them. The consumer polls only write_pos_'s
  // line, so a push writes one line the consumer reads (besides the record).
  // Read-mostly: fixed at construction (and the rare flags above).
  std::unique_ptr<std::byte[]> data_;
  std::size_t capacity_;
  std::size_t mask_;
  std::size_t reload_margin_;  // see try_reserve(); 0 for a ring too small to prefetch in
  std::uint32_t thread_id_;
  std::atomic<int> refs_{2};

 public:
  /// Set by the producer around a push (see logger.hpp's stop protocol);
  /// read by the consumer only at stop.
  alignas(64) std::atomic<std::uint32_t> busy{0};

 private:
  // The producer's own line.
  std::uint64_t write_ = 0;                 // producer's copy of write_pos_
  std::uint64_t cached_read_ = 0;           // producer's (possibly stale) copy of read_pos_
  std::atomic<std::uint64_t> accepted_{0};  // read only by statistics()
  // Drops: written by the producer (rarely), read by the consumer at every
  // batch (the "dropped" notice), so not on the producer's own line.
  alignas(64) std::atomic<std::uint64_t> dropped_{0};
  // The publication, polled by the consumer.
  alignas(64) std::atomic<std::uint64_t> write_pos_{0};
  // The consumer's line; the producer reads it only when it looks full.
  alignas(64) std::atomic<std::uint64_t> read_pos_{0};
  std::uint64_t read_ = 0;  // consumer's copy of read_pos_
};

/// The calling thread's last-used buffer, by logger id: the fast path of the
/// lookup (trivially destructible, so no TLS guard). The full list lives in
/// logger.cpp.
struct thread_buffer_cache {
  std::uint64_t owner = 0;
  thread_buffer* buffer = nullptr;
};
inline thread_local thread_buffer_cache last_thread_buffer;

}  // namespace thread_system::detail
