// lockfree_queue: an unbounded, lock-free multi-producer multi-consumer FIFO
// of jobs.
//
// Algorithm: the two-CAS linked queue of M. M. Michael and M. L. Scott,
// "Simple, Fast, and Practical Non-Blocking and Blocking Concurrent Queue
// Algorithms", PODC 1996. `head_` points at a dummy node whose successor is
// the oldest job; producers link a node after the last one with a CAS on its
// `next`, then swing `tail_` (any thread that finds `tail_` lagging helps
// swing it). A consumer swings `head_` to the successor, takes the job out of
// it (the successor becomes the new dummy) and retires the old dummy.
//
// Reclamation: hazard pointers (M. M. Michael, IEEE TPDS 2004; see
// detail/hazard_pointers.hpp). A node that is retired goes back to the node
// pool only after a scan found no hazard slot holding it.
//
// Why ABA cannot happen: every CAS here compares a pointer the thread has
// protected with a hazard pointer and re-validated (`head_`, `tail_`, a
// node's `next`, the pool's top). A node changes role (dequeued → pooled →
// reused as a new node) only by passing through retire + scan, and a scan
// never releases a node a hazard slot holds. So while a thread's CAS expects
// address A, A cannot be recycled and come back under the same address: if
// the location changed, it holds a different node, and the CAS fails as it
// should. This also covers the pool's free list (a Treiber stack, itself
// prone to ABA): nodes enter it only from a scan, never directly, not even a
// node taken for a push that then failed on a closed queue.
//
// Node pool: reclaimed nodes are kept on a lock-free free list and reused by
// later pushes, so once the pool holds the working set, pushing and popping
// allocate nothing. The pool keeps at most `max_pooled_nodes` (constructor
// argument); beyond that reclaimed nodes are freed, so memory returns to
// `max_pooled_nodes` nodes after a burst.
//
// Node size: 40 bytes, the `next` pointer and the job in job_function's
// packed form in 4 words (detail/packed_slot.hpp), so that a node is one
// 48-byte malloc chunk. Callables of up to `inline_job_bytes` (16) bytes -
// function pointers, lambdas capturing two pointers, anything job_function
// already keeps on the heap - are stored in the node; a larger callable is
// boxed (one extra allocation per push, freed by the pop that takes it).
//
// Contract:
//   * Any number of threads may call any member concurrently. Threads beyond
//     those already seen may allocate a hazard record (see the domain).
//   * FIFO: jobs pushed by one thread are popped in the order pushed.
//   * A successful push happens-before the pop that returns its job.
//   * try_push fails with `invalid_argument` (empty job), `pool_stopped`
//     (closed) or `resource_exhausted` (out of memory); on failure the job
//     still holds its callable (it may have been relocated into a node and
//     back, which for a job_function is not observable beyond the move).
//   * push_batch links the whole batch with one CAS: all or none.
//   * close() links a sentinel after the last node with the same CAS pushes
//     use, so pushes and close are totally ordered: a push that linked first
//     completes, every later push fails with `pool_stopped`. Pops keep
//     returning the jobs before the sentinel; once close() has returned, a
//     pop that returns false proves the queue is empty for good.
//   * size_approx() is pushes minus pops from two relaxed counters:
//     approximate, clamped at zero.
//   * The destructor destroys queued jobs (not run, not cancelled) exactly
//     once and frees every node, requiring that no other member is running.
//
// Sealing (for adaptive_job_queue, a friend): seal() links a second kind of
// sentinel with the same CAS, after which pushes fail with a `sealed` status
// (not an error: the adaptive queue retries them on its other queue) and
// pops report `ended` once they reach it; unseal() removes it again. close()
// overrides a seal. pop_checked() runs a caller's check after the operation
// holds its hazard record, and operation_in_progress() tells whether any
// operation holds one: together they let the adaptive queue prove that no
// pop which decided under an older state is still running (see there).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <utility>
#include "thread_system/detail/chaos.hpp"

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/hazard_pointers.hpp"
#include "thread_system/detail/packed_slot.hpp"
#include "thread_system/queues/queue_concept.hpp"

namespace thread_system {

/// An unbounded, lock-free multi-producer multi-consumer FIFO of jobs (Michael-Scott queue with hazard pointers).
class lockfree_queue {
 public:
  /// Default bound on the reclaimed nodes kept for reuse.
  static constexpr std::size_t default_max_pooled_nodes = 8192;

  /// Callables up to this size are stored in the queue's node; larger ones
  /// cost one more allocation per push (see the header comment).
  static constexpr std::size_t inline_job_bytes = 16;

  /// An empty queue that keeps at most `max_pooled_nodes` reclaimed nodes for reuse; the rest are freed.
  explicit lockfree_queue(std::size_t max_pooled_nodes = default_max_pooled_nodes)
      : max_pooled_(max_pooled_nodes), domain_(&reclaim_node, this) {
    domain_.reserve_record();  // close() waits for a record rather than fail for lack of memory
    node* dummy = new node;
    allocated_.store(1, std::memory_order_relaxed);  // before the queue is shared
    head_.store(dummy, std::memory_order_relaxed);   // published by the constructor's completion
    tail_.store(dummy, std::memory_order_relaxed);   // likewise
  }

  /// Not copyable.
  lockfree_queue(const lockfree_queue&) = delete;
  /// Not copyable.
  lockfree_queue& operator=(const lockfree_queue&) = delete;

  /// Destroys the jobs still queued (not run, not cancelled) and frees every node. Requires that no other member is
  /// running.
  ~lockfree_queue() {
    // Quiescent: no hazard is set, so every retired node is reclaimed (into
    // the pool or freed).
    domain_.collect();
    // relaxed below: the caller guarantees no concurrent member call.
    node* current = head_.load(std::memory_order_relaxed);
    bool dummy = true;  // the first node's job was taken by the pop that made it the dummy
    while (current != nullptr && current != closed_marker() && current != sealed_marker()) {
      node* next = current->next.load(std::memory_order_relaxed);
      if (!dummy) current->job.destroy();  // a still-queued job, destroyed exactly once
      dummy = false;
      delete current;
      current = next;
    }
    current = pool_top_.load(std::memory_order_relaxed);
    while (current != nullptr) {
      node* next = current->next.load(std::memory_order_relaxed);
      delete current;
      current = next;
    }
  }

  /// Appends `job` (see the contract for failures).
  [[nodiscard]] result<void> try_push(job_function&& job) {
    if (!job) return make_error(error_code::invalid_argument, "lockfree_queue: empty job");
    return as_result(push_one(std::move(job)));
  }

  /// Appends every job of `jobs` in order, all or none: the jobs are put in
  /// a private chain of nodes that is linked with one CAS.
  [[nodiscard]] result<void> push_batch(std::span<job_function> jobs) {
    for (const auto& job : jobs) {
      if (!job) return make_error(error_code::invalid_argument, "lockfree_queue: empty job in batch");
    }
    return as_result(push_chain(jobs));
  }

  /// Moves the oldest job into `out`; false when empty.
  [[nodiscard]] bool try_pop(job_function& out) {
    detail::hazard_holder holder(domain_);
    return pop_one(holder, out) == pop_status::taken;
  }

  /// Moves up to `out.size()` of the oldest jobs into `out`, in order
  /// (one hazard record for the batch, one CAS per job); returns how many.
  [[nodiscard]] std::size_t pop_batch(std::span<job_function> out) {
    if (out.empty()) return 0;
    detail::hazard_holder holder(domain_);
    std::size_t count = 0;
    while (count < out.size() && pop_one(holder, out[count]) == pop_status::taken) ++count;
    return count;
  }

  /// Refuses further pushes. Idempotent; jobs already queued stay poppable.
  /// Never fails: out of memory, it waits for a hazard record that another
  /// operation releases instead of allocating one.
  void close() noexcept {
    detail::hazard_holder holder(domain_, detail::hazard_holder::never_fails);
    for (;;) {
      node* last = holder.protect(0, tail_);
      // acquire: pairs with the release CAS that linked last's successor.
      node* next = last->next.load(std::memory_order_acquire);
      if (next == closed_marker()) break;
      if (next != nullptr && next != sealed_marker()) {
        advance_tail(last, next);
        continue;
      }
      // seq_cst: the same CAS pushes use, so close and every push are
      // totally ordered on this `next` (pairs with link()). A seal is
      // replaced: closing is final.
      THREAD_SYSTEM_CHAOS_POINT();
      if (last->next.compare_exchange_strong(next, closed_marker(), std::memory_order_seq_cst,
                                             std::memory_order_relaxed)) {
        break;
      }
    }
    closed_.store(true, std::memory_order_release);  // pairs with the acquire in is_closed()
  }

  /// True once close() has returned: every push fails with `pool_stopped`.
  [[nodiscard]] bool is_closed() const noexcept {
    return closed_.load(std::memory_order_acquire);  // pairs with close()
  }

  /// Number of queued jobs; approximate under concurrency.
  [[nodiscard]] std::size_t size_approx() const noexcept {
    // relaxed: statistics only; two counters read at different moments.
    const std::size_t popped = popped_.load(std::memory_order_relaxed);
    const std::size_t pushed = pushed_.load(std::memory_order_relaxed);
    return pushed > popped ? pushed - popped : 0;
  }
  /// True when size_approx() is 0; approximate under concurrency.
  [[nodiscard]] bool empty_approx() const noexcept { return size_approx() == 0; }

  /// Nodes currently allocated (queued + dummy + pooled + retired + in use by
  /// a running operation). For tests and statistics; approximate while
  /// operations run.
  [[nodiscard]] std::size_t allocated_count() const noexcept {
    return allocated_.load(std::memory_order_relaxed);  // statistics only
  }
  /// Nodes on the free list.
  [[nodiscard]] std::size_t pooled_count() const noexcept {
    return pooled_.load(std::memory_order_relaxed);  // statistics only
  }
  /// Failed CAS attempts on the queue's ends (pushes racing for the tail,
  /// pops racing for the head): the queue's contention. Relaxed counter.
  [[nodiscard]] std::uint64_t cas_retries() const noexcept {
    return cas_retries_.load(std::memory_order_relaxed);  // statistics only
  }
  /// Jobs pushed plus jobs popped so far (relaxed counters, approximate
  /// while operations run).
  [[nodiscard]] std::uint64_t jobs_moved() const noexcept {
    // relaxed: statistics only.
    return pushed_.load(std::memory_order_relaxed) + popped_.load(std::memory_order_relaxed);
  }
  /// Nodes retired and waiting for a scan.
  [[nodiscard]] std::size_t retired_count() const noexcept { return domain_.retired_count(); }
  /// Hazard records allocated (about the number of threads that used the queue at once).
  [[nodiscard]] std::size_t hazard_record_count() const noexcept { return domain_.record_count(); }

  /// Scans the retired nodes of every idle hazard record now rather than at
  /// the next threshold. With no operation running, retired_count() is 0
  /// afterwards.
  void collect() { domain_.collect(); }

 private:
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init): `job` is raw words (see below)
  struct node {
    // Successor in the queue, or the next free node while on the pool. Both
    // uses are atomic because a stale thread may read it after the node
    // changed role (its CAS then fails).
    std::atomic<node*> next{nullptr};
    // A job while the node is queued (not the dummy); nothing otherwise.
    // Raw words, written when a job is stored (not zeroed: a cost per node).
    detail::packed_slot<4> job;
  };
  static_assert(sizeof(node) == 40, "a node should be one 48-byte malloc chunk");
  static_assert(decltype(node::job)::inline_bytes == inline_job_bytes);

  friend class adaptive_job_queue;
  using slot = detail::packed_slot<4>;

  enum class link_status { linked, sealed, closed, out_of_memory };
  enum class pop_status {
    taken,
    empty,  ///< Nothing queued; pushes may still come.
    ended,  ///< Nothing queued and a seal or close ends the queue.
  };

  static result<void> as_result(link_status status) {
    switch (status) {
      case link_status::linked:
        return {};
      case link_status::out_of_memory:
        return make_error(error_code::resource_exhausted, "lockfree_queue: out of memory");
      case link_status::sealed:  // only an adaptive_job_queue seals; it never lets this through
      case link_status::closed:
        break;
    }
    return make_error(error_code::pool_stopped, "lockfree_queue: queue is closed");
  }

  // Pushes one job. Unless it returns `linked`, `job` still holds its callable.
  link_status push_one(job_function&& job) {
    if (!slot::prepare(job)) return link_status::out_of_memory;
    try {
      detail::hazard_holder holder(domain_);
      node* fresh = take_node(holder);
      fresh->job.put(std::move(job));
      if (const link_status linked = link(holder, fresh, fresh, 1); linked != link_status::linked) {
        fresh->job.take(job);  // unboxed: the caller gets back what it pushed
        holder.retire(fresh);  // through a scan, never straight to the pool (see ABA above)
        return linked;
      }
      return link_status::linked;
    } catch (const std::bad_alloc&) {
      slot::unprepare(job);
      return link_status::out_of_memory;
    }
  }

  // Pushes every job of `jobs` (non-empty, all valid), all or none. Unless it
  // returns `linked`, every job still holds its callable.
  link_status push_chain(std::span<job_function> jobs) {
    if (jobs.empty()) return link_status::linked;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (!slot::prepare(jobs[i])) {
        for (std::size_t j = 0; j < i; ++j) slot::unprepare(jobs[j]);
        return link_status::out_of_memory;
      }
    }
    node* first = nullptr;
    node* last = nullptr;
    try {
      detail::hazard_holder holder(domain_);
      try {
        for (auto& job : jobs) {
          node* fresh = take_node(holder);
          // relaxed: the chain is private until link() publishes it.
          if (last == nullptr) {
            first = fresh;
          } else {
            last->next.store(fresh, std::memory_order_relaxed);
          }
          last = fresh;
          fresh->job.put(std::move(job));
        }
      } catch (const std::bad_alloc&) {
        give_back_chain(holder, first, jobs);
        return link_status::out_of_memory;
      }
      if (const link_status linked = link(holder, first, last, jobs.size()); linked != link_status::linked) {
        give_back_chain(holder, first, jobs);
        return linked;
      }
      return link_status::linked;
    } catch (const std::bad_alloc&) {  // no hazard record could be allocated
      for (auto& job : jobs) slot::unprepare(job);
      return link_status::out_of_memory;
    }
  }

  // Pops up to out.size() jobs like pop_batch(), but first, while holding
  // the operation's hazard record, calls `check()`; when it returns false,
  // nothing is popped and the result is empty. When the pop stops at the end
  // marker (empty and sealed or closed), it calls `on_ended()` before
  // releasing the record.
  template <typename Check, typename OnEnded>
  std::optional<std::size_t> pop_checked(std::span<job_function> out, Check&& check, OnEnded&& on_ended) {
    detail::hazard_holder holder(domain_);
    if (!check()) return std::nullopt;
    std::size_t count = 0;
    while (count < out.size()) {
      const pop_status status = pop_one(holder, out[count]);
      if (status != pop_status::taken) {
        if (status == pop_status::ended) on_ended();
        break;
      }
      ++count;
    }
    return count;
  }

  // Links the seal sentinel after the last node: every later push fails
  // with `sealed`. True when sealed now (or already); false when closed.
  bool seal() { return swap_end(nullptr, sealed_marker()); }

  // Removes the seal. True when open now; false when closed.
  bool unseal() { return swap_end(sealed_marker(), nullptr); }

  // Sets the last node's `next` from `from` to `to` (a marker or nullptr).
  // True when it holds `to` afterwards; false when the queue is closed.
  bool swap_end(node* from, node* to) {
    detail::hazard_holder holder(domain_);
    for (;;) {
      node* last = holder.protect(0, tail_);
      // acquire: pairs with the release CAS that linked last's successor.
      node* next = last->next.load(std::memory_order_acquire);
      if (next == closed_marker()) return false;
      if (next == to) return true;
      if (next != from) {
        advance_tail(last, next);  // a job linked after `last`: help, then retry at the new end
        continue;
      }
      // seq_cst: the CAS pushes and close() use on this `next`, so sealing,
      // unsealing, pushes and close are totally ordered (pairs with link()).
      THREAD_SYSTEM_CHAOS_POINT();
      if (last->next.compare_exchange_strong(next, to, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        return true;
      }
    }
  }

  // True when some operation holds a hazard record right now. seq_cst
  // loads: with the seq_cst exchange that takes a record, a caller that
  // stored something (seq_cst) before asking either sees the operation here
  // or the operation's later seq_cst loads see that store.
  [[nodiscard]] bool operation_in_progress() const noexcept { return domain_.any_record_held(); }

  // Sentinel addresses, never dereferenced: `next == closed_marker()` marks
  // the last node of a closed queue, `next == sealed_marker()` of a sealed one.
  node* closed_marker() noexcept { return &closed_sentinel_; }
  node* sealed_marker() noexcept { return &sealed_sentinel_; }

  // Links the private chain first..last after the last node. Nothing is
  // linked unless it returns `linked`.
  link_status link(detail::hazard_holder& holder, node* first, node* last, std::size_t count) {
    // relaxed: the chain is private until the CAS below publishes it.
    last->next.store(nullptr, std::memory_order_relaxed);
    for (;;) {
      node* observed_tail = holder.protect(0, tail_);
      // acquire: pairs with the release CAS that linked a successor.
      node* next = observed_tail->next.load(std::memory_order_acquire);
      if (next == closed_marker()) return link_status::closed;
      if (next == sealed_marker()) return link_status::sealed;
      if (next != nullptr) {
        advance_tail(observed_tail, next);  // help the producer that linked it
        continue;
      }
      // seq_cst (release part): publishes the chain's jobs; pairs with the
      // acquire/seq_cst loads of `next` in pop_one() and here; totally
      // ordered with close(), seal() and unseal().
      THREAD_SYSTEM_CHAOS_POINT();
      if (observed_tail->next.compare_exchange_weak(next, first, std::memory_order_seq_cst,
                                                    std::memory_order_relaxed)) {
        pushed_.fetch_add(count, std::memory_order_relaxed);  // statistics only
        advance_tail(observed_tail, last);
        return link_status::linked;
      }
      cas_retries_.fetch_add(1, std::memory_order_relaxed);  // statistics and the adaptive queue's heuristic
    }
  }

  void advance_tail(node* expected, node* desired) noexcept {
    // release: a thread that reads `desired` from tail_ (seq_cst in protect)
    // sees its initialised `next`. Failure means someone else advanced it.
    THREAD_SYSTEM_CHAOS_POINT();
    tail_.compare_exchange_strong(expected, desired, std::memory_order_release, std::memory_order_relaxed);
  }

  pop_status pop_one(detail::hazard_holder& holder, job_function& out) {
    for (;;) {
      node* first = holder.protect(0, head_);
      // seq_cst loads (acquire part): pair with advance_tail()/link().
      node* last = tail_.load(std::memory_order_seq_cst);
      node* next = first->next.load(std::memory_order_seq_cst);
      holder.set(1, next);
      // Re-validate after publishing the hazard on `next`: while head_ is
      // still `first`, `next` is reachable, hence not retired.
      if (head_.load(std::memory_order_seq_cst) != first) continue;
      if (next == nullptr) return pop_status::empty;
      if (next == closed_marker() || next == sealed_marker()) return pop_status::ended;
      if (first == last) {
        advance_tail(last, next);  // tail lags behind a linked node; help
        continue;
      }
      // seq_cst: the unlink that scan()'s hazard loads are ordered after (see
      // hazard_pointers.hpp); acquire part also pairs with other consumers.
      THREAD_SYSTEM_CHAOS_POINT();
      if (head_.compare_exchange_strong(first, next, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        // `next` is the new dummy; its job is ours. Hazard 1 keeps it from
        // being recycled by a consumer that dequeues past it meanwhile.
        next->job.take(out);
        popped_.fetch_add(1, std::memory_order_relaxed);  // statistics only
        holder.clear(1);
        holder.clear(0);
        holder.retire(first);
        return pop_status::taken;
      }
      cas_retries_.fetch_add(1, std::memory_order_relaxed);  // statistics and the adaptive queue's heuristic
    }
  }

  node* take_node(detail::hazard_holder& holder) {
    for (;;) {
      node* top = holder.protect(0, pool_top_);
      if (top == nullptr) break;
      // acquire: pairs with the release CAS in reclaim_node() that pushed it.
      node* next = top->next.load(std::memory_order_acquire);
      // acquire: takes ownership of the node (pairs with reclaim_node()).
      THREAD_SYSTEM_CHAOS_POINT();
      if (pool_top_.compare_exchange_weak(top, next, std::memory_order_acquire, std::memory_order_relaxed)) {
        holder.clear(0);
        pooled_.fetch_sub(1, std::memory_order_relaxed);  // statistics only
        return top;
      }
    }
    holder.clear(0);
    node* fresh = new node;                              // may throw std::bad_alloc
    allocated_.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return fresh;
  }

  // Undoes a push that linked nothing: gives the jobs back (unboxed) and
  // retires the nodes (through a scan, see ABA above). The chain holds the
  // first jobs of `jobs`; the rest were never moved.
  static void give_back_chain(detail::hazard_holder& holder, node* first, std::span<job_function> jobs) {
    std::size_t index = 0;
    while (first != nullptr) {
      node* next = first->next.load(std::memory_order_relaxed);  // private chain
      first->job.take(jobs[index++]);
      first->next.store(nullptr, std::memory_order_relaxed);  // private chain
      holder.retire(first);
      first = next;
    }
    for (auto& job : jobs) slot::unprepare(job);
  }

  // Called by the hazard domain for a node no hazard protects any more.
  static void reclaim_node(void* context, void* pointer) noexcept {
    auto* self = static_cast<lockfree_queue*>(context);
    auto* reclaimed = static_cast<node*>(pointer);
    // The node holds no job: a pop took it, or a failed push took it back.
    // relaxed: a soft limit; counted before the push so the count never
    // drops below the true size.
    if (self->pooled_.fetch_add(1, std::memory_order_relaxed) >= self->max_pooled_) {
      self->pooled_.fetch_sub(1, std::memory_order_relaxed);
      delete reclaimed;
      self->allocated_.fetch_sub(1, std::memory_order_relaxed);  // statistics only
      return;
    }
    node* top = self->pool_top_.load(std::memory_order_relaxed);  // a guess for the CAS
    do {
      reclaimed->next.store(top, std::memory_order_relaxed);  // published by the release CAS below
      // release: publishes the node (and everything done to it before the
      // scan) to the thread that takes it; pairs with take_node().
    } while (
        !self->pool_top_.compare_exchange_weak(top, reclaimed, std::memory_order_release, std::memory_order_relaxed));
  }

  // Producers (tail_, pushed_) and consumers (head_, popped_) on separate
  // cache lines so that one side's writes do not invalidate the other's
  // (false sharing); the pool is written by both, so it gets its own line.
  alignas(64) std::atomic<node*> tail_{nullptr};
  std::atomic<std::size_t> pushed_{0};
  alignas(64) std::atomic<node*> head_{nullptr};
  std::atomic<std::size_t> popped_{0};
  alignas(64) std::atomic<node*> pool_top_{nullptr};
  std::atomic<std::size_t> pooled_{0};
  std::atomic<std::size_t> allocated_{0};
  alignas(64) std::atomic<bool> closed_{false};
  std::atomic<std::uint64_t> cas_retries_{0};
  std::size_t max_pooled_;
  node closed_sentinel_;
  node sealed_sentinel_;
  detail::hazard_domain domain_;
};

static_assert(job_queue_model<lockfree_queue>);

}  // namespace thread_system
