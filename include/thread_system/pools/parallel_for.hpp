// parallel_for and parallel_reduce over an index range, on a thread_pool.
//
//   parallel_for(pool, 0, n, [&](std::size_t i) { out[i] = f(in[i]); });
//   double sum = parallel_reduce(pool, 0, n, 0.0,
//       [&](std::size_t lo, std::size_t hi, double acc) { for (; lo < hi; ++lo) acc += v[lo]; return acc; },
//       std::plus<>{});
//
// The range is split recursively in halves down to `grain` indices; each
// split hands one half to the pool (onto the calling worker's deque when
// called from a worker, past its LIFO slot, so idle workers steal it) and
// keeps the other. Work therefore balances by stealing, and nested calls (a
// parallel_for inside a parallel_for body) work: the inner call's waits help
// run other jobs.
//
// A leaf runs in chunks (an eighth of a grain given by the caller; with the
// automatic grain, a sixteenth), and splits further on demand:
// lazy binary splitting (Tzannes, Caragea, Barua, Vishkin, "Lazy
// binary-splitting", PPoPP 2010). After each chunk, if everything this
// thread handed out has been taken (its deque and LIFO slot are empty: a
// thief would find nothing) and enough of the leaf is left, the rest is
// halved and one half handed out. So the pieces are coarse while every
// worker is busy, and the last pieces are small, which keeps the workers'
// finishing times close.
//
// The automatic grain (grain = 0) is a quarter of an equal share per worker,
// so the eager halving makes about four pieces per worker, and the chunk a
// sixteenth of that (64 per worker): few hand-offs for a short, even loop,
// and chunks fine enough for lazy splitting to even out a skewed one.
// Measured on 2 cores against eight eager pieces per worker with chunks of
// an eighth (the same chunk size): 1.2-1.5x less time per call over 10^4
// and 10^5 floats, and no loss beyond noise on larger or skewed loops
// (docs/PERFORMANCE.md, *parallel_for (#20): four pieces per worker*).
//
// Index types: any integer type of at most 64 bits but bool. Lengths are
// computed in the unsigned counterpart of the index type, so every range
// the type can express works, up to [min, max) of int64_t or uint64_t;
// an empty or reversed range (first >= last) does nothing.
//
// An empty callable (a null function pointer, an empty std::function) is
// refused before anything runs, with error_exception{invalid_argument}, as
// enqueue() refuses it - whatever the range.
//
// Blocking: the call returns when every index has been processed.
// Everything the body did is visible to the caller on return. The calling
// thread always takes part in the work (the body runs on it and on the
// pool's workers). On one of the pool's workers its wait helps run other
// jobs. From any other thread it hands halves to the pool's queue as a
// worker would, and when its own part is done it takes back, newest first,
// every piece it handed out that no worker has started (so the call never
// waits behind other jobs in the queue, nor for a pool that is paused or
// busy when the call starts: with no worker free it runs the whole loop
// itself); then it waits for the
// pieces the workers run - polling for up to 20 us (a thread that slept
// needs a wake-up, which costs tens of microseconds on some virtual
// machines), then asleep. A piece it took back stays in the queue until a
// worker pops it and finds it taken (it then does nothing) - after the call
// may have returned. Such entries count toward the pool's bound (1024, at
// most a quarter of the capacity of a bounded pool - backpressure, or
// pool_queue::bounded's ring; pool_front.hpp, taken_back_account), and so
// do, for each split, the pieces its caller has handed out and may still
// take back. At the bound (a busy or paused pool) a call from outside runs
// the rest of the loop on the calling thread, handing nothing more out,
// and parallel_reduce computes both halves of each split itself: whatever
// the grain, the entries left behind stay within the bound.
//
// Pause: a piece a worker runs splits off pieces of its own onto that
// worker's deque, and a pool paused while the loop runs holds those, as it
// holds every job not yet started (pool_front.hpp, pause()): the call
// waits for them until resume(). So does a call on one of the pool's
// workers after its pool was paused (its own pieces wait on its deque): a
// job must not pause its own pool and then wait in parallel_for. (A
// parallel_reduce's halves are taken back by the thread that split them,
// so it finishes in a paused pool.)
//
// Exceptions: the first exception thrown by a body is rethrown to the caller
// after all other pieces have finished (later exceptions are dropped); once
// a body has thrown, the pieces and chunks that have not started yet are
// skipped (a chunk in progress - at most 65 536 indices - runs to its
// end), so the call returns promptly however large the range. Pieces the
// pool refuses (it is stopping, a bounded queue is full, memory ran out)
// run on the calling thread, so the call still processes every index
// (from outside the workers, a pool with backpressure takes a piece only
// if it has room - a piece never waits for room, evicts a job or goes
// through caller_runs, whatever the policy: backpressure.hpp); with
// no memory even for its bookkeeping the whole loop runs serially on the
// caller. A piece the pool accepted and then discarded unrun
// (stop(stop_mode::cancel_pending), backpressure::drop_oldest) before
// anyone started it leaves its indices unvisited: once every other piece
// has finished, the call throws error_exception{cancelled} (a body's
// exception takes precedence).
//
// Code generation: a chunk's loop is a function of its own (run_chunk), so
// the compiler allocates its registers apart from the splitting code around
// it; inlined there, GCC -O2 kept a simple body's constants in memory and
// ran it 1.5x slower than the same loop in tbb::parallel_for.
//
// parallel_reduce applies `reduce_range(lo, hi, identity)` to leaf ranges and
// `combine(left, right)` up a fixed binary tree that depends only on the
// range and the grain, so the result is deterministic for a given input even
// when `combine` is not associative over floating point. An exception from
// `reduce_range` or `combine` is rethrown after the pieces already running
// have finished; leaves not started by then are skipped. A piece the pool
// discarded unrun makes the call throw error_exception{cancelled}, unless a
// leaf or `combine` threw (that exception takes precedence, as for
// parallel_for). Each split hands the right half to the pool (as
// parallel_for's halves) and computes the left; then the splitting thread
// takes the right half back and computes it too if no worker has started
// it, else waits for it (helping, on a worker). Called from outside the
// pool the caller thus takes part as in parallel_for: it never waits behind
// other jobs in the queue nor for a paused or busy pool, and it polls for
// up to 20 us before it sleeps on a half a worker runs. A half taken back
// stays in the queue until a worker pops it and finds it taken.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace thread_system {

/// Index types parallel_for and parallel_reduce accept.
template <typename I>
concept parallel_index =
    std::integral<I> && !std::same_as<std::remove_cv_t<I>, bool> && sizeof(I) <= sizeof(std::uint64_t);

namespace detail {

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

// parallel_for's piece and chunk sizes (see the header comment): a grain
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

// The loop of one chunk, a function of its own (see the header comment,
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
      // Lazy split (see the header comment): worth it only while at least
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

// A loop called from outside the pool (see the header comment): this
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

}  // namespace detail

/// Calls `f(i)` for every `i` in [first, last), in parallel on `pool`.
/// `grain` (0 = automatic) is the largest piece run without splitting.
template <parallel_index I, typename F>
  requires std::invocable<F&, I>
void parallel_for(thread_pool& pool, I first, I last, F&& f, std::size_t grain_indices = 0) {
  if (detail::is_empty_callable(f)) {
    throw error_exception(error{error_code::invalid_argument, "parallel_for: empty function"});
  }
  if (!(first < last)) return;
  const detail::for_sizes sizes = detail::parallel_for_sizes(pool.worker_count(), first, last, grain_indices);
  using body_t = std::remove_reference_t<F>;
  const bool on_worker = pool.is_worker_thread();
  if (!on_worker) {
    // From outside, not while the pool's queue holds its bound of pieces
    // taken back (a busy or paused pool): this thread runs the loop alone.
    if (detail::taken_back_of(pool).full()) {
      for (I i = first; i < last; ++i) f(i);
      return;
    }
  }
  std::shared_ptr<detail::parallel_for_state<I, body_t>> st;
  try {
    if (on_worker) {
      st = std::make_shared<detail::parallel_for_state<I, body_t>>(pool, f, sizes);
    } else {
      st = std::make_shared<detail::caller_loop_state<I, body_t>>(pool, f, sizes);
    }
  } catch (const std::bad_alloc&) {
    // No memory to share the loop: run it here, serially, which needs none.
    for (I i = first; i < last; ++i) f(i);
    return;
  }
  if (on_worker) {
    detail::run_piece<I, body_t>(st, first, last);
  } else {
    detail::run_as_caller<I, body_t>(st, first, last);
  }
  st->done.wait(0);  // helps when called on a worker
  if (st->first_error) std::rethrow_exception(st->first_error);
  // relaxed: done.wait() acquired what the pieces published.
  if (st->cancelled.load(std::memory_order_relaxed)) {
    throw error_exception(
        error{error_code::cancelled, "parallel_for: a piece was discarded by the pool before it ran"});
  }
}

/// Reduces [first, last): leaves compute `reduce_range(lo, hi, identity)`,
/// pairs are merged with `combine(left, right)`.
template <parallel_index I, typename T, typename RangeReduce, typename Combine>
  requires std::invocable<RangeReduce&, I, I, T> && std::invocable<Combine&, T, T>
T parallel_reduce(thread_pool& pool, I first, I last, T identity, RangeReduce reduce_range, Combine combine,
                  std::size_t grain_indices = 0) {
  if (detail::is_empty_callable(reduce_range) || detail::is_empty_callable(combine)) {
    throw error_exception(error{error_code::invalid_argument, "parallel_reduce: empty function"});
  }
  if (!(first < last)) return identity;
  const std::uint64_t grain =
      grain_indices != 0 ? grain_indices : detail::default_grain(pool.worker_count(), first, last);
  // Set by the first failure; leaves not started yet are skipped (their
  // value is never used: the exception reaches the caller instead).
  std::atomic<bool> failed{false};

  struct node {
    thread_pool& pool;
    const T& identity;
    RangeReduce& reduce_range;
    Combine& combine;
    std::uint64_t grain;
    std::atomic<bool>& failed;
    detail::taken_back_account& account;  // the pool's (pool_front.hpp)

    // `outstanding`: the right halves this thread has handed out from
    // outside the pool above this frame and may still take back (they count
    // toward the pool's bound, as parallel_for's stack of pieces).
    T operator()(I lo, I hi, std::int64_t outstanding = 0) const {
      // relaxed: a hint only; the exception travels through the halves.
      if (failed.load(std::memory_order_relaxed)) return identity;
      try {
        return reduce(lo, hi, outstanding);
      } catch (...) {
        failed.store(true, std::memory_order_relaxed);  // a hint, as above
        throw;
      }
    }

    using half_t = detail::reduce_half<T>;

    // Takes the handed-out right half back if no one has started it (the
    // value is then computed here), else waits until it has finished.
    // Returns true when taken back.
    bool take_back_or_wait(half_t& h, bool on_worker) const {
      if (h.claim()) {
        // From outside, its entry stays queued: counted until it leaves
        // (reduce_piece::leave_queue()).
        if (!on_worker) account.took_back();
        return true;
      }
      if (!on_worker) detail::poll_briefly(h.done);
      h.done.wait(0);  // helps on a worker
      return false;
    }

    T reduce(I lo, I hi, std::int64_t outstanding) const {
      if (detail::range_length(lo, hi) <= grain) return reduce_range(lo, hi, identity);
      const I mid = detail::advance_index(lo, detail::range_length(lo, hi) / 2);
      // Asked per split: the halves of a call from outside run on workers too.
      const bool on_worker = pool.is_worker_thread();
      std::shared_ptr<half_t> right;
      // From outside, not at the pool's bound on pieces taken back and
      // still queued (a busy or paused pool; this thread's halves that it
      // may still take back count): this thread does both halves, on the
      // same tree.
      if (on_worker || !account.full(outstanding)) {
        try {
          right = std::make_shared<half_t>();
          // Refused (stopping, full, out of memory): this thread does it.
          if (!detail::fork_access::push(
                  pool, detail::reduce_piece<I, T, node>{right, this, mid, hi, on_worker ? nullptr : &account})) {
            right.reset();
          }
        } catch (const std::bad_alloc&) {  // no memory to share the half: this thread does it
          right.reset();
        }
      }
      // If the left half throws, the right half must not run on after this
      // frame (which it references) is gone. A left half that only saw a
      // piece the pool discarded (cancelled) gives way to an exception of
      // the right half: a body's exception takes precedence.
      T left = [&] {
        try {
          return (*this)(lo, mid, on_worker || !right ? outstanding : outstanding + 1);
        } catch (const error_exception& e) {
          if (right && !take_back_or_wait(*right, on_worker) && e.code() == error_code::cancelled && right->exception) {
            std::rethrow_exception(right->exception);
          }
          throw;
        } catch (...) {
          if (right) (void)take_back_or_wait(*right, on_worker);
          throw;
        }
      }();
      if (!right || take_back_or_wait(*right, on_worker))
        return combine(std::move(left), (*this)(mid, hi, outstanding));
      // acquire: done.wait() (or ready() in poll_briefly) acquired what the
      // half's run or discard published with done.set().
      if (right->exception) std::rethrow_exception(right->exception);
      return combine(std::move(left), std::move(*right->value));
    }
  };
  // From outside the pool this thread takes part as in parallel_for: it
  // hands right halves to the pool's queue and takes back each one no
  // worker has started.
  const node root{pool, identity, reduce_range, combine, grain, failed, detail::taken_back_of(pool)};
  return root(first, last);
}

}  // namespace thread_system
