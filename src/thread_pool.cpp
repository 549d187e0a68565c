#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/detail/chaos.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>

#include "thread_system/detail/clock.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/thread_naming.hpp"

namespace thread_system {

namespace {

// The pool and worker running on this thread (nullptrs elsewhere).
struct worker_context {
  thread_pool* pool = nullptr;
  thread_worker* worker = nullptr;
};
thread_local worker_context tl_context;

// Every this many jobs a worker looks at the injector before its own deque,
// so external submissions are never starved by a worker that keeps
// spawning locally (a prime, so it does not resonate with spawn patterns).
constexpr unsigned injector_check_interval = 61;

// Jobs a worker takes from the queue per lock acquisition, at most. The
// queue hands out only a fair share (queued / workers) so a small backlog is
// spread over the workers instead of hoarded by one.
constexpr std::size_t max_batch = 16;

// Polls of the queue before parking (each poll is a pause instruction and a
// load, a few microseconds in all). Only a bounded number of workers spin at
// a time (`max_spinners_`), so on an oversubscribed machine spinning workers
// do not steal the CPU from the threads that produce work.
constexpr int spin_polls = 256;

// After spinning (or instead of it, past the spinner cap), a worker keeps
// polling for this long, yielding its CPU between polls, before it parks.
// Yielding costs nothing to a thread that wants the CPU (a producer on an
// oversubscribed machine runs instead), and it keeps workers awake across
// the short gaps between back-to-back parallel work - a caller that waits
// for one parallel_for and starts the next. Parking there costs a futex
// wake-up per worker per round (tens of microseconds on a VM), and woken
// threads often land on another CPU, away from the data they had cached.
// oneTBB and rayon likewise yield for a while before they sleep. The length
// is detail::idle_yield_ns (100 us), shared with helping waits.
constexpr auto yield_phase_ns = static_cast<std::uint64_t>(detail::idle_yield_ns);

using detail::steady_now_ns;
inline std::uint64_t now_ns() noexcept { return steady_now_ns(); }

// Per submitting thread: jobs left until the next one is stamped for the
// latency histograms (shared by all pools; sampling is statistical anyway).
thread_local std::uint32_t tl_sample_countdown = 1;

}  // namespace

std::size_t thread_pool::default_worker_count() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  if (n == 0) return 1;
  return n < max_workers ? n : max_workers;
}

namespace {
std::uint32_t default_max_spinners() noexcept {
  const std::size_t half = thread_pool::default_worker_count() / 2;
  return static_cast<std::uint32_t>(half == 0 ? 1 : half);
}

void validate(const backpressure& b) {
  if (b.capacity != 0 && b.on_full == backpressure::policy::block_for && b.timeout.count() < 0) {
    throw error_exception(error{error_code::invalid_argument, "backpressure::block_for: negative timeout"});
  }
}

std::exception_ptr make_out_of_memory_report(const std::string& pool_name) {
  return std::make_exception_ptr(error_exception(
      error{error_code::resource_exhausted, "thread_pool '" + pool_name +
                                                "': a worker could not allocate (it runs jobs one at a time "
                                                "until memory is available again)"}));
}

// The threads of one launch wait here until every thread of the batch
// exists; then all run (go) or all return at once (abort), so a batch of
// workers starts all or none.
struct launch_gate {
  static constexpr std::uint32_t waiting = 0;
  static constexpr std::uint32_t go = 1;
  static constexpr std::uint32_t abort = 2;
  std::atomic<std::uint32_t> state{waiting};

  void open(std::uint32_t verdict) noexcept {
    // release: everything the launcher did (publishing the workers) is
    // visible to a thread that sees `go`.
    state.store(verdict, std::memory_order_release);
    detail::futex_wake(state, detail::futex_wake_all);
  }
  [[nodiscard]] bool wait() noexcept {
    std::uint32_t s = state.load(std::memory_order_acquire);  // pairs with open()
    while (s == waiting) {
      detail::futex_wait(state, waiting);
      s = state.load(std::memory_order_acquire);  // pairs with open()
    }
    return s == go;
  }
};
}  // namespace

thread_pool::thread_pool(std::string name) try
    : name_(std::move(name)),
      queue_(detail::make_injector(pool_queue::mutex, 1024)),
      max_spinners_(default_max_spinners()),
      out_of_memory_report_(make_out_of_memory_report(name_)) {
} catch (const std::bad_alloc&) {
  throw error_exception(detail::out_of_memory_error().value);
}

thread_pool::thread_pool(detail::custom_injector_t, std::string name, std::unique_ptr<detail::injector> queue,
                         std::uint32_t latency_sample_every, error_handler on_error, backpressure bounds,
                         std::size_t worker_stack_size) try
    : name_(std::move(name)),
      queue_(std::move(queue)),
      bounds_(bounds),
      local_deques_(false),
      injector_batch_(max_batch),
      latency_sample_every_(latency_sample_every),
      max_spinners_(default_max_spinners()),
      stack_size_(worker_stack_size),
      out_of_memory_report_(make_out_of_memory_report(name_)) {
  validate(bounds_);
  if (on_error) handler_ = std::make_shared<const error_handler>(std::move(on_error));
} catch (const std::bad_alloc&) {
  throw error_exception(detail::out_of_memory_error().value);
}

thread_pool::thread_pool(std::size_t worker_count, pool_options options) try
    : name_(std::move(options.name)),
      queue_(detail::make_injector(options.queue, options.initial_queue_capacity)),
      queue_kind_(options.queue),
      bounds_(options.backpressure),
      latency_sample_every_(options.latency_sample_every),
      max_spinners_(default_max_spinners()),
      stack_size_(options.worker_stack_size),
      out_of_memory_report_(make_out_of_memory_report(name_)) {
  validate(bounds_);
  if (worker_count == 0) {
    throw error_exception(error{error_code::invalid_argument, "thread_pool: worker_count must be at least 1"});
  }
  if (worker_count > max_workers) throw error_exception(too_many_workers(worker_count).value);
  if (options.on_error) handler_ = std::make_shared<const error_handler>(std::move(options.on_error));
  workers_.reserve(worker_count);
  for (std::size_t i = 0; i < worker_count; ++i) workers_.push_back(std::make_unique<thread_worker>());
  // All or none: when start() fails no thread is running, so throwing here
  // leaves nothing behind.
  if (auto r = start(); !r) throw error_exception(r.error());
} catch (const std::bad_alloc&) {
  throw error_exception(detail::out_of_memory_error().value);
}

thread_pool::~thread_pool() {
  if (state_.load(std::memory_order_acquire) != state::stopped) (void)stop(stop_mode::drain);
}

unexpected_error thread_pool::too_many_workers(std::size_t requested) const {
  return make_error(error_code::invalid_argument, "thread_pool '" + name_ + "': " + std::to_string(requested) +
                                                      " workers requested; a pool has at most " +
                                                      std::to_string(max_workers));
}

// ---- workers -----------------------------------------------------------------

result<void> thread_pool::enqueue(std::unique_ptr<thread_worker> worker) {
  if (!worker) return make_error(error_code::invalid_argument, "thread_pool::enqueue: null worker");
  std::vector<std::unique_ptr<thread_worker>> one;
  try {
    one.push_back(std::move(worker));
  } catch (const std::bad_alloc&) {
    return make_error(error_code::resource_exhausted, "out of memory");
  }
  return enqueue_batch(std::move(one));
}

result<void> thread_pool::enqueue_batch(std::vector<std::unique_ptr<thread_worker>> workers) {
  for (const auto& w : workers) {
    if (!w) return make_error(error_code::invalid_argument, "thread_pool::enqueue_batch: null worker in batch");
  }
  std::lock_guard lock(lifecycle_mutex_);
  const state st = state_.load(std::memory_order_relaxed);  // state_ only changes under this mutex
  if (st == state::stopping || st == state::stopped) {
    return make_error(error_code::pool_stopped, "thread_pool '" + name_ + "': cannot add workers after stop()");
  }
  if (workers.size() > max_workers - workers_.size()) return too_many_workers(workers_.size() + workers.size());
  const std::size_t first = workers_.size();
  std::vector<thread_worker*> added;
  try {
    workers_.reserve(first + workers.size());
    added.reserve(workers.size());
  } catch (const std::bad_alloc&) {
    return make_error(error_code::resource_exhausted, "out of memory");
  }
  for (auto& w : workers) {
    w->index_ = workers_.size();
    added.push_back(w.get());
    workers_.push_back(std::move(w));  // capacity reserved: no allocation
  }
  if (st == state::running) {
    if (auto r = launch(added, [] {}); !r) {
      workers_.resize(first);  // never published, never ran: gone again
      return r;
    }
  }
  return {};
}

result<void> thread_pool::start() {
  std::lock_guard lock(lifecycle_mutex_);
  switch (state_.load(std::memory_order_relaxed)) {  // state_ only changes under this mutex
    case state::running:
      return make_error(error_code::already_started, "thread_pool '" + name_ + "' is already running");
    case state::stopping:
    case state::stopped:
      return make_error(error_code::pool_stopped, "thread_pool '" + name_ + "' was stopped; create a new pool");
    case state::created:
      break;
  }
  if (workers_.empty()) {
    return make_error(error_code::invalid_argument, "thread_pool '" + name_ + "': start() with zero workers");
  }
  std::vector<thread_worker*> all;
  try {
    all.reserve(workers_.size());
  } catch (const std::bad_alloc&) {
    return make_error(error_code::resource_exhausted, "out of memory");
  }
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    workers_[i]->index_ = i;
    all.push_back(workers_[i].get());
  }
  // pairs with acquire loads in is_running()/push paths; set before the
  // workers run, so a job they run sees a running pool.
  return launch(all, [this] { state_.store(state::running, std::memory_order_release); });
}

template <typename BeforeGo>
result<void> thread_pool::launch(std::span<thread_worker* const> batch, BeforeGo before_go) {
  // Caller holds lifecycle_mutex_.
  std::size_t new_slots = 0;
  for (thread_worker* w : batch) new_slots += w->published_ ? 0 : 1;
  // relaxed: published_ is only written under lifecycle_mutex_.
  if (new_slots > max_workers - published_.load(std::memory_order_relaxed)) return too_many_workers(batch.size());
  std::shared_ptr<launch_gate> gate;
  try {
    gate = std::make_shared<launch_gate>();
    for (thread_worker* w : batch) prepare_worker(*w);
  } catch (const std::system_error& e) {  // group_for(): too many distinct responsibility sets
    return make_error(error_code::invalid_argument, "thread_pool '" + name_ + "': " + e.what());
  } catch (const std::bad_alloc&) {
    return make_error(error_code::resource_exhausted, "thread_pool '" + name_ + "': out of memory for the workers");
  }
  std::size_t created = 0;
  result<void> refused;
  for (thread_worker* w : batch) {
    if (w->thread_.joinable()) w->thread_.join();  // a worker that left earlier (resize) and comes back
    auto t = detail::os_thread::start(
        [this, w, gate] {
          if (gate->wait()) worker_main(*w);
        },
        stack_size_);
    if (!t) {
      refused = unexpected_error{t.error()};
      break;
    }
    w->thread_ = std::move(*t);
    ++created;
  }
  if (created < batch.size()) {
    gate->open(launch_gate::abort);
    for (std::size_t i = 0; i < created; ++i) batch[i]->thread_.join();
    return make_error_nothrow(error_code::resource_exhausted, [&] {
      return "thread_pool '" + name_ + "': started none of " + std::to_string(batch.size()) +
             " workers (the system refused thread " + std::to_string(created + 1) + "): " + refused.error().message();
    });
  }
  for (thread_worker* w : batch) publish_worker(*w);
  before_go();
  gate->open(launch_gate::go);
  return {};
}

void thread_pool::prepare_worker(thread_worker& w) {
  // Caller holds lifecycle_mutex_.
  if (w.prepared_) return;
  w.node_cache_.attach(&node_pool_);
  w.group_ = &group_for(w.responsibility_mask_);
  if (!local_deques_ && !w.kind_counts_) {
    w.kind_counts_.reset(new std::atomic<std::uint64_t>[std::size_t{2} * 256] {});  // executed, failed per tag
  }
  w.thread_name_ = w.name_.empty() ? name_ + "-" + std::to_string(w.index_) : w.name_;
  w.prepared_ = true;
}

void thread_pool::publish_worker(thread_worker& w) noexcept {
  // Caller holds lifecycle_mutex_.
  // relaxed: membership is published to the thread by the gate's release.
  w.membership_.store(thread_worker::active, std::memory_order_relaxed);
  if (w.published_) return;  // back after leaving: its steal slot is still there
  const std::size_t slot = published_.load(std::memory_order_relaxed);  // only written under lifecycle_mutex_
  w.rng_state_ = static_cast<std::uint32_t>(slot * 2654435761U + 1U);
  steal_table_[slot].store(&w, std::memory_order_relaxed);  // published by the release below
  published_.store(slot + 1, std::memory_order_release);    // pairs with the acquire in try_steal()/work_visible()
  worker_count_.fetch_add(1, std::memory_order_relaxed);    // fair-share hint only
  w.published_ = true;
}

detail::wake_group& thread_pool::group_for(std::uint64_t mask) {
  // Caller holds lifecycle_mutex_.
  const std::size_t n = group_count_.load(std::memory_order_relaxed);  // only written under lifecycle_mutex_
  for (std::size_t i = 0; i < n; ++i) {
    detail::wake_group* g = groups_[i].load(std::memory_order_relaxed);  // fixed once published
    if (g->mask == mask) return *g;
  }
  if (n == max_groups) {
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "more than " + std::to_string(max_groups) + " distinct responsibility sets");
  }
  owned_groups_.reserve(owned_groups_.size() + 1);  // may throw: nothing changed yet
  owned_groups_.push_back(std::make_unique<detail::wake_group>(mask, max_spinners_));
  groups_[n].store(owned_groups_.back().get(), std::memory_order_relaxed);  // published by the release below
  group_count_.store(n + 1, std::memory_order_release);  // pairs with the acquire in wake_worker_if_needed()
  return *owned_groups_.back();
}

std::vector<thread_worker*> thread_pool::get_workers() const {
  std::lock_guard lock(lifecycle_mutex_);
  std::vector<thread_worker*> out;
  out.reserve(workers_.size());
  for (const auto& w : workers_) out.push_back(w.get());
  return out;
}

std::size_t thread_pool::worker_count() const {
  std::lock_guard lock(lifecycle_mutex_);
  return active_workers_locked();
}

result<int> thread_pool::worker_os_tid(std::size_t worker) const {
  thread_worker* w = nullptr;
  {
    std::lock_guard lock(lifecycle_mutex_);
    if (worker >= workers_.size()) {
      return make_error(error_code::invalid_argument,
                        "thread_pool '" + name_ + "': no worker " + std::to_string(worker));
    }
    w = workers_[worker].get();
    // relaxed: membership only read for this check.
    if (!w->thread_.joinable() || w->membership_.load(std::memory_order_relaxed) == thread_worker::exited) {
      return make_error(error_code::invalid_argument,
                        "thread_pool '" + name_ + "': worker " + std::to_string(worker) + " is not running");
    }
  }
  // The thread may be starting: its id appears in a moment.
  for (;;) {
    const int tid = w->os_tid_.load(std::memory_order_acquire);  // pairs with the store in worker_main()
    if (tid != 0) return tid;
    std::this_thread::yield();
  }
}

result<void> thread_pool::set_affinity(std::size_t worker, std::span<const int> cpus) {
  auto tid = worker_os_tid(worker);
  if (!tid) return unexpected_error(tid.error());
  return detail::set_thread_affinity(*tid, cpus);
}

result<void> thread_pool::set_nice(std::size_t worker, int nice) {
  auto tid = worker_os_tid(worker);
  if (!tid) return unexpected_error(tid.error());
  return detail::set_thread_nice(*tid, nice);
}

result<timer_queue*> thread_pool::timers() {
  std::lock_guard lock(timers_mutex_);
  if (timers_closed_) return stopped_error();
  if (!timers_) {
    timer_queue_options o;
    o.name = name_.substr(0, 9) + "-timer";
    try {
      timers_ = std::make_unique<timer_queue>([this](job_function&& f) { return push_one(std::move(f)); }, o);
    } catch (const error_exception& e) {
      return unexpected_error{e.get_error()};
    } catch (const std::bad_alloc&) {
      return make_error(error_code::resource_exhausted, "out of memory");
    }
  }
  return timers_.get();
}

timer_statistics thread_pool::get_timer_statistics() const {
  std::lock_guard lock(timers_mutex_);
  return timers_ ? timers_->statistics() : timer_statistics{};
}

std::size_t thread_pool::active_workers_locked() const noexcept {
  std::size_t n = 0;
  for (const auto& w : workers_) {
    // relaxed: membership only changes under lifecycle_mutex_, except
    // retiring -> exited, which does not change this count.
    if (w->membership_.load(std::memory_order_relaxed) == thread_worker::active) ++n;
  }
  return n;
}

result<void> thread_pool::resize(std::size_t n) {
  if (n == 0)
    return make_error(error_code::invalid_argument, "thread_pool::resize: the worker count must be at least 1");
  if (n > max_workers) return too_many_workers(n);
  std::lock_guard lock(lifecycle_mutex_);
  const state st = state_.load(std::memory_order_relaxed);  // state_ only changes under this mutex
  if (st == state::stopping || st == state::stopped) {
    return make_error(error_code::pool_stopped, "thread_pool '" + name_ + "': cannot resize after stop()");
  }
  if (st == state::created) {
    try {
      while (workers_.size() < n) workers_.push_back(std::make_unique<thread_worker>());
    } catch (const std::bad_alloc&) {
      return make_error(error_code::resource_exhausted, "out of memory");
    }
    workers_.resize(n);
    return {};
  }
  std::size_t active = active_workers_locked();
  if (active < n) {
    const std::size_t old_size = workers_.size();
    std::vector<thread_worker*> revived;  // were leaving, taken back without a new thread
    std::vector<thread_worker*> batch;    // need a thread: left earlier, or new
    try {
      revived.reserve(n);
      batch.reserve(n);
      // Grow: first take back workers that are leaving, then those that
      // left, then new ones.
      for (auto& w : workers_) {
        if (active + revived.size() >= n) break;
        int m = thread_worker::retiring;
        // acq_rel: pairs with the worker's CAS retiring -> exited; whoever wins decides.
        if (w->membership_.compare_exchange_strong(m, thread_worker::active, std::memory_order_acq_rel)) {
          revived.push_back(w.get());
        }
      }
      for (auto& w : workers_) {
        if (active + revived.size() + batch.size() >= n) break;
        // relaxed: exited is final until this mutex's holder revives it.
        if (w->membership_.load(std::memory_order_relaxed) == thread_worker::exited) batch.push_back(w.get());
      }
      workers_.reserve(old_size + n);
      while (active + revived.size() + batch.size() < n) {
        auto w = std::make_unique<thread_worker>();
        w->index_ = workers_.size();
        batch.push_back(w.get());
        workers_.push_back(std::move(w));
      }
    } catch (const std::bad_alloc&) {
      for (thread_worker* w : revived) {
        // release: pairs with the acquire at the top of the worker loop.
        w->membership_.store(thread_worker::retiring, std::memory_order_release);
      }
      workers_.resize(old_size);
      wake_all_groups();
      return make_error(error_code::resource_exhausted, "out of memory");
    }
    if (auto r = launch(batch, [] {}); !r) {
      // Back to the previous size: the revived workers leave again, the new
      // ones never ran.
      for (thread_worker* w : revived) {
        // release: pairs with the acquire at the top of the worker loop.
        w->membership_.store(thread_worker::retiring, std::memory_order_release);
      }
      workers_.resize(old_size);
      wake_all_groups();
      return make_error_nothrow(r.error().code(), [&] {
        return "thread_pool '" + name_ + "': resize to " + std::to_string(n) + " kept " + std::to_string(active) +
               " workers: " + r.error().message();
      });
    }
    active = n;
  }
  // Shrink: the newest active workers leave.
  for (auto it = workers_.rbegin(); it != workers_.rend() && active > n; ++it) {
    int m = thread_worker::active;
    // release: pairs with the acquire load at the top of the worker loop.
    if ((*it)->membership_.compare_exchange_strong(m, thread_worker::retiring, std::memory_order_release,
                                                   std::memory_order_relaxed)) {
      --active;
    }
  }
  worker_count_.store(active, std::memory_order_relaxed);  // fair-share hint only
  wake_all_groups();                                       // parked leavers notice (work_visible() is true for them)
  return {};
}

// ---- jobs ---------------------------------------------------------------------

result<void> thread_pool::enqueue(std::unique_ptr<job> j) {
  if (!j) return make_error(error_code::invalid_argument, "thread_pool::enqueue: null job");
  if (!j->runnable()) {
    return make_error(error_code::invalid_argument,
                      "thread_pool::enqueue: job '" + j->get_name() + "' has nothing to run (an empty callback)");
  }
  return push_one(job_function(detail::seed_job_adapter{std::move(j)}));  // inline: allocates nothing
}

result<void> thread_pool::enqueue_batch(std::vector<std::unique_ptr<job>> jobs) {
  std::vector<job_function> batch;
  try {
    batch.reserve(jobs.size());
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory_error();
  }
  for (auto& j : jobs) {
    if (!j) return make_error(error_code::invalid_argument, "thread_pool::enqueue_batch: null job in batch");
    if (!j->runnable()) {
      return make_error(error_code::invalid_argument, "thread_pool::enqueue_batch: job '" + j->get_name() +
                                                          "' has nothing to run (an empty callback)");
    }
  }
  for (auto& j : jobs) batch.emplace_back(detail::seed_job_adapter{std::move(j)});
  return push_batch(batch);
}

thread_worker* thread_pool::own_worker() const noexcept {
  return tl_context.pool == this ? tl_context.worker : nullptr;
}

result<void> thread_pool::push_local(thread_worker& w, job_function&& fn) {
  // Only this worker's thread pushes to its deque, so the check below and
  // the push cannot interleave with this worker's own exit decision.
  const state st = state_.load(std::memory_order_acquire);  // pairs with the release in stop()
  if (st == state::stopping || st == state::stopped) {
    return make_error(error_code::pool_stopped, "thread_pool '" + name_ + "' is stopped");
  }
  // A node, and room on the deque for the job the slot may displace. Out of
  // memory, the job goes through the injector instead (which reports its
  // own failure to the caller).
  detail::job_node* node = w.node_cache_.try_allocate();
  if (node == nullptr || !w.deque_.reserve(1)) {
    if (node != nullptr) w.node_cache_.release(node);
    note_allocation_failure(w);
    return push_to_injector(std::move(fn));
  }
  w.degraded_ = false;
  stamp_if_sampled(fn);
  fn.set_tag(static_cast<std::uint8_t>(fn.tag() & ~bounded_tag));  // local jobs hold no room
  node->fn = std::move(fn);
  // release: the accepted count is published before the job can be stolen
  // and finished (see idle_now()).
  thread_worker::add(w.spawned_, 1, std::memory_order_release);
  THREAD_SYSTEM_CHAOS_POINT();
  // The new job goes into the LIFO slot; the one it displaces onto the
  // deque. Only this thread makes the slot non-null (thieves only empty
  // it), so a slot read as empty stays empty until the store below.
  // relaxed load: the owner's own last write, or a thief's emptying.
  if (w.lifo_slot_.load(std::memory_order_relaxed) == nullptr) {
    // release: publishes the job to a thief; pairs with the acquire
    // exchange in try_steal().
    w.lifo_slot_.store(node, std::memory_order_release);
  } else {
    // release: as above. A thief may have emptied the slot since the load;
    // then there is nothing to move to the deque.
    if (detail::job_node* displaced = w.lifo_slot_.exchange(node, std::memory_order_release)) {
      w.deque_.push(displaced);  // room reserved above: no allocation
    }
  }
  wake_worker_if_needed();
  return {};
}

void thread_pool::note_allocation_failure(thread_worker& w) noexcept {
  thread_worker::add(w.alloc_failures_, 1);  // statistics only
  if (w.degraded_) return;                   // reported at the start of this run of failures
  w.degraded_ = true;
  report_failure(out_of_memory_report_);
}

bool thread_pool::take_from_lifo_slot(thread_worker& w, bool helping, detail::job_node*& out) noexcept {
  // relaxed: only this thread fills the slot; a stale non-null only costs
  // the exchange below, which then returns nullptr.
  if (w.lifo_slot_.load(std::memory_order_relaxed) == nullptr) return false;
  // The budget (thread_pool::lifo_slot_budget): a job that keeps spawning
  // a successor cannot starve the jobs spawned before it. Tokio bounds its
  // LIFO slot the same way and with the same value (MAX_LIFO_POLLS_PER_TICK).
  if (w.lifo_streak_ >= lifo_slot_budget && !helping) {
    // Budget spent: the slot's job joins the deque (as its newest) and the
    // oldest job of the deque runs instead - possibly that same job, when
    // the deque was empty. A helping wait skips this: it wants the newest
    // jobs, most likely the one it waits for.
    w.lifo_streak_ = 0;
    if (!w.deque_.reserve(1)) {
      // Out of memory: the deque cannot take the slot's job, so run it now
      // (the budget waits for the next round).
      note_allocation_failure(w);
      out = w.lifo_slot_.exchange(nullptr, std::memory_order_relaxed);  // relaxed: as below
      return out != nullptr;
    }
    // relaxed: the owner's own job (or nullptr if a thief took it first;
    // the exchange is then the thief's only competitor).
    if (detail::job_node* newest = w.lifo_slot_.exchange(nullptr, std::memory_order_relaxed)) {
      w.deque_.push(newest);  // room reserved above: no allocation
    }
    auto oldest = w.deque_.steal();  // the FIFO end (the owner may steal like any thief)
    if (!oldest) return false;       // taken by a thief meanwhile: the normal order goes on
    out = oldest.value;
    return true;
  }
  // relaxed: the job was put there by this thread; the exchange decides
  // between the owner and a thief (one total order on the slot).
  out = w.lifo_slot_.exchange(nullptr, std::memory_order_relaxed);
  if (out == nullptr) return false;
  if (!helping) ++w.lifo_streak_;
  return true;
}

result<void> thread_pool::push_one(job_function&& fn) {
  if (!fn) return make_error(error_code::invalid_argument, "thread_pool '" + name_ + "': empty job");
  return detail::refuse_if_out_of_memory([&] { return push_one_unchecked(std::move(fn)); });
}

result<void> thread_pool::push_one_unchecked(job_function&& fn) {
  if (local_deques_) {
    if (thread_worker* w = own_worker()) return push_local(*w, std::move(fn));
  }
  return push_to_injector(std::move(fn));
}

result<void> thread_pool::push_to_injector(job_function&& fn) {
  stamp_if_sampled(fn);
  // The queue counts the job as accepted inside its critical section, so
  // close() in stop() makes the accepted total exact and no worker can
  // finish a job before it is counted (see idle_now()).
  // A worker is woken only when this push made the queue non-empty (for
  // the mutex injector; the others always wake): see
  // injector::push_and_check(). A pool that ran the job on this thread
  // (backpressure::caller_runs) leaves `wake` true; that costs one look.
  bool wake = true;
  return push_external(
      ~std::uint64_t{0}, std::span<job_function>(&fn, 1), [&] { return queue_->push_and_check(std::move(fn), wake); },
      &wake);
}

result<void> thread_pool::push_batch(std::span<job_function> fns) {
  if (fns.empty()) return {};
  return detail::refuse_if_out_of_memory([&] { return push_batch_unchecked(fns); });
}

result<void> thread_pool::push_batch_unchecked(std::span<job_function> fns) {
  for (auto& fn : fns) stamp_if_sampled(fn);
  // One wake-up; the woken worker wakes the next while work remains
  // (see worker_main), so a burst wakes only as many workers as it keeps busy.
  return push_external(~std::uint64_t{0}, fns, [&] { return queue_->push_batch(fns); });
}

// ---- backpressure -------------------------------------------------------------

bool thread_pool::try_reserve(std::size_t n) noexcept {
  // relaxed: the count orders nothing else; room is a number, not a hand-over.
  std::size_t cur = queued_external_.load(std::memory_order_relaxed);
  do {
    if (cur + n > bounds_.capacity) return false;
  } while (!queued_external_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
  return true;
}

void thread_pool::release_room(std::size_t n) noexcept {
  // seq_cst: Dekker with a blocked producer, whose prepare_wait() fence is
  // followed by its own try_reserve(): either it sees the room, or the
  // notify below sees it waiting.
  queued_external_.fetch_sub(n, std::memory_order_seq_cst);
  const auto p = bounds_.on_full;
  if (p == backpressure::policy::block || p == backpressure::policy::block_for) {
    if (n == 1) {
      room_available_.notify_one();
    } else {
      room_available_.notify_all();
    }
  }
}

bool thread_pool::drop_oldest_queued() {
  std::array<job_function, 1> oldest;
  if (queue_->pop_victim(oldest) == 0) return false;
  const std::uint8_t tag = oldest[0].tag();
  oldest[0].cancel("job dropped by backpressure::drop_oldest to make room");
  oldest[0].reset();
  queue_->note_cancelled(tag);
  if ((tag & bounded_tag) != 0) release_room(1);
  // release: pairs with the acquire in idle_now(); the victim counts as finished.
  dropped_.fetch_add(1, std::memory_order_release);
  return true;
}

job_outcome thread_pool::run_guarded(job_function& fn) noexcept {
  // A job without a token must not see the token of a job it runs inside
  // (a helping wait, caller_runs): token_job sets its own.
  const cancellation_token* outer_token = this_job::detail::current_token;
  this_job::detail::current_token = nullptr;
  job_outcome outcome = job_outcome::succeeded;
  try {
    outcome = fn.run();
  } catch (...) {
    outcome = job_outcome::failed_reported;
    report_failure(std::current_exception());
  }
  fn.reset();  // the job's captures are destroyed before it counts as done
  this_job::detail::current_token = outer_token;
  return outcome;
}

void thread_pool::run_on_caller(job_function& fn) {
  const job_outcome outcome = run_guarded(fn);
  if (outcome == job_outcome::cancelled) {
    caller_cancelled_.fetch_add(1, std::memory_order_relaxed);  // statistics only
    return;
  }
  if (outcome == job_outcome::failed_reported) caller_failed_.fetch_add(1, std::memory_order_relaxed);  // statistics
  caller_ran_.fetch_add(1, std::memory_order_relaxed);  // statistics only
}

result<void> thread_pool::acquire_room(std::span<job_function> fns, bool& ran_inline) {
  const std::size_t n = fns.size();
  if (n > bounds_.capacity) {
    return make_error(error_code::invalid_argument, "thread_pool '" + name_ + "': a batch of " + std::to_string(n) +
                                                        " jobs can never fit the capacity of " +
                                                        std::to_string(bounds_.capacity));
  }
  auto policy = bounds_.on_full;
  // A worker of this pool (typed pools route its submissions through here)
  // must not block on its own pool: it runs the job itself instead.
  if (on_own_worker() && (policy == backpressure::policy::block || policy == backpressure::policy::block_for)) {
    policy = backpressure::policy::caller_runs;
  }
  // Saturating: block_for(n, nanoseconds::max()) waits without a deadline.
  const auto deadline = detail::saturating_add(std::chrono::steady_clock::now(), bounds_.timeout);
  auto stopped = [this] {
    const state st = state_.load(std::memory_order_acquire);  // pairs with the release in stop()
    return st == state::stopping || st == state::stopped;
  };
  for (;;) {
    if (try_reserve(n)) return {};
    if (stopped()) return make_error(error_code::pool_stopped, "thread_pool '" + name_ + "' is stopped");
    switch (policy) {
      case backpressure::policy::reject:
        return make_error(error_code::queue_full, "thread_pool '" + name_ + "': queue is full (capacity " +
                                                      std::to_string(bounds_.capacity) + ")");
      case backpressure::policy::caller_runs:
        for (auto& fn : fns) run_on_caller(fn);
        ran_inline = true;
        return {};
      case backpressure::policy::drop_oldest:
        // The oldest may already be on a worker's way to running (taken from
        // the queue, not yet started): then its room frees in a moment.
        if (!drop_oldest_queued()) std::this_thread::yield();
        continue;
      case backpressure::policy::block:
      case backpressure::policy::block_for: {
        const auto key = room_available_.prepare_wait();
        if (try_reserve(n)) {
          room_available_.cancel_wait();
          return {};
        }
        if (stopped()) {
          room_available_.cancel_wait();
          return make_error(error_code::pool_stopped, "thread_pool '" + name_ + "' is stopped");
        }
        if (policy == backpressure::policy::block) {
          room_available_.commit_wait(key);
        } else if (!room_available_.commit_wait_until(key, deadline)) {
          if (try_reserve(n)) return {};
          return make_error(error_code::timeout, "thread_pool '" + name_ + "': no room within the block_for timeout");
        }
        break;
      }
    }
  }
}

void thread_pool::stamp_if_sampled(job_function& fn) const noexcept {
  if (latency_sample_every_ == 0) return;
  // The countdown is per thread, shared by all pools: never wait longer
  // than this pool's own rate.
  if (tl_sample_countdown > latency_sample_every_) tl_sample_countdown = latency_sample_every_;
  if (--tl_sample_countdown != 0) return;
  tl_sample_countdown = latency_sample_every_;
  fn.set_enqueue_stamp(now_ns());
}

unexpected_error thread_pool::refusal(const error& queue_error) const {
  if (queue_error.code() == error_code::pool_stopped) {
    return make_error(error_code::pool_stopped, "thread_pool '" + name_ + "' is stopped");
  }
  return make_error(queue_error.code(), "thread_pool '" + name_ + "': " + queue_error.message());
}

// ---- the worker loop ------------------------------------------------------

void thread_pool::wake_worker_if_needed(std::uint64_t kind_mask) noexcept {
  // Dekker with a spinning worker: the fence orders our push before reading
  // a group's spinning count; the worker decrements it (seq_cst) and then
  // re-checks the queue after prepare_wait()'s fence before it sleeps.
  // Either we see it spinning (and it will find the job), or it sees the job.
  detail::seq_cst_fence();
  THREAD_SYSTEM_CHAOS_POINT();
  const std::size_t n = group_count_.load(std::memory_order_acquire);  // pairs with group_for()
  for (std::size_t i = 0; i < n; ++i) {
    detail::wake_group* g = groups_[i].load(std::memory_order_relaxed);  // fixed once published
    if ((g->mask & kind_mask) == 0) continue;
    if (g->spinning.load(std::memory_order_relaxed) != 0) continue;  // ordered by the fence above
    g->work_available.notify_one_after_fence();
  }
}

void thread_pool::wake_all_groups() noexcept {
  const std::size_t n = group_count_.load(std::memory_order_acquire);  // pairs with group_for()
  for (std::size_t i = 0; i < n; ++i) {
    groups_[i].load(std::memory_order_relaxed)->work_available.notify_all();  // fixed once published
  }
}

// A worker thread's help_source (sync/helping_wait.hpp): a helping wait on
// the worker runs one job of this pool through its worker.
class thread_pool::worker_help final : public detail::help_source {
 public:
  worker_help(thread_pool& pool, thread_worker& worker) noexcept : pool_(pool), worker_(worker) {}
  bool help_once() override {
    std::array<job_function, 1> one;
    return pool_.find_and_run(worker_, one, /*helping=*/true);
  }

 private:
  thread_pool& pool_;
  thread_worker& worker_;
};

void thread_pool::worker_main(thread_worker& w) {
  tl_context = worker_context{this, &w};
  worker_help help(*this, w);
  detail::help_source* const outer_help = detail::set_help_source(&help);
  // release: pairs with the acquire load in worker_os_tid().
  w.os_tid_.store(detail::current_os_thread_id(), std::memory_order_release);
  (void)detail::set_current_thread_name(w.thread_name_);  // a convenience: failure changes nothing
  std::array<job_function, max_batch> local;
  std::uint64_t busy_since = 0;
  // A busy stretch runs from waking up until no work is found; its start is
  // published so statistics include a stretch in progress.
  auto start_stretch = [&w, &busy_since] {
    busy_since = now_ns();
    w.busy_since_ns_.store(busy_since, std::memory_order_relaxed);  // statistics only
  };
  start_stretch();

  for (;;) {
    // acquire: pairs with the release CAS in resize().
    if (w.membership_.load(std::memory_order_acquire) == thread_worker::retiring) {
      // Leaving: run what is on this worker's own deque (only this thread
      // pushes there), then go - unless resize() took the worker back first.
      detail::job_node* node = nullptr;
      while (take_from_lifo_slot(w, /*helping=*/true, node) || w.deque_.pop(node)) run_node(w, node);
      int m = thread_worker::retiring;
      // acq_rel: pairs with the CAS retiring -> active in resize().
      if (w.membership_.compare_exchange_strong(m, thread_worker::exited, std::memory_order_acq_rel)) {
        thread_worker::add(w.busy_ns_, now_ns() - busy_since);  // statistics only
        w.busy_since_ns_.store(0, std::memory_order_relaxed);   // statistics only
        became_idle_.notify_all();                              // its last jobs may have made the pool idle
        // A producer may have skipped its wake-up because this worker was
        // spinning when it was told to leave: pass the wake-up on.
        wake_worker_if_needed();
        break;
      }
      continue;
    }
    if (find_and_run(w, local, /*helping=*/false)) continue;

    thread_worker::add(w.busy_ns_, now_ns() - busy_since);
    w.busy_since_ns_.store(0, std::memory_order_relaxed);  // statistics only
    if (queue_->is_closed()) {
      // Closed was observed (acquire): every injector push that succeeded
      // did so before the close, and nothing is pushed to this worker's deque
      // after stop() (push_local refuses), so one more look decides.
      if (find_and_run(w, local, false)) {
        start_stretch();
        continue;
      }
      break;
    }
    // Out of work: the pool may have become idle.
    became_idle_.notify_all();

    detail::wake_group& group = *w.group_;
    bool work_seen = false;
    // relaxed: a soft cap; races may exceed it by a few.
    if (group.spinning.load(std::memory_order_relaxed) < group.max_spinners) {
      // seq_cst: producers that read spinning != 0 skip their wake-up, so
      // this increment must be ordered against their fence (see
      // wake_worker_if_needed()).
      group.spinning.fetch_add(1, std::memory_order_seq_cst);
      for (int i = 0; i < spin_polls && !work_seen; ++i) {
        detail::cpu_relax();
        work_seen = work_visible(w);
      }
      // seq_cst: from here producers wake a sleeper again; the re-check
      // after prepare_wait() below catches a push that raced with this.
      group.spinning.fetch_sub(1, std::memory_order_seq_cst);
    }
    // The yield phase (see yield_phase_ns). It is not counted in `spinning`:
    // producers keep notifying, which costs them one relaxed load while no
    // worker is parked, and nothing in the wake-up protocol changes.
    if (!work_seen) {
      const std::uint64_t until = now_ns() + yield_phase_ns;
      do {
        std::this_thread::yield();
        work_seen = work_visible(w);
      } while (!work_seen && now_ns() < until);
    }
    if (work_seen) {
      start_stretch();
      continue;
    }

    THREAD_SYSTEM_CHAOS_POINT();
    const auto key = group.work_available.prepare_wait();
    THREAD_SYSTEM_CHAOS_POINT();
    if (work_visible(w)) {
      group.work_available.cancel_wait();
      start_stretch();
      continue;
    }
    thread_worker::add(w.parks_, 1);
    const std::uint64_t parked_at = now_ns();
    group.work_available.commit_wait(key);
    start_stretch();
    thread_worker::add(w.idle_ns_, busy_since - parked_at);
    thread_worker::add(w.wakeups_, 1);
  }
  tl_context = worker_context{};
  (void)detail::set_help_source(outer_help);
}

bool thread_pool::work_visible(const thread_worker& w) const noexcept {
  if (queue_->is_closed()) return true;
  // A worker asked to leave must wake up to do so (seq_cst: ordered like the
  // queue checks, against resize()'s wake-up).
  if (w.membership_.load(std::memory_order_seq_cst) == thread_worker::retiring) return true;
  if (paused_.load(std::memory_order_seq_cst)) return false;  // Dekker with resume(); see there
  if (queue_->has_work_for(w.responsibility_mask_)) return true;
  if (!local_deques_) return false;
  const std::size_t n = published_.load(std::memory_order_acquire);  // pairs with start_worker()
  for (std::size_t i = 0; i < n; ++i) {
    const thread_worker* other = steal_table_[i].load(std::memory_order_relaxed);  // fixed once published
    if (!other->deque_.empty_approx()) return true;
    // relaxed: ordered like the deque checks (prepare_wait()'s fence here,
    // the fence in wake_worker_if_needed() after push_local()'s store).
    if (other->lifo_slot_.load(std::memory_order_relaxed) != nullptr) return true;
  }
  return false;
}

bool thread_pool::find_and_run(thread_worker& w, std::span<job_function> local, bool helping) {
  // Helping waits take one job at a time so the awaited result is not
  // delayed behind a batch.
  // A paused pool starts nothing (acquire: pairs with the store in pause()) -
  // until it is closed: stop() runs or cancels everything even if a job
  // calls pause() while the pool drains.
  if (paused_.load(std::memory_order_acquire) && !queue_->is_closed()) return false;
  const std::size_t batch_limit = helping ? 1 : std::min(local.size(), injector_batch_);
  auto run_from_injector = [&](std::size_t limit) -> bool {
    // All but the first job of a batch go onto the deque, in nodes: take
    // only as many as there is room for without allocating. Out of memory
    // that is one job, which needs neither.
    if (limit > 1) {
      const bool nodes = w.node_cache_.reserve(limit - 1);
      const bool slots = w.deque_.reserve(limit - 1);
      if (nodes && slots) {
        w.degraded_ = false;
      } else {
        note_allocation_failure(w);
        limit = 1 + std::min({limit - 1, w.node_cache_.available(), w.deque_.room()});
      }
    }
    const std::size_t share = worker_count_.load(std::memory_order_relaxed);  // a hint
    std::size_t n = 0;
    try {
      n = queue_->pop_for(w.responsibility_mask_, local.first(limit), share);
    } catch (const std::bad_alloc&) {
      // The queue could not take a job without memory (a lock-free queue's
      // hazard record): nothing was taken. Give the CPU away and look again
      // later; other workers and the deque's jobs go on meanwhile.
      note_allocation_failure(w);
      std::this_thread::yield();
      return false;
    }
    if (n == 0) return false;
    // Typed pools: the kind of the batch whose rest goes onto the deque.
    if (n > 1 && !local_deques_) w.batch_rank_ = static_cast<unsigned>((local[0].tag() & 0x7f) - 1);
    // All but the first job go onto this worker's deque (newest-first, so
    // the owner still takes them in FIFO order): there they can be stolen,
    // and a helping wait in the first job can reach them. Held in a private
    // array instead, a job could wait forever on one queued behind it.
    // They were counted by the injector already, so spawned_ stays as is.
    for (std::size_t i = n; i-- > 1;) {
      detail::job_node* moved = w.node_cache_.allocate();  // reserved above: no allocation
      moved->fn = std::move(local[i]);
      w.deque_.push(moved);  // reserved above: no allocation
    }
    // More work than this worker will run now: make sure someone else is coming.
    if (n > 1) {
      wake_worker_if_needed();
    } else if (const std::uint64_t pending = queue_->pending_mask(); pending != 0) {
      wake_worker_if_needed(pending);
    }
    execute(w, local[0]);
    return true;
  };

  // The periodic look takes a single job: a batch would go onto a deque
  // that is not empty, and repeated looks could grow it without bound.
  if (!local_deques_) {
    // Typed pools. The deque holds only the rest of one batch of the
    // worker's highest kind (rank batch_rank_), taken while the deque was
    // empty: run it first unless a job of a higher kind this worker serves
    // has appeared since (a kind created after the batch was taken).
    detail::job_node* node = nullptr;
    if (!w.deque_.empty_approx()) {
      const std::uint64_t higher = w.responsibility_mask_ & ((std::uint64_t{1} << w.batch_rank_) - 1);
      if ((higher == 0 || (queue_->pending_mask() & higher) == 0) && w.deque_.pop(node)) {
        run_node(w, node);
        return true;
      }
      if (run_from_injector(1)) return true;
      if (w.deque_.pop(node)) {
        run_node(w, node);
        return true;
      }
      return false;
    }
    return run_from_injector(batch_limit);
  }
  // A job from anywhere but the LIFO slot restarts the slot's budget.
  if (++w.tick_ % injector_check_interval == 0 && run_from_injector(1)) {
    w.lifo_streak_ = 0;
    return true;
  }
  detail::job_node* node = nullptr;
  if (take_from_lifo_slot(w, helping, node)) {
    run_node(w, node);
    return true;
  }
  w.lifo_streak_ = 0;
  if (w.deque_.pop(node)) {
    run_node(w, node);
    return true;
  }
  if (run_from_injector(batch_limit)) return true;
  if (try_steal(w, node)) {
    run_node(w, node);
    return true;
  }
  return false;
}

bool thread_pool::try_steal(thread_worker& w, detail::job_node*& out) {
  const std::size_t n = published_.load(std::memory_order_acquire);  // pairs with start_worker()
  if (n <= 1) return false;
  // xorshift32: a cheap random start so thieves spread over victims.
  std::uint32_t x = w.rng_state_;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  w.rng_state_ = x;
  const std::size_t start = x % n;
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool lost_any = false;
    for (std::size_t k = 0; k < n; ++k) {
      thread_worker* victim = steal_table_[(start + k) % n].load(std::memory_order_relaxed);  // fixed once published
      if (victim == &w) continue;
      auto r = victim->deque_.steal();
      if (r) {
        out = r.value;
        thread_worker::add(w.steals_, 1);
        // The victim has more: another sleeping worker could steal too
        // (chained wake-up; wake_worker_if_needed() does nothing while a
        // worker of the group spins, and it will find the work).
        if (!victim->deque_.empty_approx()) wake_worker_if_needed();
        return true;
      }
      lost_any |= r.status == steal_status::lost_race;
    }
    if (!lost_any) break;  // every deque was empty: do not spin on it
  }
  // Last resort: another worker's LIFO slot (its newest job, which that
  // worker would run next; taken only when no deque had anything).
  for (std::size_t k = 0; k < n; ++k) {
    thread_worker* victim = steal_table_[(start + k) % n].load(std::memory_order_relaxed);  // fixed once published
    if (victim == &w) continue;
    // relaxed pre-check: avoids the exchange on an empty slot.
    if (victim->lifo_slot_.load(std::memory_order_relaxed) == nullptr) continue;
    // acquire: pairs with the owner's release store/exchange in push_local().
    if (detail::job_node* taken = victim->lifo_slot_.exchange(nullptr, std::memory_order_acquire)) {
      out = taken;
      thread_worker::add(w.steals_, 1);
      return true;
    }
  }
  return false;
}

void thread_pool::run_node(thread_worker& w, detail::job_node* node) {
  execute(w, node->fn);
  w.node_cache_.release(node);
}

void thread_pool::execute(thread_worker& w, job_function& fn) {
  // acquire: pairs with the release store in stop(); a job not yet started
  // when cancellation is requested is cancelled rather than run.
  const std::uint8_t raw_tag = fn.tag();
  if ((raw_tag & bounded_tag) != 0) release_room(1);  // the job leaves the queue now
  const auto tag = static_cast<std::uint8_t>(raw_tag & ~bounded_tag);
  // A job taken just before pause() became visible to this worker, but
  // pushed after pause() returned, must not start either: the push
  // happens-after the pause store, so this load sees it. Hold the job until
  // resume() or stop().
  if (paused_.load(std::memory_order_acquire)) wait_while_paused();  // pairs with the seq_cst store in pause()
  if (cancel_requested_.load(std::memory_order_acquire)) {
    fn.cancel();
    fn.reset();
    queue_->note_cancelled(tag);
    thread_worker::add(w.cancelled_, 1, std::memory_order_release);  // pairs with idle_now()
    return;
  }
  // A sampled job: record how long it waited and how long it runs.
  const std::uint64_t stamp = fn.enqueue_stamp();
  std::uint64_t started = 0;
  if (stamp != 0) {
    started = now_ns();
    const std::uint64_t wait = started > stamp ? started - stamp : 0;
    w.wait_histogram_.record(wait);
    if (tag != 0) queue_->note_wait(tag, wait);
  }
  const job_outcome outcome = run_guarded(fn);
  if (stamp != 0) w.run_histogram_.record(now_ns() - started);
  if (outcome == job_outcome::cancelled) {
    // The job saw its token cancelled and completed its own future.
    queue_->note_cancelled(tag);
    thread_worker::add(w.cancelled_, 1, std::memory_order_release);  // pairs with idle_now()
    return;
  }
  const bool failed = outcome == job_outcome::failed_reported;
  if (failed) thread_worker::add(w.failed_, 1);
  if (w.kind_counts_) {
    thread_worker::add(w.kind_counts_[tag], 1);                    // statistics only
    if (failed) thread_worker::add(w.kind_counts_[256 + tag], 1);  // statistics only
  }
  // release: pairs with the acquire loads in idle_now(); everything the job
  // did is visible to a wait_idle() that sees this count.
  thread_worker::add(w.processed_, 1, std::memory_order_release);
}

void thread_pool::run_batch(thread_worker& w, std::span<job_function> batch) {
  for (auto& fn : batch) execute(w, fn);
}

void thread_pool::report_failure(const std::exception_ptr& e) noexcept {
  std::shared_ptr<const error_handler> handler;
  {
    std::lock_guard lock(handler_mutex_);
    handler = handler_;
  }
  try {
    if (handler && *handler) {
      (*handler)(e);
      return;
    }
    if (e == out_of_memory_report_) {  // not a job's failure: a worker ran out of memory
      std::fprintf(stderr, "thread_system: pool '%s': a worker could not allocate; it goes on one job at a time\n",
                   name_.c_str());
      return;
    }
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "thread_system: a job in pool '%s' failed: %s\n", name_.c_str(), ex.what());
    } catch (...) {
      std::fprintf(stderr, "thread_system: a job in pool '%s' failed with a non-standard exception\n", name_.c_str());
    }
  } catch (...) {  // the handler itself threw: the failure is already counted
  }
}

void thread_pool::set_error_handler(error_handler handler) {
  auto p = handler ? std::make_shared<const error_handler>(std::move(handler)) : nullptr;
  std::lock_guard lock(handler_mutex_);
  handler_ = std::move(p);
}

// ---- waiting and stopping ------------------------------------------------------

bool thread_pool::on_own_worker() const noexcept { return tl_context.pool == this; }

bool thread_pool::nothing_left_to_steal_from_caller() const noexcept {
  if (tl_context.pool == this) {
    const thread_worker& w = *tl_context.worker;
    // relaxed: a hint; the slot is stealable too.
    return w.deque_.empty_approx() && w.lifo_slot_.load(std::memory_order_relaxed) == nullptr;
  }
  return queue_->empty_approx();
}

bool thread_pool::idle_now() const noexcept {
  // Completion counters first (acquire, pairing with the release stores in
  // execute() and stop()), then the queue's accepted total. A job counted as finished was
  // accepted before its completion was published, so the total read after
  // includes it; equality therefore means every job accepted before this
  // call has finished. See docs/ARCHITECTURE.md ("Idle detection").
  std::uint64_t finished = cancelled_by_stop_.load(std::memory_order_acquire);
  finished += dropped_.load(std::memory_order_acquire);                   // pairs with drop_oldest_queued()
  finished += caller_runner_.processed_.load(std::memory_order_acquire);  // pairs with execute()
  finished += caller_runner_.cancelled_.load(std::memory_order_acquire);  // pairs with execute()
  std::lock_guard lock(lifecycle_mutex_);
  for (const auto& w : workers_) {
    finished += w->processed_.load(std::memory_order_acquire);
    finished += w->cancelled_.load(std::memory_order_acquire);
  }
  // Accepted = injector pushes + jobs spawned onto workers' deques, read
  // after all completion counters (acquire loads above keep them first).
  std::uint64_t accepted = queue_->accepted();
  for (const auto& w : workers_) accepted += w->spawned_.load(std::memory_order_acquire);  // pairs with push_local()
  return finished == accepted;
}

void thread_pool::wait_idle() {
  if (on_own_worker()) {
    throw error_exception(
        error{error_code::invalid_argument, "thread_pool::wait_idle() called from one of the pool's own workers"});
  }
  if (state_.load(std::memory_order_acquire) == state::created) return;  // nothing can run yet
  for (;;) {
    if (idle_now()) return;
    const auto key = became_idle_.prepare_wait();
    if (idle_now()) {
      became_idle_.cancel_wait();
      return;
    }
    became_idle_.commit_wait(key);
  }
}

namespace {
// queue.pop_share(out, 1), retried while the queue throws std::bad_alloc
// (nothing is taken then): at most `attempts` times, yielding in between;
// 0 attempts means until it works. Returns 0 when it gave up.
std::size_t pop_retrying(detail::injector& queue, std::span<job_function> out, unsigned attempts) noexcept {
  for (unsigned i = 0; attempts == 0 || i < attempts; ++i) {
    try {
      return queue.pop_share(out, 1);
    } catch (const std::bad_alloc&) {
      std::this_thread::yield();
    }
  }
  return 0;
}
}  // namespace

std::uint64_t thread_pool::cancel_queued() noexcept {
  std::array<job_function, max_batch> local;
  std::uint64_t n = 0;
  for (;;) {
    // Giving up is safe: cancel_requested_ is set, so the workers cancel
    // whatever is left as they take it.
    const std::size_t got = pop_retrying(*queue_, local, 1000);
    if (got == 0) return n;
    for (std::size_t i = 0; i < got; ++i) {
      const std::uint8_t tag = local[i].tag();
      local[i].cancel();
      local[i].reset();
      queue_->note_cancelled(tag);
      if ((tag & bounded_tag) != 0) release_room(1);
    }
    n += got;
  }
}

stop_report thread_pool::stop(stop_mode mode) {
  if (on_own_worker()) {
    throw error_exception(
        error{error_code::invalid_argument, "thread_pool::stop() called from one of the pool's own workers"});
  }
  // Timers first, while the pool still accepts their due runs (see
  // timer_queue.hpp: drain dispatches due one-shot timers, cancels the rest).
  timer_queue* timer_queue_to_stop = nullptr;
  {
    std::lock_guard lock(timers_mutex_);
    timers_closed_ = true;
    timer_queue_to_stop = timers_.get();
  }
  if (timer_queue_to_stop != nullptr) (void)timer_queue_to_stop->stop(mode);
  std::lock_guard stop_lock(stop_mutex_);
  {
    std::lock_guard lock(lifecycle_mutex_);
    if (state_.load(std::memory_order_relaxed) == state::stopped) return final_report_;
    state_.store(state::stopping, std::memory_order_release);  // pairs with acquire in is_running()
  }
  // From here workers_ no longer changes: adding, starting and resizing
  // are refused once stopping (under lifecycle_mutex_, which the store
  // above held), and only stop() - serialised by stop_mutex_ - joins.
  // Producers blocked by backpressure give up with pool_stopped (the state
  // store above is ordered before this notify's fence).
  room_available_.notify_all();
  // A paused pool still runs what it accepted (drain) or cancels it.
  paused_.store(false, std::memory_order_seq_cst);  // see resume()
  queue_->close();                                  // from here every push fails with pool_stopped
  resumed_.notify_all();                            // a worker holding a job for resume() runs or cancels it now
  queue_->wait_for_pushes();                        // pushes that raced with close() have settled: accepted() is final
  if (mode == stop_mode::cancel_pending) {
    // release: pairs with the acquire in execute(); set before draining so
    // jobs already taken by workers but not started are cancelled too.
    cancel_requested_.store(true, std::memory_order_release);
    // release: pairs with the acquire in idle_now().
    cancelled_by_stop_.fetch_add(cancel_queued(), std::memory_order_release);
  }
  wake_all_groups();
  for (auto& w : workers_) {
    if (w->thread_.joinable()) w->thread_.join();
  }
  // Whatever is still queued runs (drain) or is cancelled (cancel_pending,
  // through execute()) on this thread, so every accepted job is accounted
  // for: jobs no worker ever ran (the pool never started), and jobs a
  // worker left behind because its last pop needed memory it could not get
  // (a worker leaves once the queue is closed and a look finds nothing).
  // Workers are joined: nothing races with these pops.
  {
    std::array<job_function, max_batch> local;
    // Until it works: no one else will ever take these jobs.
    for (std::size_t n = pop_retrying(*queue_, local, 0); n > 0; n = pop_retrying(*queue_, local, 0)) {
      run_batch(caller_runner_, std::span(local.data(), n));
    }
  }
  std::lock_guard lock(lifecycle_mutex_);
  final_report_ = make_report();
  state_.store(state::stopped, std::memory_order_release);  // pairs with acquire in is_stopped()/destructor
  became_idle_.notify_all();
  return final_report_;
}

stop_report thread_pool::make_report() const {
  // Caller holds lifecycle_mutex_.
  stop_report r;
  r.accepted = queue_->accepted();
  for (const auto& w : workers_) r.accepted += w->spawned_.load(std::memory_order_acquire);  // pairs with push_local()
  r.cancelled = cancelled_by_stop_.load(std::memory_order_acquire);
  r.cancelled += dropped_.load(std::memory_order_acquire);  // pairs with drop_oldest_queued()
  // Jobs caller_runs ran on the submitting thread: accepted and finished at once.
  const std::uint64_t by_caller = caller_ran_.load(std::memory_order_relaxed);                  // statistics only
  const std::uint64_t cancelled_by_caller = caller_cancelled_.load(std::memory_order_relaxed);  // statistics only
  r.accepted += by_caller + cancelled_by_caller;
  r.executed += by_caller;
  r.failed += caller_failed_.load(std::memory_order_relaxed);  // statistics only
  r.cancelled += cancelled_by_caller;
  auto add_worker = [&r](const thread_worker& w) {
    const auto s = w.get_statistics();
    r.executed += s.jobs_processed;
    r.failed += s.jobs_failed;
    r.cancelled += s.jobs_cancelled;
  };
  add_worker(caller_runner_);
  for (const auto& w : workers_) add_worker(*w);
  return r;
}

void thread_pool::wait_while_paused() noexcept {
  for (;;) {
    const auto key = resumed_.prepare_wait();
    // seq_cst: Dekker with resume()/stop(), which store then notify.
    if (!paused_.load(std::memory_order_seq_cst) || queue_->is_closed()) {
      resumed_.cancel_wait();
      return;
    }
    resumed_.commit_wait(key);
  }
}

void thread_pool::pause() noexcept {
  paused_.store(true, std::memory_order_seq_cst);  // workers see it before taking their next job
}

void thread_pool::resume() noexcept {
  // seq_cst store, then wake every group: a worker that read paused_ == true
  // after its prepare_wait() fence is woken by the notify that follows.
  paused_.store(false, std::memory_order_seq_cst);
  resumed_.notify_all();  // workers holding a job in wait_while_paused()
  wake_all_groups();
}

bool thread_pool::is_paused() const noexcept {
  return paused_.load(std::memory_order_acquire);  // pairs with pause()/resume()
}

bool thread_pool::is_running() const noexcept {
  return state_.load(std::memory_order_acquire) == state::running;  // pairs with the release in start()
}

bool thread_pool::is_stopped() const noexcept {
  return state_.load(std::memory_order_acquire) == state::stopped;  // pairs with the release in stop()
}

pool_statistics thread_pool::get_statistics() const {
  pool_statistics s;
  std::lock_guard lock(lifecycle_mutex_);
  const stop_report r = make_report();
  s.accepted = r.accepted;
  s.executed = r.executed;
  s.failed = r.failed;
  s.cancelled = r.cancelled;
  s.queued = queue_->size_approx();
  s.workers = active_workers_locked();
  s.dropped = dropped_.load(std::memory_order_relaxed);        // statistics only
  s.caller_ran = caller_ran_.load(std::memory_order_relaxed);  // statistics only
  s.paused = paused_.load(std::memory_order_relaxed);          // statistics only
  for (const auto& w : workers_) {
    const auto ws = w->get_statistics();
    s.steals += ws.steals;
    s.parks += ws.parks;
    s.wakeups += ws.wakeups;
    s.allocation_failures += ws.allocation_failures;
    s.queued += w->deque_.size_approx();
    s.queued += w->lifo_slot_.load(std::memory_order_relaxed) != nullptr ? 1 : 0;  // statistics only
  }
  return s;
}

std::pair<std::uint64_t, std::uint64_t> thread_pool::kind_totals(std::uint8_t tag) const {
  std::uint64_t executed = 0;
  std::uint64_t failed = 0;
  std::lock_guard lock(lifecycle_mutex_);
  for (const auto& w : workers_) {
    if (!w->kind_counts_) continue;
    executed += w->kind_counts_[tag].load(std::memory_order_relaxed);      // statistics only
    failed += w->kind_counts_[256 + tag].load(std::memory_order_relaxed);  // statistics only
  }
  return {executed, failed};
}

worker_latency thread_pool::latency() const {
  worker_latency total;
  std::lock_guard lock(lifecycle_mutex_);
  for (const auto& w : workers_) {
    const worker_latency one = w->latency();
    total.wait.merge(one.wait);
    total.run.merge(one.run);
  }
  return total;
}

namespace detail {

bool nothing_left_to_steal(const thread_pool& pool) noexcept { return pool.nothing_left_to_steal_from_caller(); }

}  // namespace detail

}  // namespace thread_system
