// record_ring: the logger's buffer. A fixed ring of 128-byte slots that many
// producer threads fill and one consumer (the writer thread) drains; one log
// record occupies one or more consecutive slots.
//
// Algorithm: Dmitry Vyukov's bounded MPMC queue ("Bounded MPMC queue",
// 1024cores.net, 2010), as thread_system::bounded_queue; both claim
// positions with detail::claim_positions() (detail/vyukov_ring.hpp). Each
// slot carries a sequence number:
//   * sequence == position        free for the producer claiming `position`;
//   * sequence == position + 1    holds the first slot of a published record;
//   * the consumer frees a slot by storing position + capacity (next lap).
// Departures from the paper, each needed by records of variable length:
//   1. A producer claims `n` consecutive positions with one CAS on `tail_`
//      after checking that all `n` slots are free (as bounded_queue's
//      push_batch does). A record never waits for space piecemeal.
//   2. Only the first slot's sequence is published (position + 1, release).
//      Continuation slots keep sequence == position until the consumer frees
//      them; their payload is ordered by the first slot's release store,
//      because the producer writes it before that store. A continuation slot
//      can never look "published" (its sequence is never position + 1), and
//      no other producer can claim it (tail_ has moved past it).
//   3. One consumer: `head_` is written only by the writer thread, so popping
//      needs no CAS; it is atomic only so statistics can read it.
//   4. The closed flag is the top bit of `tail_` (as in bounded_queue): a claim
//      CAS ordered before close() succeeds, every later one fails.
//
// Slot layout: 8 bytes of sequence + 120 bytes of payload. The first slot of
// a record holds a 48-byte `record_header` and 72 bytes of text; each
// continuation slot holds 120 more bytes of text. So a message of up to 72
// bytes takes one slot, 123 bytes two, 1024 bytes nine.
//
// Contract (internal; the logger is the only user):
//   * try_push(): any thread. Copies header and text in, publishes.
//   * has_room(): any thread; a snapshot used before parking.
//   * ready(), pop_batch(), drained(), head(): the consumer thread only.
//   * close(), is_closed(), tail(): any thread.
//   * A successful try_push happens-before the pop_batch() that returns it.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/vyukov_ring.hpp"
#include "thread_system/logger/log_level.hpp"

namespace thread_system::detail {

/// Fixed part of a record, stored at the start of its first slot.
struct record_header {
  std::int64_t time_ns = 0;  ///< system_clock time since the epoch, ns
  const char* file = nullptr;
  const char* function = nullptr;
  std::uint32_t thread_id = 0;
  std::uint32_t line = 0;
  std::uint32_t length = 0;  ///< message bytes stored
  std::uint32_t slots = 1;   ///< slots the record occupies
  log_level level = log_level::info;
  bool truncated = false;
};

/// A record as popped: its header and where its text starts in the
/// consumer's text buffer.
struct popped_record {
  record_header header;
  std::size_t text_offset = 0;
};

class record_ring {
 public:
  static constexpr std::size_t slot_bytes = 128;
  static constexpr std::size_t payload_bytes = slot_bytes - sizeof(std::uint64_t);
  static constexpr std::size_t header_bytes = 48;
  static constexpr std::size_t first_text_bytes = payload_bytes - header_bytes;
  static_assert(sizeof(record_header) <= header_bytes);

  /// Largest capacity accepted (the top bit of tail_ is the closed flag).
  static constexpr std::size_t max_capacity = std::size_t{1} << 40;

  /// Slots needed by a message of `length` bytes.
  [[nodiscard]] static constexpr std::size_t slots_for(std::size_t length) noexcept {
    if (length <= first_text_bytes) return 1;
    return 1 + (length - first_text_bytes + payload_bytes - 1) / payload_bytes;
  }
  /// Largest message that fits in `slots` slots.
  [[nodiscard]] static constexpr std::size_t max_text_for(std::size_t slots) noexcept {
    return slots == 0 ? 0 : first_text_bytes + (slots - 1) * payload_bytes;
  }

  /// `capacity` slots, rounded up to a power of two, at least 2. Throws
  /// error_exception{invalid_argument} for 0 or above max_capacity.
  explicit record_ring(std::size_t capacity) {
    if (capacity == 0 || capacity > max_capacity) {
      throw error_exception(error{error_code::invalid_argument, "logger: capacity must be in [1, 2^40] slots"});
    }
    capacity_ = std::bit_ceil(capacity < 2 ? std::size_t{2} : capacity);
    mask_ = capacity_ - 1;
    slots_ = std::make_unique<slot[]>(capacity_);
    for (std::size_t i = 0; i < capacity_; ++i) {
      // relaxed: the ring is shared only after construction, which publishes these.
      slots_[i].sequence.store(i, std::memory_order_relaxed);
    }
  }

  record_ring(const record_ring&) = delete;
  record_ring& operator=(const record_ring&) = delete;
  ~record_ring() = default;

  enum class push_status { ok, full, closed };

  /// Copies `header` (whose `slots` must equal slots_for(header.length), at
  /// most capacity()) and `header.length` bytes of `text` into the ring.
  [[nodiscard]] push_status try_push(const record_header& header, const char* text) noexcept {
    const std::size_t count = header.slots;
    std::size_t first = 0;
    if (const push_status claimed = claim(count, first); claimed != push_status::ok) return claimed;

    slot& head_slot = slots_[first & mask_];
    std::memcpy(head_slot.payload, &header, sizeof(record_header));
    std::size_t copied = header.length < first_text_bytes ? header.length : first_text_bytes;
    if (copied != 0) std::memcpy(head_slot.payload + header_bytes, text, copied);
    for (std::size_t i = 1; i < count; ++i) {
      const std::size_t left = header.length - copied;
      const std::size_t n = left < payload_bytes ? left : payload_bytes;
      std::memcpy(slots_[(first + i) & mask_].payload, text + copied, n);
      copied += n;
    }
    // release: publishes header and every continuation slot's text, all
    // written above; pairs with the acquire load in ready()/pop_batch().
    head_slot.sequence.store(first + 1, std::memory_order_release);
    return push_status::ok;
  }

  /// True when `count` slots are free at the current tail, or the ring is
  /// closed (either way a producer waiting for room should look again).
  [[nodiscard]] bool has_room_or_closed(std::size_t count) const noexcept {
    // acquire: pairs with close(); the position itself is only a snapshot.
    const std::size_t tail = tail_.load(std::memory_order_acquire);
    if ((tail & closed_bit) != 0) return true;
    for (std::size_t i = 0; i < count; ++i) {
      // acquire: pairs with the consumer's release that freed the slot.
      const std::size_t sequence = slots_[(tail + i) & mask_].sequence.load(std::memory_order_acquire);
      if (ring_difference(sequence, tail + i) < 0) return false;
    }
    return true;
  }

  /// Consumer only: the record at head() is published.
  [[nodiscard]] bool ready() const noexcept {
    // acquire: pairs with the producer's release store in try_push().
    return slots_[head_position_ & mask_].sequence.load(std::memory_order_acquire) == head_position_ + 1;
  }

  /// Consumer only: pops up to `max_records` published records, appending
  /// them to `out` and their text to `text`, and frees their slots. Returns
  /// the number popped.
  std::size_t pop_batch(std::size_t max_records, std::vector<popped_record>& out, std::string& text) {
    std::size_t popped = 0;
    std::size_t head = head_position_;
    while (popped < max_records) {
      slot& first = slots_[head & mask_];
      // acquire: pairs with the producer's release store in try_push(); makes
      // the header and all continuation text visible.
      if (first.sequence.load(std::memory_order_acquire) != head + 1) break;
      popped_record record;
      std::memcpy(&record.header, first.payload, sizeof(record_header));
      record.text_offset = text.size();
      const std::size_t length = record.header.length;
      std::size_t copied = length < first_text_bytes ? length : first_text_bytes;
      text.append(first.payload + header_bytes, copied);
      const std::size_t count = record.header.slots;
      for (std::size_t i = 1; i < count; ++i) {
        const std::size_t left = length - copied;
        const std::size_t n = left < payload_bytes ? left : payload_bytes;
        text.append(slots_[(head + i) & mask_].payload, n);
        copied += n;
      }
      for (std::size_t i = 0; i < count; ++i) {
        // release: our reads of the slot happen-before the next lap's
        // producer writes; pairs with the acquire loads in claim_positions() (detail/vyukov_ring.hpp).
        slots_[(head + i) & mask_].sequence.store(head + i + capacity_, std::memory_order_release);
      }
      out.push_back(record);
      head += count;
      ++popped;
    }
    head_position_ = head;
    // relaxed: statistics only; nothing is published through head_.
    head_.store(head, std::memory_order_relaxed);
    return popped;
  }

  /// Refuses further pushes. Idempotent.
  void close() noexcept {
    // acq_rel RMW on the word producers CAS: each claim is ordered either
    // before this (and completes) or after (and fails). Pairs with the
    // acquire loads in is_closed(), tail() and has_room_or_closed().
    tail_.fetch_or(closed_bit, std::memory_order_acq_rel);
  }

  [[nodiscard]] bool is_closed() const noexcept {
    return (tail_.load(std::memory_order_acquire) & closed_bit) != 0;  // pairs with close()
  }

  /// Position after the last claimed slot. A push that returned before this
  /// call is included (coherence on tail_).
  [[nodiscard]] std::uint64_t tail() const noexcept {
    return tail_.load(std::memory_order_acquire) & ~closed_bit;  // pairs with close(); claims are ordered by coherence
  }

  /// Consumer only: position of the next record to pop.
  [[nodiscard]] std::uint64_t head() const noexcept { return head_position_; }

  /// Any thread: head() as last published by the consumer (approximate).
  [[nodiscard]] std::uint64_t head_approx() const noexcept {
    return head_.load(std::memory_order_relaxed);  // statistics only
  }

  /// Consumer only: closed and every claimed slot consumed. Once true, stays true.
  [[nodiscard]] bool drained() const noexcept {
    // acquire: pairs with close(); after it no claim can follow, so the
    // masked tail is final.
    const std::size_t tail = tail_.load(std::memory_order_acquire);
    return (tail & closed_bit) != 0 && (tail & ~closed_bit) == head_position_;
  }

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

 private:
  static constexpr std::size_t closed_bit = ring_closed_bit;

  // One slot per 128 bytes, aligned so that a slot never straddles lines
  // beyond its own two (the consumer reading slot i does not pull a line a
  // producer is writing for slot i + 1).
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init): the payload is written before it is published
  struct alignas(64) slot {
    std::atomic<std::size_t> sequence{0};
    char payload[payload_bytes];
  };
  static_assert(sizeof(slot) == slot_bytes);

  push_status claim(std::size_t count, std::size_t& first) noexcept {
    switch (claim_positions<full_check::confirm>(
        tail_, count,
        [this](std::size_t position) -> std::atomic<std::size_t>& { return slots_[position & mask_].sequence; },
        first)) {
      case ring_claim::ok:
        return push_status::ok;
      case ring_claim::full:
        return push_status::full;
      case ring_claim::closed:
        break;
    }
    return push_status::closed;
  }

  // Producers CAS tail_; the consumer writes head_ and the slots; separate
  // lines so producers do not invalidate each other's view of head_ (false
  // sharing).
  alignas(64) std::atomic<std::size_t> tail_{0};  // next position to claim; top bit = closed
  alignas(64) std::atomic<std::size_t> head_{0};  // head_position_, published for statistics
  std::size_t head_position_ = 0;                 // consumer-owned
  alignas(64) std::unique_ptr<slot[]> slots_;
  std::size_t capacity_ = 0;
  std::size_t mask_ = 0;
};

}  // namespace thread_system::detail
