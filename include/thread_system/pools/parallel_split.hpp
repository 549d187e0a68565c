// The splitting machinery under parallel_for and parallel_reduce
// (parallel_for.hpp, whose opening comment is the contract): index
// arithmetic that works for every range an index type can express, the
// piece and chunk sizes, a loop's shared state, the pieces handed to the
// pool and how one claims, cancels or runs them, lazy binary splitting, and
// the stack of pieces a caller from outside the pool hands out and takes
// back (bounded by the pool's taken_back_account, pool_front.hpp).
// Everything here is thread_system::detail: not an interface of its own.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace thread_system::detail {

// The number of indices in [lo, hi), lo <= hi, computed in the unsigned
// counterpart of I (last - first in I itself overflows for ranges wider
// than I's maximum, e.g. int from -1.5e9 to 1.5e9).
template <typename I>
[[nodiscard]] constexpr std::uint64_t range_length(I lo, I hi) noexcept {
  using U = std::make_unsigned_t<I>;
  return static_cast<std::uint64_t>(static_cast<U>(static_cast<U>(hi) - static_cast<U>(lo)));
}

// lo + n, for n <= range_length(lo, hi) of a range starting at lo: the
// result lies in [lo, hi], so the modular unsigned sum converts back exactly.
template <typename I>
[[nodiscard]] constexpr I advance_index(I lo, std::uint64_t n) noexcept {
  using U = std::make_unsigned_t<I>;
  return static_cast<I>(static_cast<U>(static_cast<U>(lo) + static_cast<U>(n)));
}

// Piece and chunk boundaries fall on multiples of `split_alignment` indices
// (relative to the range's start) whenever the sizes allow. A loop over an
// array then starts every chunk on the same alignment as the array itself,
// so vectorised bodies do not straddle cache lines on every access (odd
// sizes arise easily: 10^7 / 128 = 78125 indices).
inline constexpr std::size_t split_alignment = 64;

// The most indices a piece runs between two looks at its loop's failure
// flag (a multiple of split_alignment).
inline constexpr std::uint64_t max_chunk = std::uint64_t{1} << 16;

inline std::uint64_t aligned_down(std::uint64_t count) noexcept {
  return count >= split_alignment ? count & ~std::uint64_t{split_alignment - 1} : count;
}

// The midpoint of [lo, hi), rounded to the split alignment.
template <typename I>
I aligned_mid(I lo, I hi) noexcept {
  return advance_index(lo, aligned_down(range_length(lo, hi) / 2));
}

// parallel_reduce's automatic grain: eight leaves per worker (a reduction
// has no lazy splitting; its tree is fixed by the grain).
template <typename I>
std::uint64_t default_grain(std::size_t workers, I first, I last) {
  const std::uint64_t n = range_length(first, last);
  const std::uint64_t pieces = std::uint64_t{std::max<std::size_t>(1, workers)} * 8;
  return std::max<std::uint64_t>(1, n / pieces);
}

// parallel_for's piece and chunk sizes (see parallel_for.hpp's opening comment): a grain
// given by the caller runs in chunks of an eighth of it; the automatic one
// is n / (4 * workers), in chunks of n / (64 * workers).
struct for_sizes {
  std::uint64_t grain;
  std::uint64_t chunk;
};

template <typename I>
for_sizes parallel_for_sizes(std::size_t workers, I first, I last, std::size_t grain_indices) {
  auto chunk_of = [](std::uint64_t g) { return std::clamp<std::uint64_t>(aligned_down(g), 1, max_chunk); };
  if (grain_indices != 0) return {grain_indices, chunk_of(grain_indices / 8)};
  const std::uint64_t share = range_length(first, last) / std::max<std::size_t>(1, workers);
  const std::uint64_t grain = std::max<std::uint64_t>(1, share / 4);
  return {grain, std::min(grain, chunk_of(share / 64))};
}

// Shared by all pieces of one parallel_for; kept alive by every piece (a
// piece may still be inside `done.set()` when the caller returns).
template <typename I, typename F>
struct parallel_for_state {
  parallel_for_state(thread_pool& p, F& body, for_sizes sz) : pool(p), f(body), grain(sz.grain), chunk(sz.chunk) {}
  thread_pool& pool;
  F& f;
  std::uint64_t grain;
  std::uint64_t chunk;                  // indices run between two looks at `failed` and at the chance of a lazy split
  std::atomic<std::size_t> pending{1};  // the root piece
  std::atomic<bool> failed{false};
  std::atomic<bool> cancelled{false};  // a piece was discarded unrun by the pool (see for_piece::cancel())
  std::exception_ptr first_error;      // written once, by the thread that set `failed`
  completion done;

  void record(std::exception_ptr e) noexcept {
    bool expected = false;
    // acq_rel: one writer wins; its write of first_error is published by
    // the release in `done.set()` that the caller acquires before reading.
    if (failed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) first_error = std::move(e);
  }

  void finish_piece() noexcept {
    // acq_rel: each piece's writes happen-before the last decrement, which
    // then publishes them through done.set() (release).
    if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) done.set();
  }
};

// A loop called from outside the pool (run_as_caller()): the calling thread
// keeps a stack of the pieces it handed out, at most reclaim_depth deep, and
// may take back any that no worker has started. claims[k] holds the ticket
// of the piece handed out at depth k of that stack - a number unique within
// the loop, shifted left by reclaim_slot_bits, or-ed with k - or 0 once the
// caller, a worker or the pool's cancel took it.
inline constexpr unsigned reclaim_slot_bits = 6;
inline constexpr std::size_t reclaim_depth = std::size_t{1} << reclaim_slot_bits;
// How long an outside caller polls for the workers' last pieces before it
// sleeps (see run_as_caller()).
inline constexpr std::uint64_t caller_poll_ns = 20'000;

template <typename I, typename F>
struct caller_loop_state : parallel_for_state<I, F> {
  caller_loop_state(thread_pool& p, F& body, for_sizes sz)
      : parallel_for_state<I, F>(p, body, sz), account(&taken_back_of(p)) {}
  std::array<std::atomic<std::uint64_t>, reclaim_depth> claims{};
  // The pool's count of pieces taken back and still queued (pool_front.hpp):
  // the core's, which outlives every queued piece, even one popped after
  // the pool's front is gone.
  taken_back_account* account;
};

// Takes the piece with `ticket` (non-zero: handed out by an outside caller):
// true for the one thread that gets to run or cancel it. relaxed: the winner
// runs the range from its own copy; nothing is published through the slot
// (the pieces' writes travel through finish_piece() and done). A stale
// ticket - its slot reused for a later piece - never matches: tickets are
// unique within a loop.
template <typename I, typename F>
bool claim_piece(parallel_for_state<I, F>& st, std::uint64_t ticket) noexcept {
  auto& slot = static_cast<caller_loop_state<I, F>&>(st).claims[ticket & (reclaim_depth - 1)];
  return slot.compare_exchange_strong(ticket, 0, std::memory_order_relaxed);
}

template <typename I, typename F>
void run_piece(const std::shared_ptr<parallel_for_state<I, F>>& st, I lo, I hi);

// A piece handed to the pool. If the pool discards it unrun
// (stop(stop_mode::cancel_pending), backpressure::drop_oldest), it still
// counts as finished, and the loop reports error_exception{cancelled}.
template <typename I, typename F>
struct for_piece {
  std::shared_ptr<parallel_for_state<I, F>> st;
  I lo;
  I hi;
  std::uint64_t ticket = 0;  // non-zero: handed out by an outside caller, who may take it back
  void operator()() const {
    if (!leave_queue()) return;  // the caller took it back
    run_piece<I, F>(st, lo, hi);
  }
  void cancel() noexcept {
    if (!leave_queue()) return;  // the caller took it back
    // relaxed: published by finish_piece()'s release RMW and done.set().
    st->cancelled.store(true, std::memory_order_relaxed);
    st->finish_piece();
  }
  // The entry leaves the queue; false when the caller took the piece back
  // (then it leaves the pool's count of such entries: run_as_caller()
  // counted it).
  [[nodiscard]] bool leave_queue() const noexcept {
    if (ticket == 0 || claim_piece<I, F>(*st, ticket)) return true;
    static_cast<caller_loop_state<I, F>&>(*st).account->left_queue();
    return false;
  }
};

// Hands [mid, hi) to the pool as a piece of its own (with `ticket`, non-zero,
// when an outside caller may take it back); if the pool refuses it
// (stopping, full, out of memory), runs it here - `refused(mid, hi)`, which
// counts it finished; by default run_piece() - and returns false.
template <typename I, typename F, typename Refused>
bool hand_out(const std::shared_ptr<parallel_for_state<I, F>>& st, I mid, I hi, std::uint64_t ticket,
              Refused&& refused) {
  st->pending.fetch_add(1, std::memory_order_relaxed);  // ordered before the piece's own decrement by the push
  result<void> r;
  try {
    // Onto this worker's deque, past its LIFO slot (detail::fork_access);
    // from any other thread into the pool's queue.
    r = fork_access::push(st->pool, for_piece<I, F>{st, mid, hi, ticket});
  } catch (...) {
    st->pending.fetch_sub(1, std::memory_order_relaxed);  // out of memory: that piece never existed
    throw;
  }
  if (!r) {
    // Refused (stopping, queue_full, out of memory): do that half here. Its
    // finish_piece() gives back the increment above, as the pool's run
    // would have (taking it back here as well counted the piece finished
    // twice: the loop could return while other pieces still ran).
    refused(mid, hi);
    return false;
  }
  return true;
}
template <typename I, typename F>
bool hand_out(const std::shared_ptr<parallel_for_state<I, F>>& st, I mid, I hi) {
  return hand_out<I, F>(st, mid, hi, 0, [&st](I m, I h) { run_piece<I, F>(st, m, h); });
}

// The loop of one chunk, a function of its own (see parallel_for.hpp's opening comment,
// *Code generation*).
template <typename I, typename F>
THREAD_SYSTEM_NOINLINE void run_chunk(F& body, I lo, I stop) {
  for (I i = lo; i < stop; ++i) body(i);
}

// Runs [lo, hi) on this thread, handing halves out with `split(mid, hi)`;
// records an exception instead of throwing it. The caller then counts the
// piece finished.
template <typename I, typename F, typename Split>
void run_range(const std::shared_ptr<parallel_for_state<I, F>>& st, I lo, I hi, Split&& split) noexcept {
  // relaxed loads of `failed`: a hint to skip work after a failure; the
  // exception itself is published through record() and done.set().
  auto failed = [&st] { return st->failed.load(std::memory_order_relaxed); };
  try {
    while (range_length(lo, hi) > st->grain && !failed()) {
      const I mid = aligned_mid(lo, hi);
      split(mid, hi);
      hi = mid;
    }
    F& body = st->f;
    // At most max_chunk indices between two looks at `failed`: what a failure
    // waits for does not grow with the range.
    const std::uint64_t chunk = st->chunk;
    while (lo < hi && !failed()) {
      const I stop = range_length(lo, hi) > chunk ? advance_index(lo, chunk) : hi;
      run_chunk<I, F>(body, lo, stop);
      lo = stop;
      // Lazy split (see parallel_for.hpp's opening comment): worth it only while at least
      // two chunks are left.
      if (range_length(lo, hi) / 2 >= chunk && nothing_left_to_steal(st->pool)) {
        const I mid = aligned_mid(lo, hi);
        split(mid, hi);
        hi = mid;
      }
    }
  } catch (...) {
    st->record(std::current_exception());
  }
}

template <typename I, typename F>
void run_piece(const std::shared_ptr<parallel_for_state<I, F>>& st, I lo, I hi) {
  run_range<I, F>(st, lo, hi, [&st](I mid, I end) { (void)hand_out<I, F>(st, mid, end); });
  st->finish_piece();
}

// Polls `done` for up to caller_poll_ns before the caller sleeps on it (see
// run_as_caller()).
inline void poll_briefly(const completion& done) noexcept {
  const std::uint64_t until = steady_now_ns() + caller_poll_ns;
  while (!done.ready() && steady_now_ns() < until) {
    for (int i = 0; i < 16; ++i) cpu_relax();  // a clock read every 16 pauses
  }
}

template <typename I>
struct handed_piece {
  I lo;
  I hi;
  std::uint64_t ticket;
};

// The outside caller's split: hands [mid, hi) out with a ticket and keeps
// it on the caller's stack. At the pool's bound on pieces taken back and
// still queued (taken_back_account; those this call took back, counted
// there when it ends, and those on its stack count too: each may be taken
// back), or when the pool refuses the piece, this thread runs it,
// splitting it the same way - so nothing it runs itself hands out pieces
// it could not take back.
template <typename I, typename F>
struct caller_split {
  const std::shared_ptr<parallel_for_state<I, F>>& st;
  caller_loop_state<I, F>& loop;
  std::array<handed_piece<I>, reclaim_depth>& stack;
  std::size_t& depth;
  std::uint64_t& next_ticket;
  std::int64_t& taken_back;  // by this call so far

  void operator()(I mid, I hi) const {
    if (depth == reclaim_depth) {  // too deep to keep: an ordinary piece
      (void)hand_out<I, F>(st, mid, hi);
      return;
    }
    if (loop.account->full(taken_back + static_cast<std::int64_t>(depth))) {  // part of this thread's piece from here
      run_range<I, F>(st, mid, hi, *this);
      return;
    }
    const std::uint64_t ticket = (next_ticket++ << reclaim_slot_bits) | depth;
    // relaxed: the push publishes it to the worker that pops the piece (the
    // queue's release and acquire).
    loop.claims[depth].store(ticket, std::memory_order_relaxed);
    if (hand_out<I, F>(st, mid, hi, ticket, [this](I m, I h) {
          run_range<I, F>(st, m, h, *this);
          st->finish_piece();
        })) {
      stack[depth++] = {mid, hi, ticket};
    }
  }
};

// A loop called from outside the pool (see parallel_for.hpp's opening comment): this
// thread runs it as a worker would, handing halves to the pool's queue, and
// keeps a stack of what it handed out. When its own range is done it takes
// back, newest first, every piece no worker has started, and runs it; then
// it waits for the pieces the workers run. Those started at most one
// piece's time ago and often end within caller_poll_ns, so it first polls:
// a thread still running needs no wake-up, which on a virtual machine cost
// 20-50 us when the waker ran on the other CPU. It polls without yielding:
// on a loaded machine a yield hands the CPU to another process's thread for
// a whole time slice (measured: a heavier tail than sleeping at once).
// `st` is a caller_loop_state.
template <typename I, typename F>
void run_as_caller(const std::shared_ptr<parallel_for_state<I, F>>& st, I first, I last) {
  std::array<handed_piece<I>, reclaim_depth> stack;  // filled as pieces are handed out
  std::size_t depth = 0;
  std::uint64_t next_ticket = 1;
  std::int64_t taken_back = 0;  // pieces taken back: their entries stay queued
  const caller_split<I, F> split{st, static_cast<caller_loop_state<I, F>&>(*st), stack, depth, next_ticket, taken_back};
  run_range<I, F>(st, first, last, split);
  st->finish_piece();
  while (depth > 0) {
    --depth;
    const handed_piece<I> h = stack[depth];
    if (!claim_piece<I, F>(*st, h.ticket)) continue;  // a worker runs it (or the pool cancelled it)
    ++taken_back;
    run_range<I, F>(st, h.lo, h.hi, split);
    st->finish_piece();
  }
  // Counted until a worker pops each entry and finds it taken
  // (for_piece::leave_queue()).
  split.loop.account->took_back(taken_back);
  poll_briefly(st->done);
}

// The right half of a parallel_reduce split, handed to the pool (see
// parallel_reduce): whoever claims it - the worker that pops it, the pool
// discarding it, or the splitting thread taking it back once its left half
// is done - runs it, cancels it or computes it itself. Its result slot is a
// future's (value or exception, then `done`), completed only by a worker
// that ran it or by the pool's discard (`cancelled`), not when taken back.
template <typename T>
struct reduce_half : future_state<T> {
  std::atomic<bool> claimed{false};

  // relaxed: the claim decides who runs the half and publishes nothing;
  // the results travel through done (release in set(), acquire in wait()).
  bool claim() noexcept { return !claimed.exchange(true, std::memory_order_relaxed); }
};

inline constexpr const char* reduce_discarded = "parallel_reduce: a piece was discarded by the pool before it ran";

// The job that runs a reduce_half: `node` is parallel_reduce's recursion,
// alive until the half is claimed back or done (the splitting frame waits).
template <typename I, typename T, typename Node>
struct reduce_piece {
  std::shared_ptr<reduce_half<T>> half;
  const Node* node;
  I lo;
  I hi;
  // Handed out from outside the pool: taken back, it counts in the pool's
  // taken_back_account until it leaves the queue (pool_front.hpp).
  taken_back_account* account;
  void operator()() const {
    if (!leave_queue()) return;  // taken back: `node` may be gone
    try {
      half->set_value((*node)(lo, hi));
    } catch (...) {
      half->set_exception(std::current_exception());
    }
  }
  void cancel() noexcept {
    if (leave_queue()) half->set_exception(cancelled_error(reduce_discarded));
  }
  // The entry leaves the queue; false when the splitting thread took the
  // half back (then it leaves the pool's count, which that thread added to).
  [[nodiscard]] bool leave_queue() const noexcept {
    if (half->claim()) return true;
    if (account != nullptr) account->left_queue();
    return false;
  }
};

}  // namespace thread_system::detail
