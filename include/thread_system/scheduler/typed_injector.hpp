// typed_injector: the injector of a typed pool - one queue per job kind,
// taken in priority order.
//
// Kinds are identified by their rank, 0 (highest priority) to 63. A kind's
// queue is created on first use, of the kind the pool was configured with
// (pool_queue), and lives until the injector is destroyed. Jobs carry their
// kind as the job_function tag (rank + 1, detail::job_tag), so the worker
// that runs a job can count it for its kind without looking anything up.
//
// Pushing: push() and push_batch() are the injector interface, as for every
// injector; they route each job by the kind its tag names (a batch holds one
// kind). A job without a kind, a kind beyond 64, or a batch that mixes kinds
// is `invalid_argument`, and nothing is queued. push_kind() and
// push_kind_batch() set the tag first.
//
// Choosing a job (pop_for), for a worker serving the kinds in `mask`:
//   * strict priority (aging off): the highest-priority kind in `mask` whose
//     queue has a job. A job of a lower kind never starts on this worker
//     while a job of a higher kind it serves is queued.
//   * aging (bound B > 0): a kind in `mask` that has had jobs queued without
//     any of them being started for at least B is served first (the longest
//     waiting such kind wins); otherwise as strict priority. So a queued kind
//     is served at least once every B (plus the run time of the job that
//     is running when B expires), however busy the higher kinds are.
//   Only the highest kind a worker serves may come as a batch (a fair share
//   of its queue, without aging): nothing can outrank those jobs for that
//   worker. Every other choice is one job, so priority is decided per job.
//
// Accounting (the injector contract in injector.hpp): accepted() is the sum
// of the kinds' counts; close() closes every queue, and a queue created
// after close() is refused, so the contract carries over kind by kind.
//
// Per-kind statistics live here, not in the scheduler core: view() has a
// kind's accepted, cancelled, waiting counts and wait times; done_totals()
// its executed and failed counts, which the core reports through
// note_done() into one block of counters per worker (1 KiB, allocated by
// prepare_worker() before the worker starts; each block has one writer, so
// counting a job is a load and a store).
//
// Threading: every member may be called from any thread concurrently, except
// that note_done(w, ...) is called only by worker w (the core's contract).
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "thread_system/core/error.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/detail/fence.hpp"
#include "thread_system/diagnostics/latency_histogram.hpp"
#include "thread_system/scheduler/injector.hpp"

namespace thread_system::detail {

// Aligned to a cache line: every push reads the object's first line (the
// vtable pointer, the aging bound, the first kinds' slots), which must not
// share a line with a neighbour on the heap that other threads write.
class alignas(64) typed_injector final : public injector {
 public:
  static constexpr std::size_t max_kinds = 64;

  /// `aging_bound` 0 means strict priority.
  typed_injector(pool_queue queue_kind, std::chrono::nanoseconds aging_bound)
      : queue_kind_(queue_kind),
        aging_ns_(aging_bound.count() > 0 ? static_cast<std::uint64_t>(aging_bound.count()) : 0) {}

  /// Changes the queue kind; false once any kind's queue exists.
  bool set_queue_kind(pool_queue kind) {
    std::lock_guard lock(create_mutex_);
    if (created_.load(std::memory_order_relaxed) != 0) return false;  // written only under create_mutex_
    queue_kind_ = kind;
    return true;
  }

  /// The queue kind each kind's queue gets (or got).
  [[nodiscard]] pool_queue queue_kind() const {
    std::lock_guard lock(create_mutex_);
    return queue_kind_;
  }

  /// Queues `fn` as a job of kind `rank` (< max_kinds): sets the kind bits
  /// of its tag, then push(). On refusal `fn` keeps its callable (its tag
  /// then names the kind).
  [[nodiscard]] result<void> push_kind(std::size_t rank, job_function&& fn) {
    if (rank >= max_kinds) return rank_beyond(rank);
    fn.set_tag(detail::job_tag::with_rank(fn.tag(), rank));
    return push(std::move(fn));
  }

  /// The queue of kind `rank` (< max_kinds) when a job of that kind may be
  /// pushed into it directly instead of through push_and_check(): the queue
  /// exists and aging is off (push_and_check() also starts the kind's aging
  /// clock). Null otherwise (not created yet, or aging on): push through
  /// the injector. A job pushed there must carry its kind in its tag, as for
  /// push(); the injector counts it (accepted() sums the kinds' queues) and
  /// close() closes that queue like the others, so the accounting contract
  /// holds as for push_and_check(). The typed pool's enqueue uses it: one
  /// call per job fewer.
  [[nodiscard]] injector* direct_queue(std::size_t rank) const noexcept {
    if (aging_ns_ != 0 || rank >= max_kinds) return nullptr;
    const kind_slot* s = slots_[rank].load(std::memory_order_acquire);  // pairs with the release in create_slot()
    return s != nullptr ? s->queue.get() : nullptr;
  }

  /// Queues all of `fns` as jobs of kind `rank`, all or none (as push_kind()).
  [[nodiscard]] result<void> push_kind_batch(std::size_t rank, std::span<job_function> fns) {
    if (rank >= max_kinds) return rank_beyond(rank);
    for (auto& fn : fns) fn.set_tag(detail::job_tag::with_rank(fn.tag(), rank));
    return push_batch(fns);
  }

  // ---- injector --------------------------------------------------------

  /// Queues `fn` as a job of the kind its tag names (detail::job_tag: kind
  /// bits = rank + 1). A job without a kind (an untyped job) or of a kind
  /// beyond max_kinds is `invalid_argument`; after close(), `pool_stopped`.
  /// On refusal `fn` is left untouched.
  result<void> push(job_function&& fn) override {
    bool wake = true;  // the answer is the pool's business, not push()'s
    return push_and_check(std::move(fn), wake);
  }

  /// push() that asks for a wake-up as the job's kind queue answers it:
  /// only when no earlier job of that kind was waiting (the mutex,
  /// lock-free and adaptive queues; the others always ask). A worker was
  /// woken for that earlier job, and a worker that takes a job and leaves
  /// some behind wakes the next (pool_core::find_and_run, through
  /// pending_mask()), so this job is found without a wake-up of its own:
  /// docs/ARCHITECTURE.md, "Parking without lost wake-ups".
  result<void> push_and_check(job_function&& fn, bool& wake) override {
    wake = true;
    const std::uint8_t kind = detail::job_tag::kind(fn.tag());
    if (kind == 0 || kind > max_kinds) return bad_kind(kind);
    kind_slot* slot = slot_for(kind - 1u);
    if (slot == nullptr) return closed_error();
    if (aging_ns_ != 0) note_push(*slot);
    return slot->queue->push_and_check(std::move(fn), wake);
  }

  /// Queues all of `fns`, all or none. A batch holds one kind (every tag
  /// names the same kind, read as push() reads it): a batch that mixes
  /// kinds or holds a job without a kind is `invalid_argument`, and
  /// nothing is queued.
  result<void> push_batch(std::span<job_function> fns) override {
    if (fns.empty()) return {};
    const std::uint8_t kind = detail::job_tag::kind(fns[0].tag());
    if (kind == 0 || kind > max_kinds) return bad_kind(kind);
    for (const auto& fn : fns) {
      if (detail::job_tag::kind(fn.tag()) != kind) {
        return make_error(error_code::invalid_argument,
                          "typed injector: a batch holds jobs of one kind; this one mixes kinds");
      }
    }
    kind_slot* slot = slot_for(kind - 1u);
    if (slot == nullptr) return closed_error();
    if (aging_ns_ != 0) note_push(*slot);
    return slot->queue->push_batch(fns);
  }

  std::size_t pop_share(std::span<job_function> out, std::size_t consumers) override {
    return pop_for(~std::uint64_t{0}, out, consumers);
  }

  // The victim of drop_oldest: the oldest job of the lowest-priority kind
  // that has one.
  std::size_t pop_victim(std::span<job_function> out) override {
    if (out.empty()) return 0;
    const std::uint64_t created = created_.load(std::memory_order_acquire);  // pairs with create_slot()
    for (int r = static_cast<int>(max_kinds) - 1; r >= 0; --r) {
      if ((created & (std::uint64_t{1} << r)) == 0) continue;
      kind_slot* s = slots_[static_cast<std::size_t>(r)].load(std::memory_order_acquire);  // pairs with create_slot()
      if (s->queue->pop_share(out.first(1), 1) == 1) return 1;
    }
    return 0;
  }

  std::size_t pop_for(std::uint64_t mask, std::span<job_function> out, std::size_t consumers) override {
    if (out.empty()) return 0;
    mask &= created_.load(std::memory_order_acquire);  // pairs with the release in create_slot()
    if (mask == 0) return 0;
    if (aging_ns_ != 0) {
      const std::uint64_t now = steady_now_ns();
      // The kind that has waited longest beyond the bound goes first.
      for (;;) {
        kind_slot* oldest = nullptr;
        std::uint64_t oldest_since = 0;
        for (std::uint64_t m = mask; m != 0; m &= m - 1) {
          // acquire: pairs with the release in create_slot() (a slot is read once its bit is seen).
          kind_slot* s = slots_[static_cast<std::size_t>(std::countr_zero(m))].load(std::memory_order_acquire);
          // relaxed: a timing hint; the queue itself orders the jobs.
          const std::uint64_t since = s->stalled_since.load(std::memory_order_relaxed);
          if (since == 0 || now - std::min(now, since) < aging_ns_ || s->queue->empty_approx()) continue;
          if (oldest == nullptr || since < oldest_since) {
            oldest = s;
            oldest_since = since;
          }
        }
        if (oldest == nullptr) break;
        if (take_one(*oldest, out, now)) return 1;
        mask &= ~(std::uint64_t{1} << oldest->rank);  // emptied meanwhile: look again without it
      }
      for (std::uint64_t m = mask; m != 0; m &= m - 1) {
        // acquire: pairs with the release in create_slot() (a slot is read once its bit is seen).
        kind_slot* s = slots_[static_cast<std::size_t>(std::countr_zero(m))].load(std::memory_order_acquire);
        if (take_one(*s, out, now)) return 1;
      }
      return 0;
    }
    // Strict priority. The worker's highest kind may be taken as a batch (a
    // fair share, up to out.size()): no queued job can outrank it for this
    // worker, and the pool runs the batch before anything of a lower kind.
    // Any other kind is taken one job at a time.
    for (std::uint64_t m = mask; m != 0; m &= m - 1) {
      // acquire: pairs with the release in create_slot() (a slot is read once its bit is seen).
      kind_slot* s = slots_[static_cast<std::size_t>(std::countr_zero(m))].load(std::memory_order_acquire);
      const bool highest = m == mask;
      const std::size_t n = s->queue->pop_share(highest ? out : out.first(1), highest ? consumers : 1);
      if (n != 0) return n;
    }
    return 0;
  }

  bool has_work_for(std::uint64_t mask) const noexcept override { return (pending_mask() & mask) != 0; }

  std::uint64_t pending_mask() const noexcept override {
    std::uint64_t pending = 0;
    for (std::uint64_t m = created_.load(std::memory_order_acquire); m != 0; m &= m - 1) {  // pairs with create_slot()
      const auto r = static_cast<std::size_t>(std::countr_zero(m));
      // acquire: pairs with the release in create_slot() (a slot is read once its bit is seen).
      if (!slots_[r].load(std::memory_order_acquire)->queue->empty_approx()) pending |= std::uint64_t{1} << r;
    }
    return pending;
  }

  bool empty_approx() const noexcept override { return pending_mask() == 0; }

  std::size_t size_approx() const noexcept override {
    std::size_t n = 0;
    for_each_slot([&n](const kind_slot& s) { n += s.queue->size_approx(); });
    return n;
  }

  void close() override {
    std::lock_guard lock(create_mutex_);
    // Every existing queue first, then the flag: a worker that sees
    // is_closed() must find every queue closed, or it could leave while a
    // producer still pushes into one (stop(drain) would lose that job).
    for_each_slot([](const kind_slot& s) { s.queue->close(); });
    closed_.store(true, std::memory_order_release);  // pairs with is_closed(); creation checks it under the lock
  }

  bool is_closed() const noexcept override {
    // acquire: pairs with the release in close(), which comes after every
    // queue that existed was closed; later queues are never created.
    return closed_.load(std::memory_order_acquire);
  }

  std::uint64_t accepted() const noexcept override {
    std::uint64_t n = 0;
    for_each_slot([&n](const kind_slot& s) { n += s.queue->accepted(); });
    return n;
  }

  void wait_for_pushes() const noexcept override {
    for_each_slot([](const kind_slot& s) { s.queue->wait_for_pushes(); });
  }

  std::uint64_t queue_switches() const noexcept override {
    std::uint64_t n = 0;
    for_each_slot([&n](const kind_slot& s) { n += s.queue->queue_switches(); });
    return n;
  }

  void note_cancelled(std::uint8_t tag) noexcept override {
    // release: pairs with the acquire load in view(), which reads the
    // cancelled count before the accepted one (so a snapshot never shows a
    // job cancelled but not accepted).
    if (kind_slot* s = slot_of_tag(tag)) s->cancelled.fetch_add(1, std::memory_order_release);
  }

  void note_wait(std::uint8_t tag, std::uint64_t wait_ns) noexcept override {
    if (kind_slot* s = slot_of_tag(tag)) s->wait.record_concurrent(wait_ns);
  }

  void prepare_worker(std::size_t worker) override {
    if (worker > max_workers) return;
    // relaxed: written only here, under the pool's lifecycle lock.
    if (done_[worker].load(std::memory_order_relaxed) != nullptr) return;  // a worker that comes back
    auto block = std::make_unique<done_block>();
    // release: pairs with the acquire loads in done_totals(). The worker's
    // own (relaxed) loads are ordered by its thread's creation, which comes
    // after this.
    done_[worker].store(block.get(), std::memory_order_release);
    owned_blocks_[worker] = std::move(block);
  }

  [[nodiscard]] bool prepare_caller_run(std::uint8_t tag) override {
    const unsigned kind = detail::job_tag::kind(tag);
    if (kind == 0 || kind > max_kinds) return true;
    return slot_for(kind - 1u) != nullptr;  // the kind's counters, made on first use; null once closed
  }

  void note_ran_on_caller(std::uint8_t tag, job_outcome outcome) noexcept override {
    kind_slot* s = slot_of_tag(tag);
    if (s == nullptr) return;
    // Accepted first, then how it ended (release on both; view() and
    // done_totals() read the endings before the accepted count, with
    // acquire, so a snapshot never shows a job ended but not accepted).
    s->ran_on_caller.fetch_add(1, std::memory_order_release);
    if (outcome == job_outcome::cancelled) {
      s->cancelled.fetch_add(1, std::memory_order_release);  // as note_cancelled()
      return;
    }
    if (outcome == job_outcome::failed_reported) s->failed_on_caller.fetch_add(1, std::memory_order_relaxed);
    s->executed_on_caller.fetch_add(1, std::memory_order_release);
  }

  void note_done(std::size_t worker, std::uint8_t tag, bool failed) noexcept override {
    const unsigned kind = detail::job_tag::kind(tag);
    if (worker > max_workers || kind == 0 || kind > max_kinds) return;
    // relaxed: set by prepare_worker() before this worker's thread started.
    done_block* b = done_[worker].load(std::memory_order_relaxed);
    if (b == nullptr) return;
    // One writer per block (worker `worker`): a load and a store, no
    // locked read-modify-write. failed: statistics only. executed: release,
    // pairs with the acquire loads in done_totals(), so a reader that counts
    // this job also reads its kind's accepted count including it.
    if (failed) single_writer_add(b->failed[kind - 1], 1);
    single_writer_add(b->executed[kind - 1], 1, std::memory_order_release);
  }

  // ---- statistics --------------------------------------------------------

  struct kind_view {
    bool exists = false;
    std::uint64_t accepted = 0;
    std::uint64_t cancelled = 0;
    std::size_t waiting = 0;
    histogram_snapshot wait;
  };

  [[nodiscard]] kind_view view(std::size_t rank) const noexcept {
    kind_view v;
    if (rank >= max_kinds) return v;
    const kind_slot* s = slots_[rank].load(std::memory_order_acquire);  // pairs with create_slot()
    if (s == nullptr) return v;
    v.exists = true;
    // Cancelled first (acquire, pairs with note_cancelled()), accepted
    // after: every job counted cancelled was accepted before, so the
    // accepted count read after includes it.
    v.cancelled = s->cancelled.load(std::memory_order_acquire);
    // Pairs with note_ran_on_caller(): the jobs caller_runs ran count as accepted too.
    v.accepted = s->queue->accepted() + s->ran_on_caller.load(std::memory_order_acquire);
    v.waiting = s->queue->size_approx();
    v.wait = s->wait.snapshot();
    return v;
  }

  /// Jobs of kind `rank` executed (including failed ones) and failed, over
  /// every worker. Read before view() for a snapshot that never shows more
  /// jobs finished than accepted.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> done_totals(std::size_t rank) const noexcept {
    std::uint64_t executed = 0;
    std::uint64_t failed = 0;
    if (rank >= max_kinds) return {0, 0};
    for (const auto& slot : done_) {
      const done_block* b = slot.load(std::memory_order_acquire);  // pairs with prepare_worker()
      if (b == nullptr) continue;
      executed += b->executed[rank].load(std::memory_order_acquire);  // pairs with note_done()
      failed += b->failed[rank].load(std::memory_order_relaxed);      // statistics only
    }
    if (const kind_slot* s = slots_[rank].load(std::memory_order_acquire)) {  // pairs with create_slot()
      executed += s->executed_on_caller.load(std::memory_order_acquire);      // pairs with note_ran_on_caller()
      failed += s->failed_on_caller.load(std::memory_order_relaxed);          // statistics only
    }
    return {executed, failed};
  }

  /// Bit r set when kind r's queue exists.
  [[nodiscard]] std::uint64_t created_mask() const noexcept {
    return created_.load(std::memory_order_acquire);  // pairs with create_slot()
  }

 private:
  struct kind_slot {
    kind_slot(std::size_t r, std::unique_ptr<injector> q) : rank(r), queue(std::move(q)) {}
    const std::size_t rank;
    const std::unique_ptr<injector> queue;
    // Aging: since when this kind has had jobs waiting without one being
    // started (steady_now_ns()), 0 before its first push.
    alignas(64) std::atomic<std::uint64_t> stalled_since{0};
    std::atomic<std::uint64_t> cancelled{0};
    // Jobs backpressure::caller_runs ran on their submitting thread (never
    // queued): accepted, and how they ended (note_ran_on_caller()).
    std::atomic<std::uint64_t> ran_on_caller{0};
    std::atomic<std::uint64_t> executed_on_caller{0};
    std::atomic<std::uint64_t> failed_on_caller{0};
    latency_histogram wait;  // sampled enqueue->start times, any worker records
  };

  static unexpected_error closed_error() { return make_error(error_code::pool_stopped, "queue is closed"); }
  THREAD_SYSTEM_NOINLINE static unexpected_error bad_kind(std::uint8_t kind) {
    if (kind == 0) return make_error(error_code::invalid_argument, "typed injector: the job carries no kind");
    return rank_beyond(kind - 1u);
  }
  static unexpected_error rank_beyond(std::size_t rank) {
    return make_error(error_code::invalid_argument,
                      "typed injector: kind rank " + std::to_string(rank) + " is beyond the 64 kinds");
  }

  // The slot of kind `rank`, created on first use; null once closed.
  // Every push through the injector passes here (the typed pool's enqueue
  // skips it once the kind's queue exists: direct_queue()): the common case
  // is a load; creating the queue is out of line.
  THREAD_SYSTEM_ALWAYS_INLINE kind_slot* slot_for(std::size_t rank) {
    kind_slot* s = slots_[rank].load(std::memory_order_acquire);  // pairs with the release in create_slot()
    return s != nullptr ? s : create_slot(rank);
  }

  THREAD_SYSTEM_NOINLINE kind_slot* create_slot(std::size_t rank) {
    std::lock_guard lock(create_mutex_);
    kind_slot* s = slots_[rank].load(std::memory_order_relaxed);  // written only under create_mutex_
    if (s != nullptr) return s;
    if (closed_.load(std::memory_order_relaxed)) return nullptr;  // written only under create_mutex_
    owned_[rank] = std::make_unique<kind_slot>(rank, make_injector(queue_kind_, 256));
    s = owned_[rank].get();
    // release: the slot is fully built before a reader can see it (pairs
    // with every acquire load of slots_).
    slots_[rank].store(s, std::memory_order_release);
    created_.fetch_or(std::uint64_t{1} << rank, std::memory_order_release);  // pairs with acquire loads of created_
    return s;
  }

  kind_slot* slot_of_tag(std::uint8_t tag) const noexcept {
    tag = detail::job_tag::kind(tag);
    if (tag == 0 || tag > max_kinds) return nullptr;
    return slots_[tag - 1u].load(std::memory_order_acquire);  // pairs with create_slot()
  }

  template <typename F>
  void for_each_slot(F&& f) const {
    for (std::uint64_t m = created_.load(std::memory_order_acquire); m != 0; m &= m - 1) {  // pairs with create_slot()
      // acquire: pairs with the release in create_slot() (a slot is read once its bit is seen).
      f(*slots_[static_cast<std::size_t>(std::countr_zero(m))].load(std::memory_order_acquire));
    }
  }

  void note_push(kind_slot& s) noexcept {
    // A push into an empty queue starts the kind's waiting time (pops restart
    // it, see take_one()). relaxed: a timing hint only.
    if (s.queue->empty_approx() || s.stalled_since.load(std::memory_order_relaxed) == 0) {
      s.stalled_since.store(steady_now_ns(), std::memory_order_relaxed);
    }
  }

  bool take_one(kind_slot& s, std::span<job_function> out, std::uint64_t now) {
    if (s.queue->pop_share(out.first(1), 1) != 1) return false;
    // The kind was just served: whatever waits behind starts its wait now.
    s.stalled_since.store(now, std::memory_order_relaxed);  // timing hint only
    return true;
  }

  // A worker's completed and failed jobs per kind; written by that worker only.
  struct done_block {
    std::array<std::atomic<std::uint64_t>, max_kinds> executed{};
    std::array<std::atomic<std::uint64_t>, max_kinds> failed{};
  };

  pool_queue queue_kind_;  // guarded by create_mutex_
  const std::uint64_t aging_ns_;
  std::array<std::atomic<kind_slot*>, max_kinds> slots_{};
  std::atomic<std::uint64_t> created_{0};
  std::atomic<bool> closed_{false};
  mutable std::mutex create_mutex_;
  std::array<std::unique_ptr<kind_slot>, max_kinds> owned_{};  // guarded by create_mutex_
  // Per worker (index 0..max_workers, see injector::prepare_worker()): set
  // once, before that worker runs a job; never replaced.
  std::array<std::atomic<done_block*>, max_workers + 1> done_{};
  std::array<std::unique_ptr<done_block>, max_workers + 1> owned_blocks_{};
};

}  // namespace thread_system::detail
