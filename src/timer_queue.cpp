// The timer thread of timer_queue (see scheduler/timer_queue.hpp for the
// contract). The heap is the textbook array binary heap with each entry's
// index kept in the entry, so cancel() removes a timer in O(log n) instead
// of leaving it to wake the thread at its due time.
//
// A periodic timer leaves the heap when its run is dispatched and joins the
// core's in-flight list; the run re-arms it when it ends (or is discarded),
// at the first grid point still ahead. So the timer thread never wakes for a
// timer whose run is still going, and stop() still finds every timer.
#include "thread_system/scheduler/timer_queue.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <new>
#include <vector>

#include "thread_system/detail/thread_attributes.hpp"

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace thread_system {

namespace detail {

namespace {
// The timer_core whose thread this is (nullptr elsewhere): stop() from the
// timer thread is refused instead of joining itself.
thread_local const timer_core* tl_timer_core = nullptr;
}  // namespace

// The counters of timer_statistics.
struct timer_counters {
  // All relaxed: statistics only, no data is published through them.
  std::atomic<std::uint64_t> scheduled{0};
  std::atomic<std::uint64_t> fired{0};
  std::atomic<std::uint64_t> cancelled{0};
  std::atomic<std::uint64_t> skipped_periods{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> wakeups{0};
};

struct timer_core {
  using clock = std::chrono::steady_clock;

  std::mutex mutex;
  std::condition_variable wake;                    // new earliest timer, or stop
  std::vector<std::shared_ptr<timer_entry>> heap;  // guarded by mutex
  // Guarded by mutex: timers whose run is out (see fire_top()), periodic
  // ones and one-shot ones apart (stop(drain) cancels only the former).
  timer_entry* periodic_in_flight = nullptr;
  timer_entry* one_shots_in_flight = nullptr;
  // Periodic timers on the in-flight list. The heap's array always has room
  // for them besides its own entries (reserve_room()), so a run's re-arm
  // never allocates and cannot fail for lack of memory.
  std::size_t periodic_flights = 0;   // guarded by mutex
  std::uint64_t next_seq = 0;         // guarded by mutex
  bool stopping = false;              // guarded by mutex
  stop_mode mode = stop_mode::drain;  // guarded by mutex
  clock::time_point stop_time{};      // guarded by mutex
  std::atomic<bool> running{true};    // mirror of !stopping for is_running()
  timer_counters counters;            // counted by the queue, its runs and its handles while the queue exists
  timer_routed_dispatch target;
  std::string name;
  job_function after_stop;  // guarded by mutex: see timer_queue::abandon_on_timer_thread()
  // timer_handle::cancel() calls in progress on the queue's timers. A cancel
  // destroys the timer's function, whose discard may push into the queue's
  // target (a sleep's resumption); stop() waits for these to end, so the
  // target (a pool, stopped after its timers) outlives every such push.
  std::atomic<std::uint32_t> handle_cancels{0};

  // Waits until the only timer_handle::cancel() calls in progress on this
  // queue are `own` (the calling thread's, which a stop made inside their
  // discard cannot wait for). acquire: pairs with end_handle_cancel().
  void wait_for_handle_cancels(std::uint32_t own) noexcept {
    for (std::uint32_t n = handle_cancels.load(std::memory_order_acquire); n > own;
         n = handle_cancels.load(std::memory_order_acquire)) {
      handle_cancels.wait(n, std::memory_order_acquire);
    }
  }

  // ---- heap (caller holds mutex) -------------------------------------------

  static bool earlier(const timer_entry& a, const timer_entry& b) noexcept {
    return a.due < b.due || (a.due == b.due && a.seq < b.seq);
  }

  void place(std::size_t i, std::shared_ptr<timer_entry> e) noexcept {
    e->heap_index = i;
    heap[i] = std::move(e);
  }

  void sift_up(std::size_t i) noexcept {
    std::shared_ptr<timer_entry> e = std::move(heap[i]);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!earlier(*e, *heap[parent])) break;
      place(i, std::move(heap[parent]));
      i = parent;
    }
    place(i, std::move(e));
  }

  void sift_down(std::size_t i) noexcept {
    std::shared_ptr<timer_entry> e = std::move(heap[i]);
    const std::size_t n = heap.size();
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && earlier(*heap[child + 1], *heap[child])) ++child;
      if (!earlier(*heap[child], *e)) break;
      place(i, std::move(heap[child]));
      i = child;
    }
    place(i, std::move(e));
  }

  // Makes room for one more entry and for every periodic run in flight to
  // come back. May throw std::bad_alloc before anything changed. Capacity
  // never shrinks while the queue runs, so heap.size() + periodic_flights
  // <= heap.capacity() holds once this was called for every entry added:
  // a run leaving the heap for the in-flight list and coming back changes
  // neither side of it.
  void reserve_room() {
    const std::size_t need = heap.size() + periodic_flights + 1;
    if (heap.capacity() < need) heap.reserve(std::max(need, 2 * heap.capacity()));
  }

  // May throw std::bad_alloc (growing the array) before anything changed;
  // never after reserve_room() made room.
  void push(std::shared_ptr<timer_entry> e) {
    heap.push_back(nullptr);
    place(heap.size() - 1, std::move(e));
    sift_up(heap.size() - 1);
  }

  void remove_at(std::size_t i) noexcept {
    heap[i]->heap_index = timer_entry::not_in_heap;
    const std::size_t last = heap.size() - 1;
    if (i != last) {
      place(i, std::move(heap[last]));
      heap.pop_back();
      // The moved element may belong above or below its new place.
      if (i > 0 && earlier(*heap[i], *heap[(i - 1) / 2])) {
        sift_up(i);
      } else {
        sift_down(i);
      }
    } else {
      heap.pop_back();
    }
  }

  std::shared_ptr<timer_entry> pop_top() noexcept {
    std::shared_ptr<timer_entry> top = heap.front();
    remove_at(0);
    return top;
  }

  void remove(timer_entry& e) noexcept {
    if (e.heap_index != timer_entry::not_in_heap) remove_at(e.heap_index);
  }

  // ---- in-flight list (caller holds mutex) ---------------------------------

  timer_entry*& flight_head(const timer_entry& e) noexcept {
    return e.periodic() ? periodic_in_flight : one_shots_in_flight;
  }

  void flight_insert(timer_entry& e) noexcept {
    timer_entry*& head = flight_head(e);
    if (e.periodic()) ++periodic_flights;
    e.in_flight = true;
    e.flight_prev = nullptr;
    e.flight_next = head;
    if (head != nullptr) head->flight_prev = &e;
    head = &e;
  }

  void flight_remove(timer_entry& e) noexcept {
    if (!e.in_flight) return;
    if (e.periodic()) --periodic_flights;
    if (e.flight_prev != nullptr) {
      e.flight_prev->flight_next = e.flight_next;
    } else {
      flight_head(e) = e.flight_next;
    }
    if (e.flight_next != nullptr) e.flight_next->flight_prev = e.flight_prev;
    e.flight_prev = e.flight_next = nullptr;
    e.in_flight = false;
  }
};

namespace {

void count_cancelled(timer_core& core) noexcept {
  core.counters.cancelled.fetch_add(1, std::memory_order_relaxed);  // statistics only
}

// A one-shot timer's run has started, or was discarded unrun: take the timer
// off the in-flight list (stop(cancel_pending) no longer needs to find it),
// counting it in `count` (none: nullptr).
void settle_one_shot(timer_entry& e, std::atomic<std::uint64_t> timer_counters::*count = nullptr) noexcept {
  std::shared_ptr<timer_core> core = e.core.lock();
  if (!core) return;  // the queue is gone, and its list and counters with it
  if (count != nullptr) (core->counters.*count).fetch_add(1, std::memory_order_relaxed);  // statistics only
  std::lock_guard lock(core->mutex);
  core->flight_remove(e);
}

// A periodic timer's run has ended (ran, or was discarded unrun): take the
// timer off the in-flight list and, when `rearm`, put it back in the heap at
// the first grid point after now. `unrun` counts the run's own grid point as
// skipped. The skipped grid points are counted in O(1).
void settle_periodic(timer_entry& e, bool rearm, bool unrun) noexcept {
  std::shared_ptr<timer_core> core = e.core.lock();
  if (!core) {  // the queue is gone: nothing will ever run this timer again (nor count it)
    if (rearm) (void)e.try_cancel();
    return;
  }
  bool cancel_it = false;
  bool notify = false;
  {
    std::lock_guard lock(core->mutex);
    core->flight_remove(e);
    if (!rearm) return;
    if (core->stopping) {
      cancel_it = true;
    } else if (e.status.load(std::memory_order_acquire) != timer_entry::cancelled) {  // pairs with try_cancel()
      const auto now = timer_core::clock::now();
      std::uint64_t skipped = unrun ? 1 : 0;
      auto next = saturating_add(e.due, e.period);
      std::uint64_t advance = 1;
      if (next <= now && next != timer_core::clock::time_point::max()) {
        const auto behind = static_cast<std::uint64_t>((now - next) / e.period) + 1;
        next = saturating_add(next, e.period * static_cast<timer_core::clock::duration::rep>(behind));
        advance += behind;
        skipped += behind;
      }
      e.due = next;
      e.index += advance;
      e.seq = core->next_seq++;
      // No allocation: add() kept room for every periodic run in flight
      // (timer_core::reserve_room()).
      core->push(e.shared_from_this());
      notify = e.heap_index == 0;
      if (skipped != 0) core->counters.skipped_periods.fetch_add(skipped, std::memory_order_relaxed);  // statistics
    }
  }
  if (notify) core->wake.notify_one();  // the timer thread may sleep until a later due time
  if (cancel_it && e.try_cancel()) count_cancelled(*core);
}

}  // namespace

// The job handed to the target for one run. Holds the timer alive; fits a
// job_function's inline storage, so a run allocates nothing.
class timer_run {
 public:
  timer_run(std::shared_ptr<timer_entry> e, timer_tick tick) noexcept : entry_(std::move(e)), tick_(tick) {}
  timer_run(timer_run&& o) noexcept
      : entry_(std::move(o.entry_)), tick_(o.tick_), armed_(std::exchange(o.armed_, false)) {}
  timer_run& operator=(timer_run&&) = delete;
  timer_run(const timer_run&) = delete;
  timer_run& operator=(const timer_run&) = delete;
  ~timer_run() {
    if (armed_) discard();  // dropped without running or cancel(): a discard
  }

  // Runs the timer's function, or reports `cancelled` when the timer was
  // cancelled after this run was handed over.
  job_outcome run_and_report() {
    armed_ = false;
    timer_entry& e = *entry_;
    std::uint32_t s = timer_entry::pending;
    // acq_rel: take the function from the scheduler / previous run
    // (acquire) and announce that it is in use (release, for try_cancel()).
    if (!e.status.compare_exchange_strong(s, timer_entry::running, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
      // Cancelled before it started: the canceller destroyed the function.
      if (e.periodic()) {
        settle_periodic(e, /*rearm=*/false, /*unrun=*/true);
      } else {
        settle_one_shot(e);
      }
      return job_outcome::cancelled;
    }
    if (!e.periodic()) {
      settle_one_shot(e, &timer_counters::fired);  // started: no stop() can cancel this run now
    } else if (std::shared_ptr<timer_core> core = e.core.lock()) {
      core->counters.fired.fetch_add(1, std::memory_order_relaxed);  // statistics only
    }
    struct after_run {
      timer_run* self;
      ~after_run() { self->finish(); }
    } guard{this};  // also when the function throws (the target reports that)
    e.invoke(tick_);
    return job_outcome::succeeded;
  }

  // The target discards the job unrun (thread_pool's stop(cancel_pending),
  // or a refusal).
  void cancel() noexcept {
    if (armed_) {
      armed_ = false;
      discard();
    }
  }

 private:
  void finish() noexcept {
    timer_entry& e = *entry_;
    if (!e.periodic()) {
      e.destroy_callable();
      e.status.store(timer_entry::done, std::memory_order_release);  // pairs with try_cancel()'s acquire
      return;
    }
    std::uint32_t s = timer_entry::running;
    // release: hands the function back for the next run or a cancel.
    const bool still_active =
        e.status.compare_exchange_strong(s, timer_entry::pending, std::memory_order_acq_rel, std::memory_order_acquire);
    if (!still_active) e.destroy_callable();  // cancelled while running: the function is ours to destroy
    settle_periodic(e, /*rearm=*/still_active, /*unrun=*/false);
  }

  void discard() noexcept {
    timer_entry& e = *entry_;
    if (!e.periodic()) {
      settle_one_shot(e, e.try_cancel() ? &timer_counters::cancelled : nullptr);
      return;
    }
    settle_periodic(e, /*rearm=*/true, /*unrun=*/true);
  }

  std::shared_ptr<timer_entry> entry_;
  timer_tick tick_;
  bool armed_ = true;
};

static_assert(job_function::stored_inline<timer_run>, "a timer run should not allocate");

namespace {

// Hands one run to the target. Called without the mutex.
void dispatch(timer_core& core, const std::shared_ptr<timer_entry>& e, timer_tick tick) noexcept {
  job_function fn(timer_run{e, tick});
  result<void> r;
  try {
    r = core.target(std::move(fn), e->route);
  } catch (...) {
    r = make_error(error_code::resource_exhausted, "target threw");
  }
  if (r) return;                                                  // `fired` is counted by the run when it starts
  core.counters.refused.fetch_add(1, std::memory_order_relaxed);  // statistics only
  // A refused job is left with us: its discard path cancels a one-shot
  // timer (counted there) and re-arms a periodic one (the period skipped).
  fn.cancel();  // NOLINT(bugprone-use-after-move): a refused job is left untouched (timer_dispatch)
  fn.reset();
  if (!e->periodic() || r.error().code() == error_code::queue_full) return;
  // Any other refusal (pool_stopped): the periodic timer ends.
  if (e->try_cancel()) {
    count_cancelled(core);
    std::lock_guard lock(core.mutex);
    core.remove(*e);
  }
}

// The due timer at the top of the heap: pop it and dispatch it. It goes on
// the in-flight list - a periodic one until its run ends, a one-shot one
// until its run starts - so that stop() can cancel a run the target has not
// started. Enters and leaves with `lock` held; releases it to dispatch.
void fire_top(timer_core& core, std::unique_lock<std::mutex>& lock) {
  std::shared_ptr<timer_entry> e = core.pop_top();
  if (e->status.load(std::memory_order_acquire) == timer_entry::cancelled) return;  // pairs with try_cancel()
  const timer_tick tick{e->due, e->index};
  core.flight_insert(*e);
  lock.unlock();
  dispatch(core, e, tick);
  lock.lock();
}

// Cancels the runs on one in-flight list that have not started (a run that
// started finishes; a periodic one is not re-armed). Enters and leaves with
// `lock` held; releases it around each cancellation.
void cancel_in_flight(timer_core& core, std::unique_lock<std::mutex>& lock, timer_entry*& head) {
  while (head != nullptr) {
    // The run holds the entry alive; this reference keeps it alive while
    // the lock is released (no allocation: an existing control block).
    std::shared_ptr<timer_entry> e = head->shared_from_this();
    core.flight_remove(*e);
    lock.unlock();
    if (e->try_cancel()) count_cancelled(core);
    e.reset();
    lock.lock();
  }
}

// Cancels every timer in the heap and in flight - under stop_mode::drain
// every periodic one in flight, and no one-shot run already handed to the
// target (it was due: drain runs it). Enters and leaves with `lock` held;
// releases it around each cancellation (which destroys a user's function).
void cancel_all(timer_core& core, std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<timer_entry>> rest;
  rest.swap(core.heap);
  for (auto& e : rest) e->heap_index = timer_entry::not_in_heap;
  lock.unlock();
  for (auto& e : rest) {
    if (e->try_cancel()) count_cancelled(core);
  }
  rest.clear();  // the functions of cancelled timers were destroyed by try_cancel()
  lock.lock();
  cancel_in_flight(core, lock, core.periodic_in_flight);
  if (core.mode == stop_mode::cancel_pending) cancel_in_flight(core, lock, core.one_shots_in_flight);
}

void timer_main(const std::shared_ptr<timer_core>& core_ptr) {
  timer_core& core = *core_ptr;
  tl_timer_core = &core;
  (void)detail::set_current_thread_name(core.name);  // a name is a convenience: failure changes nothing
#if defined(__linux__)
  // Linux lets a timed sleep overrun by the thread's timer slack (50 us by
  // default) to batch wake-ups; a timer thread wants its deadlines kept.
  (void)::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  std::unique_lock lock(core.mutex);
  while (!core.stopping) {
    if (core.heap.empty()) {
      core.wake.wait(lock);
      core.counters.wakeups.fetch_add(1, std::memory_order_relaxed);  // statistics only
      continue;
    }
    // A copy: the entry may be cancelled and freed while we sleep.
    const timer_core::clock::time_point next_due = core.heap.front()->due;
    if (next_due > timer_core::clock::now()) {
      core.wake.wait_until(lock, next_due);
      core.counters.wakeups.fetch_add(1, std::memory_order_relaxed);  // statistics only
      continue;
    }
    fire_top(core, lock);
  }
  // Stopping: drain dispatches the one-shot timers that were due when
  // stop() was called; everything else is cancelled.
  if (core.mode == stop_mode::drain) {
    while (!core.heap.empty() && core.heap.front()->due <= core.stop_time) {
      std::shared_ptr<timer_entry> e = core.pop_top();
      if (e->periodic() || e->status.load(std::memory_order_acquire) == timer_entry::cancelled) {  // pairs with
        lock.unlock();                                                                             // try_cancel()
        if (e->try_cancel()) count_cancelled(core);
        e.reset();
        lock.lock();
        continue;
      }
      const timer_tick tick{e->due, e->index};
      lock.unlock();
      dispatch(core, e, tick);
      e.reset();
      lock.lock();
    }
  }
  cancel_all(core, lock);
  job_function after = std::move(core.after_stop);
  lock.unlock();
  tl_timer_core = nullptr;
  // Abandoned (no stop() joins this thread): `after` frees the target, so
  // it waits, as stop() does, for cancels still running a discard.
  if (after) core.wait_for_handle_cancels(0);
  if (after) after();  // (abandon_on_timer_thread(): may destroy the timer_queue object, not `core`)
}

}  // namespace

}  // namespace detail

// ---- timer_handle --------------------------------------------------------

namespace detail {
namespace {
// The timer_handle::cancel() calls in progress on this thread, innermost
// first (a cancel's discard may cancel another timer): a stop() made inside
// one of them does not wait for them (see timer_core::handle_cancels).
struct handle_cancel_scope {
  const timer_core* core;
  handle_cancel_scope* outer;
};
thread_local handle_cancel_scope* tl_handle_cancels = nullptr;

std::uint32_t own_handle_cancels(const timer_core* core) noexcept {
  std::uint32_t n = 0;
  for (const handle_cancel_scope* s = tl_handle_cancels; s != nullptr; s = s->outer) n += s->core == core ? 1 : 0;
  return n;
}
}  // namespace
}  // namespace detail

bool timer_handle::cancel() noexcept {
  if (entry_ == nullptr) return false;
  const std::shared_ptr<detail::timer_core> core = entry_->core.lock();
  if (!core) return entry_->try_cancel();  // the queue is gone: it cancelled every timer it had
  // relaxed: for a timer in the heap when stop() begins, the release CAS in
  // try_cancel() below publishes it to the timer thread's cancel_all(),
  // whose try_cancel() of this timer reads the status with acquire, and
  // stop() joins that thread before it reads the count; a cancel that
  // removed the timer from the heap first did so under the queue's mutex,
  // which cancel_all() takes. (A one-shot run already handed to the target
  // is not covered: see timer_queue.hpp.) The decrement is the release.
  core->handle_cancels.fetch_add(1, std::memory_order_relaxed);
  detail::handle_cancel_scope scope{core.get(), detail::tl_handle_cancels};
  detail::tl_handle_cancels = &scope;
  const bool cancelled = entry_->try_cancel();  // destroys the function: its discard runs here
  if (cancelled) {
    detail::count_cancelled(*core);
    std::lock_guard lock(core->mutex);
    core->remove(*entry_);  // no notify: a stale wake-up finds the next timer
  }
  detail::tl_handle_cancels = scope.outer;
  // release: what the discard did happens-before a stop() that reads the
  // count (wait_for_handle_cancels()).
  if (core->handle_cancels.fetch_sub(1, std::memory_order_release) == 1) core->handle_cancels.notify_all();
  return cancelled;
}

bool timer_handle::is_active() const noexcept {
  if (entry_ == nullptr) return false;
  const std::uint32_t s = entry_->status.load(std::memory_order_acquire);  // pairs with the runs' CASes
  return s == detail::timer_entry::pending || (s == detail::timer_entry::running && entry_->periodic());
}

// ---- timer_queue ---------------------------------------------------------

timer_queue::timer_queue(timer_dispatch target, timer_queue_options options) try
    : timer_queue(target ? timer_routed_dispatch(
                               [t = std::move(target)](job_function&& f, timer_route) { return t(std::move(f)); })
                         : timer_routed_dispatch{},
                  std::move(options)) {
} catch (const std::bad_alloc&) {  // out of memory: the library's code, not a raw bad_alloc
  throw error_exception(detail::out_of_memory_error().value);
}

timer_queue::timer_queue(timer_routed_dispatch target, timer_queue_options options) try
    : core_(std::make_shared<detail::timer_core>()) {
  if (!target) throw error_exception(error{error_code::invalid_argument, "timer_queue: empty dispatch target"});
  core_->target = std::move(target);
  core_->name = std::move(options.name);
  auto t = detail::os_thread::start([core = core_] { detail::timer_main(core); });
  if (!t) throw error_exception(error{t.error().code(), "timer_queue: " + t.error().message()});
  thread_ = std::move(*t);
} catch (const std::bad_alloc&) {  // out of memory: the library's code, not a raw bad_alloc
  throw error_exception(detail::out_of_memory_error().value);
}

timer_queue::~timer_queue() {
  // On its own timer thread (a timer's function held the last owner of the
  // queue and the target ran or destroyed it there): a join would wait for
  // this very thread, and stop() refuses. Its pending timers are cancelled
  // and the thread, detached, ends once it leaves the dispatch.
  if (on_timer_thread()) {
    abandon_on_timer_thread({});
    return;
  }
  (void)stop(stop_mode::drain);
}

result<timer_handle> timer_queue::add(std::shared_ptr<detail::timer_entry> e) {
  e->core = core_;
  bool earliest = false;
  {
    std::lock_guard lock(core_->mutex);
    if (core_->stopping) return make_error(error_code::pool_stopped, "timer_queue: stopped");
    e->seq = core_->next_seq++;
    try {
      core_->reserve_room();
      core_->push(e);
    } catch (const std::bad_alloc&) {
      return make_error(error_code::resource_exhausted, "out of memory");
    }
    earliest = e->heap_index == 0;
    core_->counters.scheduled.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  if (earliest) core_->wake.notify_one();  // the timer thread may sleep until a later due time
  return timer_handle{std::move(e)};
}

bool timer_queue::on_timer_thread() const noexcept { return detail::tl_timer_core == core_.get(); }

timer_statistics timer_queue::stop(stop_mode mode) {
  if (on_timer_thread()) {
    throw error_exception(error{error_code::invalid_argument, "timer_queue::stop() called on the timer thread"});
  }
  {
    std::lock_guard stop_lock(stop_mutex_);
    {
      std::lock_guard lock(core_->mutex);
      if (!core_->stopping) {
        core_->stopping = true;
        core_->mode = mode;
        core_->stop_time = clock::now();
        core_->running.store(false, std::memory_order_relaxed);  // a status flag only
      }
    }
    core_->wake.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // A timer_handle::cancel() on another thread that won its timer before
  // the thread's cancel_all() may still be running the timer's discard (a
  // push into the target): the caller (a pool) must outlive it. Outside
  // stop_mutex_: that discard may itself call stop() (a timer function's
  // destructor stopping its pool), which then finds the thread joined.
  core_->wait_for_handle_cancels(detail::own_handle_cancels(core_.get()));
  return statistics();
}

void timer_queue::abandon_on_timer_thread(job_function&& after) noexcept {
  {
    std::unique_lock lock(core_->mutex);
    if (!core_->stopping) {
      core_->stopping = true;
      core_->mode = stop_mode::cancel_pending;
      core_->stop_time = clock::now();
      core_->running.store(false, std::memory_order_relaxed);  // a status flag only
    }
    // Every pending timer is cancelled now, on this thread, while the
    // caller (a pool's destructor) still exists: a cancelled timer's
    // discard may report through it.
    detail::cancel_all(*core_, lock);
    core_->after_stop = std::move(after);
  }
  // The thread ends on its own; no stop() (this one's destructor's among
  // them) can join it from here on.
  if (thread_.joinable()) thread_.detach();
}

timer_statistics timer_queue::statistics() const {
  timer_statistics s;
  const detail::timer_counters& c = core_->counters;
  // relaxed: statistics only.
  s.scheduled = c.scheduled.load(std::memory_order_relaxed);
  s.fired = c.fired.load(std::memory_order_relaxed);
  s.cancelled = c.cancelled.load(std::memory_order_relaxed);
  s.skipped_periods = c.skipped_periods.load(std::memory_order_relaxed);
  s.refused = c.refused.load(std::memory_order_relaxed);
  s.wakeups = c.wakeups.load(std::memory_order_relaxed);
  std::lock_guard lock(core_->mutex);
  s.pending = core_->heap.size();
  return s;
}

bool timer_queue::is_running() const noexcept {
  return core_->running.load(std::memory_order_relaxed);  // a status flag only
}

}  // namespace thread_system
