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
#include "thread_system/pools/parallel_split.hpp"
#include "thread_system/pools/thread_pool.hpp"

namespace thread_system {

/// Index types parallel_for and parallel_reduce accept.
template <typename I>
concept parallel_index =
    std::integral<I> && !std::same_as<std::remove_cv_t<I>, bool> && sizeof(I) <= sizeof(std::uint64_t);

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
