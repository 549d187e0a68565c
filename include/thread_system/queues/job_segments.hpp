// job_segments: the storage of the two segmented mutex queues (job_queue,
// one lock for both ends; two_lock_job_queue, a lock for each end, the
// pools' mutex injector).
//
// A queue is a FIFO list of equal segments of 8-byte words holding jobs
// *packed* (job_function::pack_into: the operations pointer, the metadata
// word and only the inline words the callable uses, 3 words for a small
// job). An entry never spans two segments: when it does not fit before a
// segment's end, a skip marker (a zero first word) ends the segment and the
// entry starts the next one. What is shared here is the segment itself, its
// allocation and the entry format; how segments are linked, reused and
// locked is each queue's.
//
// Contract: no synchronisation of its own; a segment's words are written
// and read as each queue's locks and orders allow.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/config.hpp"

namespace thread_system::detail {

/// One 8-byte word of a segment; entries are built in it with placement
/// new (job_function::pack_into), hence the byte array.
struct alignas(8) job_word {
  unsigned char bytes[8];
};

/// A segment: this header, then its words, in one allocation. Header and
/// words start on a cache line, so where entries cross lines depends only
/// on their sizes, not on where the allocator put the segment.
struct alignas(64) job_segment {
  explicit job_segment(unsigned char* from) noexcept : storage(from) {}
  job_segment* next = nullptr;
  unsigned char* storage;  // what allocate() allocated, for delete[]

  [[nodiscard]] job_word* words() noexcept {
    // The words follow the header in the same allocation (an array of an
    // implicit-lifetime type, created by the allocation).
    return reinterpret_cast<job_word*>(reinterpret_cast<unsigned char*>(this) + sizeof(job_segment));
  }

  /// A segment of `words` words, unlinked. Throws std::bad_alloc. (A byte
  /// array provides the storage, with room to start the header on a cache
  /// line; the header is built in it.)
  [[nodiscard]] static job_segment* allocate(std::size_t words) {
    constexpr std::size_t overhead = alignof(job_segment) - 1 + sizeof(job_segment);
    // A size that does not fit in size_t is memory that cannot be had.
    if (words > (static_cast<std::size_t>(-1) - overhead) / sizeof(job_word)) throw std::bad_alloc();
    const std::size_t bytes = overhead + words * sizeof(job_word);
    auto* raw = new unsigned char[bytes];
    const auto address = reinterpret_cast<std::uintptr_t>(raw);
    const std::size_t pad = (alignof(job_segment) - address % alignof(job_segment)) % alignof(job_segment);
    return ::new (static_cast<void*>(raw + pad)) job_segment(raw);
  }

  /// Frees `s` and every segment linked after it.
  static void free_chain(job_segment* s) noexcept {
    while (s != nullptr) {
      job_segment* next = s->next;
      unsigned char* storage = s->storage;
      s->~job_segment();
      delete[] storage;
      s = next;
    }
  }
};
static_assert(sizeof(job_segment) == 64, "the words start one cache line after the header");

/// Segment sizes: at least this many words (512 bytes).
inline constexpr std::size_t min_segment_words = 64;
/// Segment sizes: at most this many words (16 MiB). A queue built for more
/// jobs gets segments of this size (it adds segments as it grows, so a
/// larger segment would only delay the next allocation).
inline constexpr std::size_t max_segment_words = std::size_t{1} << 21;
/// The most words an entry can leave unused at a segment's end: an entry
/// that does not fit is at most max_packed_words long.
inline constexpr std::size_t segment_waste = job_function::max_packed_words - 1;
static_assert(min_segment_words > 2 * job_function::max_packed_words);

/// Words per segment for a queue built with `initial_capacity`: room for
/// that many jobs of four words, rounded up to a power of two, within
/// [min_segment_words, max_segment_words] (any capacity, SIZE_MAX included,
/// gives a valid size).
[[nodiscard]] constexpr std::size_t segment_words_for(std::size_t initial_capacity) noexcept {
  constexpr std::size_t words_per_job = 4;
  const std::size_t jobs = std::min(initial_capacity, max_segment_words / words_per_job);
  return std::bit_ceil(std::max(jobs * words_per_job, min_segment_words));
}
static_assert(segment_words_for(0) == min_segment_words);
static_assert(segment_words_for(static_cast<std::size_t>(-1)) == max_segment_words);

/// True for a skip marker: an entry starts with its (non-null) operations pointer.
[[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE bool is_skip_marker(const job_word& w) noexcept {
  std::uint64_t bits = 0;
  std::memcpy(&bits, w.bytes, sizeof(bits));
  return bits == 0;
}

/// Ends a segment whose entries stop at word `used` of `words`: a skip
/// marker where words are left.
inline void end_segment(job_segment& s, std::size_t used, std::size_t words) noexcept {
  if (used < words) std::memset(s.words()[used].bytes, 0, sizeof(job_word));
}

}  // namespace thread_system::detail
