// The timer thread of timer_queue (see scheduler/timer_queue.hpp for the
// contract). The heap is the textbook array binary heap with each entry's
// index kept in the entry, so cancel() removes a timer in O(log n) instead
// of leaving it to wake the thread at its due time.
#include "thread_system/scheduler/timer_queue.hpp"

#include <condition_variable>
#include <exception>
#include <system_error>
#include <vector>

#include "thread_system/detail/thread_naming.hpp"

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace thread_system {

namespace detail {

struct timer_core {
  using clock = std::chrono::steady_clock;

  std::mutex mutex;
  std::condition_variable wake;                    // new earliest timer, or stop
  std::vector<std::shared_ptr<timer_entry>> heap;  // guarded by mutex
  std::uint64_t next_seq = 0;                      // guarded by mutex
  bool stopping = false;                           // guarded by mutex
  stop_mode mode = stop_mode::drain;               // guarded by mutex
  clock::time_point stop_time{};                   // guarded by mutex
  std::atomic<bool> running{true};                 // mirror of !stopping for is_running()
  std::thread::id timer_thread;                    // written before the thread starts its loop
  std::shared_ptr<timer_counters> counters = std::make_shared<timer_counters>();
  timer_dispatch target;
  std::string name;

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

  void push(std::shared_ptr<timer_entry> e) {
    heap.push_back(nullptr);  // may throw; nothing changed yet
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
};

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

  void operator()() {
    armed_ = false;
    timer_entry& e = *entry_;
    std::uint32_t s = timer_entry::pending;
    // acq_rel: take the function from the scheduler / previous run
    // (acquire) and announce that it is in use (release, for try_cancel()).
    if (!e.status.compare_exchange_strong(s, timer_entry::running, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
      end_in_flight();  // cancelled before it started: the canceller destroyed the function
      return;
    }
    struct after_run {
      timer_run* self;
      ~after_run() { self->finish(); }
    } guard{this};  // also when the function throws (the target reports that)
    e.invoke(tick_);
  }

  // The target discards the job unrun (thread_pool's stop(cancel_pending)).
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
    } else {
      std::uint32_t s = timer_entry::running;
      // release: hands the function back for the next run or a cancel.
      if (!e.status.compare_exchange_strong(s, timer_entry::pending, std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
        e.destroy_callable();  // cancelled while running: the function is ours to destroy
      }
    }
    end_in_flight();
  }

  void discard() noexcept {
    timer_entry& e = *entry_;
    if (!e.periodic() && e.try_cancel()) {
      e.counters->cancelled.fetch_add(1, std::memory_order_relaxed);  // statistics only
    }
    end_in_flight();
  }

  void end_in_flight() noexcept {
    // release: the run's effects happen-before the timer thread's acquire
    // load that lets the next run of this timer be dispatched.
    entry_->in_flight.store(false, std::memory_order_release);
  }

  std::shared_ptr<timer_entry> entry_;
  timer_tick tick_;
  bool armed_ = true;
};

static_assert(job_function::stored_inline<timer_run>, "a timer run should not allocate");

namespace {

timer_core::clock::time_point saturating_add(timer_core::clock::time_point t, timer_core::clock::duration d) noexcept {
  return d >= timer_core::clock::time_point::max() - t ? timer_core::clock::time_point::max() : t + d;
}

// Hands one run to the target. Called without the mutex.
void dispatch(timer_core& core, const std::shared_ptr<timer_entry>& e, timer_tick tick) {
  job_function fn(timer_run{e, tick});
  result<void> r;
  try {
    r = core.target(std::move(fn));
  } catch (...) {
    r = make_error(error_code::resource_exhausted, "timer_queue: the dispatch target threw");
  }
  if (r) {
    core.counters->fired.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return;
  }
  core.counters->refused.fetch_add(1, std::memory_order_relaxed);  // statistics only
  // A refused job is left with us: its discard path cancels a one-shot
  // timer (counted there) and clears in_flight of a periodic one.
  fn.cancel();
  fn.reset();
  if (!e->periodic()) return;
  if (r.error().code() == error_code::queue_full) {
    core.counters->skipped_periods.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return;
  }
  if (e->try_cancel()) {
    core.counters->cancelled.fetch_add(1, std::memory_order_relaxed);  // statistics only
    std::lock_guard lock(core.mutex);
    core.remove(*e);
  }
}

// The due timer at the top of the heap: pop it (re-arm a periodic one) and
// dispatch. Enters and leaves with `lock` held; releases it to dispatch.
void fire_top(timer_core& core, std::unique_lock<std::mutex>& lock, timer_core::clock::time_point now) {
  std::shared_ptr<timer_entry> e = core.pop_top();
  if (e->status.load(std::memory_order_acquire) == timer_entry::cancelled) return;  // pairs with try_cancel()
  const timer_tick tick{e->due, e->index};
  if (!e->periodic()) {
    lock.unlock();
    dispatch(core, e, tick);
    lock.lock();
    return;
  }
  // acquire: pairs with end_in_flight(); the previous run has ended.
  const bool free = !e->in_flight.load(std::memory_order_acquire);
  std::uint64_t skipped = free ? 0 : 1;
  // Next grid point; grid points already past are skipped, not run late in a burst.
  e->due = saturating_add(e->due, e->period);
  e->index += 1;
  if (e->due <= now) {
    const auto behind = static_cast<std::uint64_t>((now - e->due) / e->period) + 1;
    e->due = saturating_add(e->due, e->period * static_cast<timer_core::clock::duration::rep>(behind));
    e->index += behind;
    skipped += behind;
  }
  if (skipped != 0) core.counters->skipped_periods.fetch_add(skipped, std::memory_order_relaxed);  // statistics
  e->seq = core.next_seq++;
  core.push(e);  // re-armed before the run is dispatched, so cancel() finds it
  if (!free) return;
  // relaxed: the target's hand-off orders it before the run's clearing store.
  e->in_flight.store(true, std::memory_order_relaxed);
  lock.unlock();
  dispatch(core, e, tick);
  lock.lock();
}

void cancel_all(timer_core& core, std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<timer_entry>> rest;
  rest.swap(core.heap);
  for (auto& e : rest) e->heap_index = timer_entry::not_in_heap;
  lock.unlock();
  for (auto& e : rest) {
    if (e->try_cancel()) core.counters->cancelled.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  rest.clear();  // the functions of cancelled timers were destroyed by try_cancel()
  lock.lock();
}

void timer_main(const std::shared_ptr<timer_core>& core_ptr) {
  timer_core& core = *core_ptr;
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
      continue;
    }
    const auto now = timer_core::clock::now();
    // A copy: the entry may be cancelled and freed while we sleep.
    const timer_core::clock::time_point next_due = core.heap.front()->due;
    if (next_due > now) {
      core.wake.wait_until(lock, next_due);
      continue;
    }
    fire_top(core, lock, now);
  }
  // Stopping: drain dispatches the one-shot timers that were due when
  // stop() was called; everything else is cancelled.
  if (core.mode == stop_mode::drain) {
    std::vector<std::shared_ptr<timer_entry>> keep;
    while (!core.heap.empty() && core.heap.front()->due <= core.stop_time) {
      std::shared_ptr<timer_entry> e = core.pop_top();
      if (e->periodic()) {
        keep.push_back(std::move(e));
        continue;
      }
      if (e->status.load(std::memory_order_acquire) == timer_entry::cancelled) continue;  // pairs with try_cancel()
      const timer_tick tick{e->due, e->index};
      lock.unlock();
      dispatch(core, e, tick);
      lock.lock();
    }
    for (auto& e : keep) core.push(std::move(e));
  }
  cancel_all(core, lock);
}

}  // namespace

}  // namespace detail

// ---- timer_handle --------------------------------------------------------

bool timer_handle::cancel() noexcept {
  if (entry_ == nullptr || !entry_->try_cancel()) return false;
  entry_->counters->cancelled.fetch_add(1, std::memory_order_relaxed);  // statistics only
  if (auto core = core_.lock()) {
    std::lock_guard lock(core->mutex);
    core->remove(*entry_);  // no notify: a stale wake-up finds the next timer
  }
  return true;
}

bool timer_handle::is_active() const noexcept {
  if (entry_ == nullptr) return false;
  const std::uint32_t s = entry_->status.load(std::memory_order_acquire);  // pairs with the runs' CASes
  return s == detail::timer_entry::pending || (s == detail::timer_entry::running && entry_->periodic());
}

// ---- timer_queue ---------------------------------------------------------

timer_queue::timer_queue(timer_dispatch target, timer_queue_options options)
    : core_(std::make_shared<detail::timer_core>()) {
  if (!target) throw error_exception(error{error_code::invalid_argument, "timer_queue: empty dispatch target"});
  core_->target = std::move(target);
  core_->name = std::move(options.name);
  try {
    thread_ = std::thread([core = core_] { detail::timer_main(core); });
  } catch (const std::system_error& e) {
    throw error_exception(error{error_code::resource_exhausted, std::string("timer_queue: ") + e.what()});
  }
  core_->timer_thread = thread_.get_id();  // read only by stop(), which the join below orders
}

timer_queue::~timer_queue() { (void)stop(stop_mode::drain); }

result<timer_handle> timer_queue::add(std::shared_ptr<detail::timer_entry> e) {
  e->counters = core_->counters;
  bool earliest = false;
  {
    std::lock_guard lock(core_->mutex);
    if (core_->stopping) return make_error(error_code::pool_stopped, "timer_queue: stopped");
    e->seq = core_->next_seq++;
    core_->push(e);
    earliest = e->heap_index == 0;
    core_->counters->scheduled.fetch_add(1, std::memory_order_relaxed);  // statistics only
  }
  if (earliest) core_->wake.notify_one();  // the timer thread may sleep until a later due time
  return timer_handle{std::move(e), core_};
}

timer_statistics timer_queue::stop(stop_mode mode) {
  if (std::this_thread::get_id() == core_->timer_thread) {
    throw error_exception(error{error_code::invalid_argument, "timer_queue::stop() called on the timer thread"});
  }
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
  return statistics();
}

timer_statistics timer_queue::statistics() const {
  timer_statistics s;
  const detail::timer_counters& c = *core_->counters;
  // relaxed: statistics only.
  s.scheduled = c.scheduled.load(std::memory_order_relaxed);
  s.fired = c.fired.load(std::memory_order_relaxed);
  s.cancelled = c.cancelled.load(std::memory_order_relaxed);
  s.skipped_periods = c.skipped_periods.load(std::memory_order_relaxed);
  s.refused = c.refused.load(std::memory_order_relaxed);
  std::lock_guard lock(core_->mutex);
  s.pending = core_->heap.size();
  return s;
}

bool timer_queue::is_running() const noexcept {
  return core_->running.load(std::memory_order_relaxed);  // a status flag only
}

}  // namespace thread_system
