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
// allocation, the entry format, the tail's packing, the stack of spare
// segments and the head's unpacking; how segments are reused and locked,
// and where each queue keeps its fields (its cache-line layout), is each
// queue's. Shared too: the vocabulary of the private hook surface both
// queues offer basic_adaptive_job_queue (mutex_queue_hooks).
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
#include <span>
#include <string>

#include "thread_system/core/error.hpp"
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

/// A stack of spare segments (linked by `next`) and how many it holds.
struct spare_segments {
  job_segment* top = nullptr;
  std::size_t count = 0;

  void push(job_segment* s) noexcept {
    s->next = top;
    top = s;
    ++count;
  }
  /// Precondition: count != 0. The segment comes unlinked.
  [[nodiscard]] job_segment* pop() noexcept {
    job_segment* s = top;
    top = s->next;
    --count;
    s->next = nullptr;
    return s;
  }
};

/// Where pushes go: the last segment, and the word index of the next entry
/// in it. Each segment has `words` words.
struct segment_tail {
  job_segment* segment = nullptr;
  std::size_t used = 0;

  /// True when entries of `needed` words fit in the last segment whatever
  /// their sizes (each may leave up to segment_waste words unused).
  [[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE bool fits(std::size_t needed, std::size_t words) const noexcept {
    return used + needed + segment_waste <= words;
  }
  /// Words of entries that fit, whatever their sizes, in what the last
  /// segment has left and in `spare` more segments.
  [[nodiscard]] std::size_t room(std::size_t words, std::size_t spare) const noexcept {
    const std::size_t left = words - used;
    return (left > segment_waste ? left - segment_waste : 0) + spare * (words - segment_waste);
  }
  /// Packs `job` after the last entry, moving on to a spare segment when it
  /// does not fit (the caller made room: fits() or room()).
  THREAD_SYSTEM_ALWAYS_INLINE void put(job_function& job, std::size_t words, spare_segments& spares) noexcept {
    const std::size_t n = job.packed_words();
    if (used + n > words) next(words, spares);
    job.pack_into(&segment->words()[used]);
    used += n;
  }
  /// Ends the last segment (a skip marker where words are left) and appends
  /// a spare one (there is one: the caller made room).
  void next(std::size_t words, spare_segments& spares) noexcept {
    end_segment(*segment, used, words);
    job_segment* s = spares.pop();
    segment->next = s;
    segment = s;
    used = 0;
  }
};

/// The head's side: true when the oldest entry is not at word `head` of `s`
/// (its end, or a skip marker) but at the start of the next segment.
[[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE bool used_up(job_segment& s, std::size_t head, std::size_t words) noexcept {
  return head == words || is_skip_marker(s.words()[head]);
}

/// Moves the entry at word `head` of `s` into `out` (empty); returns its
/// words.
THREAD_SYSTEM_ALWAYS_INLINE std::size_t unpack_entry(job_segment& s, std::size_t head, job_function& out) noexcept {
  job_word* entry = &s.words()[head];
  const std::size_t n = job_function::packed_words_at(entry);
  out.unpack_from(entry);
  return n;
}

/// A mutex queue's pop, before it takes its lock: destroys the jobs left in
/// the leading non-empty elements of `out` (an earlier pop filled them),
/// outside the lock, since a job's destructor may use the queue. An empty
/// buffer (a worker's) costs one check.
THREAD_SYSTEM_ALWAYS_INLINE void reset_leading_jobs(std::span<job_function> out) noexcept {
  for (job_function& o : out) {
    if (!o) break;
    o.reset();
  }
}

/// Under the lock: how many of the first `n` elements of `out` the pop may
/// fill - up to the first that still holds a job (one the caller left after
/// an empty element), which is not destroyed under the lock.
[[nodiscard]] THREAD_SYSTEM_ALWAYS_INLINE std::size_t fillable(std::span<const job_function> out,
                                                               std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    if (out[i]) return i;
  }
  return n;
}

/// The vocabulary of the hook surface job_queue and two_lock_job_queue share
/// with basic_adaptive_job_queue, which runs its own checks inside their
/// critical sections: a pop's `admit()` decides, under the lock, whether it
/// may go on, its `limit(queued)` how many jobs it may take, its
/// `after(taken)` runs under the lock once they are out; a push is decided
/// by the queue's refusal bits. Each queue inherits this privately, so the
/// names are its own (`job_queue::take_all`, ...). The queues' own
/// operations pass the no-op hooks, which compile away. (Hooks are named
/// types with forced-inline calls, not lambdas: the whole fast path must
/// inline into the caller, whatever the compiler's inlining budget there.)
struct mutex_queue_hooks {
  struct admit_all {
    THREAD_SYSTEM_ALWAYS_INLINE constexpr bool operator()() const noexcept { return true; }
  };
  struct no_action {
    template <typename... A>
    THREAD_SYSTEM_ALWAYS_INLINE constexpr void operator()(A&&... /*unused*/) const noexcept {}
  };
  // Limits: how many jobs a pop may take, given how many are queued (never
  // more than that).
  struct take_all {
    THREAD_SYSTEM_ALWAYS_INLINE constexpr std::size_t operator()(std::size_t queued) const noexcept { return queued; }
  };
  struct at_most {
    std::size_t max;
    THREAD_SYSTEM_ALWAYS_INLINE constexpr std::size_t operator()(std::size_t queued) const noexcept {
      return std::min(max, queued);
    }
  };
  struct fair_share {  // one consumer's part of the backlog, at least one job while any is queued
    std::size_t consumers;
    THREAD_SYSTEM_ALWAYS_INLINE constexpr std::size_t operator()(std::size_t queued) const noexcept {
      const std::size_t fair = consumers <= 1 ? queued : queued / consumers;
      return fair == 0 ? std::min<std::size_t>(1, queued) : fair;
    }
  };

  // The ends, for a hook that holds one lock and needs the other (with one
  // lock for both, it holds both).
  enum class queue_end : bool { push, pop };

  // Refusal bits.
  static constexpr std::uint8_t refuse_closed = 1;     // closed: pushes fail with pool_stopped
  static constexpr std::uint8_t refuse_pushes = 2;     // pushes are not admitted (they belong elsewhere)
  static constexpr std::uint8_t refuse_fast_pops = 4;  // the adaptive queue's fast pop is not admitted
  // A pop's result when admit() refused it.
  static constexpr std::size_t not_admitted = ~std::size_t{0};

  enum class push_outcome { pushed, not_admitted, closed, out_of_memory };

  // The queue's own pushes' result (not_admitted cannot happen there: only
  // the adaptive queue sets refuse_pushes, and it maps that outcome itself).
  // Never throws, out of memory included: the message is then dropped.
  static result<void> to_result(push_outcome outcome, const char* queue_name) noexcept {
    switch (outcome) {
      case push_outcome::pushed:
        return {};
      case push_outcome::closed:
        return make_error_nothrow(error_code::pool_stopped,
                                  [queue_name] { return std::string(queue_name) + ": queue is closed"; });
      case push_outcome::out_of_memory:
      case push_outcome::not_admitted:
        break;
    }
    return make_error_nothrow(error_code::resource_exhausted,
                              [queue_name] { return std::string(queue_name) + ": out of memory for a segment"; });
  }
};

}  // namespace thread_system::detail
