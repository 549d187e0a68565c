// vyukov_ring: the producer side of Dmitry Vyukov's bounded MPMC ring
// ("Bounded MPMC queue", 1024cores.net, 2010), used by
// queues/bounded_queue.hpp (jobs).
//
// A ring of 2^k cells, each with a sequence number saying whose turn it is:
//   * sequence == position        free for the producer claiming `position`;
//   * sequence == position + 1    written by that producer (the consumer's turn);
//   * the consumer frees a cell by storing position + capacity (next lap).
// Producers claim positions with a CAS on a shared `tail`; its top bit is
// the closed flag, so closing and claiming are ordered by one atomic: a
// claim whose CAS came first succeeds, every later one sees the flag.
//
// Contract of claim_positions():
//   * Claims `count` consecutive positions, all or none, with one CAS,
//     after seeing every one of their cells free; `first` is the first.
//   * `full` at once when a cell at the claimed positions was not yet freed
//     (the callers retry or back off themselves and should not spin here
//     while the consumer is descheduled).
//   * `closed` once the closed bit is set.
//   * The caller writes the cells and publishes each with a release store of
//     position + 1 (pairs with its consumer's acquire load). The acquire load
//     of each sequence here pairs with the consumer's release store that
//     freed the cell, so the consumer's last reads of a cell happen-before
//     the new producer's writes.
#pragma once

#include <atomic>
#include <cstddef>

#include "thread_system/detail/chaos.hpp"

namespace thread_system::detail {

/// The closed flag: the top bit of a ring's tail.
inline constexpr std::size_t ring_closed_bit = std::size_t{1} << (sizeof(std::size_t) * 8 - 1);

/// a - b as a signed distance between ring positions (they never differ by 2^63).
[[nodiscard]] inline std::ptrdiff_t ring_difference(std::size_t a, std::size_t b) noexcept {
  return static_cast<std::ptrdiff_t>(a - b);
}

/// What claim_positions() did.
enum class ring_claim { ok, full, closed };

/// Claims `count` consecutive positions of the ring whose producer index is
/// `tail`; `sequence_at(position)` is the sequence atomic of that
/// position's cell. See the header comment.
template <typename SequenceAt>
[[nodiscard]] ring_claim claim_positions(std::atomic<std::size_t>& tail, std::size_t count, SequenceAt&& sequence_at,
                                         std::size_t& first) noexcept {
  // relaxed: the position is only a guess validated by the cell sequences
  // and by the CAS below; tail publishes no data (Vyukov).
  std::size_t guess = tail.load(std::memory_order_relaxed);
  for (;;) {
    if ((guess & ring_closed_bit) != 0) return ring_claim::closed;
    bool stale = false;
    for (std::size_t i = 0; i < count; ++i) {
      // acquire: pairs with the consumer's release store that freed the
      // cell, so its reads of the old contents happen-before our writes.
      const std::size_t sequence = sequence_at(guess + i).load(std::memory_order_acquire);
      const std::ptrdiff_t lag = ring_difference(sequence, guess + i);
      if (lag < 0) return ring_claim::full;  // not yet freed by the consumer
      if (lag > 0) {
        stale = true;                                  // another producer claimed this position first
        guess = tail.load(std::memory_order_relaxed);  // a fresh guess, as above
        break;
      }
    }
    if (stale) continue;
    // A free cell can only be taken by the producer that moves tail past
    // it, so the cells seen free stay free until this CAS succeeds. relaxed
    // on success: the cell sequences carry the data (Vyukov); relaxed on
    // failure: `guess` is just reloaded.
    THREAD_SYSTEM_CHAOS_POINT();
    if (tail.compare_exchange_weak(guess, guess + count, std::memory_order_relaxed, std::memory_order_relaxed)) {
      first = guess;
      return ring_claim::ok;
    }
  }
}

}  // namespace thread_system::detail
