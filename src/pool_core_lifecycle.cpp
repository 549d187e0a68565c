// The scheduler core's lifecycle up to running: construction, adding and
// starting workers (a batch starts all or none) and resize. Stopping,
// pausing and the state queries are in pool_core_stop.cpp; the worker loop
// in pool_core.cpp; the workers as the user sees them (list, count, OS
// threads) in pool_core_workers.cpp; a core stopped or destroyed inside its
// own code (frames, discard scopes, orphan()) in pool_core_frames.cpp.
#include "pool_core.hpp"
#include "thread_system/detail/chaos.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "thread_system/detail/asymmetric_fence.hpp"
#include "thread_system/detail/duration.hpp"
#include "thread_system/detail/futex.hpp"
#include "thread_system/detail/os_thread.hpp"
#include "thread_system/detail/thread_attributes.hpp"

namespace thread_system::detail {

namespace {
// Half the hardware threads (thread_pool::default_worker_count()), at least one.
std::uint32_t default_max_spinners() noexcept {
  const std::size_t half = std::min<std::size_t>(hardware_threads(), pool_core::max_workers) / 2;
  return static_cast<std::uint32_t>(half == 0 ? 1 : half);
}

void validate(const backpressure& b) {
  switch (b.on_full) {
    case backpressure::policy::block:
    case backpressure::policy::block_for:
    case backpressure::policy::reject:
    case backpressure::policy::caller_runs:
    case backpressure::policy::drop_oldest:
      break;
    default:  // a value cast from another number: a full pool would not know what to do
      throw error_exception(error{
          error_code::invalid_argument,
          "backpressure::on_full: " + std::to_string(static_cast<int>(b.on_full)) + " is not a backpressure::policy"});
  }
  if (b.capacity != 0 && b.on_full == backpressure::policy::block_for && b.timeout.count() < 0) {
    throw error_exception(error{error_code::invalid_argument, "backpressure::block_for: negative timeout"});
  }
}

// pool_options::idle_wait in nanoseconds; negative is refused. (The
// spin before it is not part of it: a few microseconds, see pool_core.cpp.)
std::uint64_t idle_wait_ns(std::chrono::nanoseconds wait) {
  if (wait.count() < 0) {
    throw error_exception(error{error_code::invalid_argument, "pool_options::idle_wait: negative duration"});
  }
  return static_cast<std::uint64_t>(wait.count());
}

std::exception_ptr make_out_of_memory_report(const char* kind, const std::string& pool_name) {
  return std::make_exception_ptr(error_exception(
      error{error_code::resource_exhausted, std::string(kind) + " '" + pool_name +
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

pool_core::pool_core(core_config config) try
    : name_(std::move(config.name)),
      kind_(config.kind),
      queue_(std::move(config.queue)),
      bounds_(config.bounds),
      local_deques_(config.local_deques),
      latency_sample_every_(config.latency_sample_every),
      max_spinners_(default_max_spinners()),
      stack_size_(config.worker_stack_size),
      idle_wait_ns_(idle_wait_ns(config.idle_wait)),
      out_of_memory_report_(make_out_of_memory_report(kind_, name_)) {
  validate(bounds_);
  // The bound on loop pieces that may be taken back and are still queued:
  // in a bounded pool (backpressure, or a fixed ring) they hold room, so at
  // most a quarter of it (1024 at most).
  const std::size_t room = bounds_.capacity != 0 ? bounds_.capacity : queue_->capacity();
  taken_back_.limit = static_cast<std::int64_t>(room != 0 ? std::min<std::size_t>(room / 4, 1024) : 1024);
  // A size os_thread refuses as no mapping's: a mistake, found here rather
  // than as a refused thread at start().
  if (os_thread::larger_than_any_mapping(stack_size_)) {
    throw error_exception(
        error{error_code::invalid_argument, std::string(kind_) + " '" + name_ + "': worker_stack_size " +
                                                std::to_string(stack_size_) +
                                                " is larger than any mapping (PTRDIFF_MAX, in whole pages)"});
  }
  // Before any worker or producer of this pool exists: from here pushers run
  // only a compiler barrier for their wake-up check (wake_worker_if_needed()).
  detail::asymmetric_fence_init();
  // The thread that runs what stop() drains is worker max_workers to the
  // injector (note_done()).
  caller_runner_.index_ = max_workers;
  queue_->prepare_worker(max_workers);
  if (config.make_worker != nullptr) make_worker_ = config.make_worker;
  if (config.on_error) handler_ = std::make_shared<const error_handler>(std::move(config.on_error));
} catch (const std::bad_alloc&) {
  throw error_exception(out_of_memory_error().value);
}

pool_core::~pool_core() {
  if (state_.load(std::memory_order_acquire) != state::stopped) (void)stop(stop_mode::drain);
}

unexpected_error too_many_workers(const char* kind, const std::string& pool_name, std::size_t requested) {
  return make_error_nothrow(error_code::invalid_argument, [&] {
    return std::string(kind) + " '" + pool_name + "': " + std::to_string(requested) +
           " workers requested; a pool has at most " + std::to_string(max_workers);
  });
}

pool_worker& pool_core::adopt(std::unique_ptr<thread_worker> w) noexcept {
  pool_worker& adopted = state_of(*w);
  adopted.index_ = workers_.size();
  // release: pairs with the acquire in thread_worker::belongs_to_pool();
  // what the worker's owner set before handing it over is fixed from here.
  adopted.owned_by_pool_.store(true, std::memory_order_release);
  workers_.push_back(std::move(w));  // the caller reserved the capacity: no allocation
  return adopted;
}

result<void> pool_core::enqueue_batch(std::vector<std::unique_ptr<thread_worker>> workers) {
  for (const auto& w : workers) {
    if (!w) return make_error_nothrow(error_code::invalid_argument, [&] { return named() + ": null worker in batch"; });
  }
  std::lock_guard lock(lifecycle_mutex_);
  const state st = state_.load(std::memory_order_relaxed);  // state_ only changes under this mutex
  if (st == state::stopping || st == state::stopped) {
    return make_error_nothrow(error_code::pool_stopped, [&] { return named() + ": cannot add workers after stop()"; });
  }
  if (workers.size() > max_workers - workers_.size())
    return too_many_workers(kind_, name_, workers_.size() + workers.size());
  const std::size_t first = workers_.size();
  std::vector<pool_worker*> added;
  try {
    workers_.reserve(first + workers.size());
    added.reserve(workers.size());
  } catch (const std::bad_alloc&) {
    return make_error(error_code::resource_exhausted, "out of memory");
  }
  for (auto& w : workers) added.push_back(&adopt(std::move(w)));  // both reserved: no allocation
  if (st == state::running) {
    if (auto r = launch(added, [] {}); !r) {
      workers_.resize(first);  // never published, never ran: gone again
      return r;
    }
  }
  return {};
}

result<void> pool_core::start() {
  std::lock_guard lock(lifecycle_mutex_);
  switch (state_.load(std::memory_order_relaxed)) {  // state_ only changes under this mutex
    case state::running:
      return make_error_nothrow(error_code::already_started, [&] { return named() + " is already running"; });
    case state::stopping:
    case state::stopped:
      return make_error_nothrow(error_code::pool_stopped, [&] { return named() + " was stopped; create a new pool"; });
    case state::created:
      break;
  }
  if (active_workers_locked() == 0) {
    return make_error_nothrow(error_code::invalid_argument, [&] { return named() + ": start() with zero workers"; });
  }
  std::vector<pool_worker*> all;
  try {
    all.reserve(workers_.size());
  } catch (const std::bad_alloc&) {
    return make_error(error_code::resource_exhausted, "out of memory");
  }
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    pool_worker& w = state_of(*workers_[i]);
    w.index_ = i;
    // Workers a resize() before start() set aside wait for a later resize().
    // relaxed: membership only changes under lifecycle_mutex_ before start().
    if (w.membership_.load(std::memory_order_relaxed) == pool_worker::active) all.push_back(&w);
  }
  // pairs with acquire loads in is_running()/push paths; set before the
  // workers run, so a job they run sees a running pool.
  return launch(all, [this] { state_.store(state::running, std::memory_order_release); });
}

template <typename BeforeGo>
result<void> pool_core::launch(std::span<pool_worker* const> batch, BeforeGo before_go) {
  // Caller holds lifecycle_mutex_.
  std::size_t new_slots = 0;
  for (pool_worker* w : batch) new_slots += w->published_ ? 0 : 1;
  // relaxed: published_ is only written under lifecycle_mutex_.
  if (new_slots > max_workers - published_.load(std::memory_order_relaxed))
    return too_many_workers(kind_, name_, batch.size());
  std::shared_ptr<launch_gate> gate;
  try {
    gate = std::make_shared<launch_gate>();
    for (pool_worker* w : batch) prepare_worker(*w);
  } catch (const std::system_error& e) {  // group_for(): too many distinct responsibility sets
    return make_error_nothrow(error_code::invalid_argument, [&] { return named() + ": " + e.what(); });
  } catch (const std::bad_alloc&) {
    // The message is built without throwing: memory is short here.
    return make_error_nothrow(error_code::resource_exhausted,
                              [this] { return named() + ": out of memory for the workers"; });
  }
  std::size_t created = 0;
  result<void> refused;
  for (pool_worker* w : batch) {
    if (w->thread_.joinable()) w->thread_.join();  // a worker that left earlier (resize) and comes back
    // Its old thread's id is gone with it: worker_os_tid_locked() waits for the new
    // one. relaxed: published to readers by lifecycle_mutex_, held here.
    w->os_tid_.store(0, std::memory_order_relaxed);
    auto t = detail::os_thread::start(
        [this, w, gate] {
          if (!gate->wait()) return;
          worker_main(*w);
          leave_as_worker(*w);  // `this` may be gone after this call
        },
        stack_size_);
    if (!t) {
      refused = unexpected_error{std::move(t).error()};
      break;
    }
    w->thread_ = std::move(*t);
    ++created;
  }
  if (created < batch.size()) {
    gate->open(launch_gate::abort);
    for (std::size_t i = 0; i < created; ++i) batch[i]->thread_.join();
    // A request the platform calls invalid stays invalid_argument; anything
    // else is a shortage.
    const error_code code = refused.error().code() == error_code::invalid_argument ? error_code::invalid_argument
                                                                                   : error_code::resource_exhausted;
    return make_error_nothrow(code, [&] {
      return named() + ": started none of " + std::to_string(batch.size()) + " workers (thread " +
             std::to_string(created + 1) + " could not be created): " + refused.error().message();
    });
  }
  for (pool_worker* w : batch) publish_worker(*w);
  before_go();
  // Counted before they run (relaxed: a worker's own decrement is ordered
  // after this by the gate's opening; orphan() reads it with acq_rel under
  // the stopping state, which this thread's lifecycle lock orders).
  live_workers_.fetch_add(2 * batch.size(), std::memory_order_relaxed);
  gate->open(launch_gate::go);
  return {};
}

void pool_core::prepare_worker(pool_worker& w) {
  // Caller holds lifecycle_mutex_.
  if (w.prepared_) return;
  w.node_cache_.attach(&node_pool_);
  node_pool_.reserve_for_worker();  // on this thread: the worker's first batch then needs no allocation
  w.group_ = &group_for(w.responsibility_mask_);
  queue_->prepare_worker(w.index_);  // e.g. a typed injector's per-worker counters
  w.thread_name_ = w.name_.empty() ? name_ + "-" + std::to_string(w.index_) : w.name_;
  w.prepared_ = true;
}

void pool_core::publish_worker(pool_worker& w) noexcept {
  // Caller holds lifecycle_mutex_.
  // relaxed: membership is published to the thread by the gate's release.
  w.membership_.store(pool_worker::active, std::memory_order_relaxed);
  if (w.published_) return;  // back after leaving: its steal slot is still there
  const std::size_t slot = published_.load(std::memory_order_relaxed);  // only written under lifecycle_mutex_
  w.rng_state_ = static_cast<std::uint32_t>(slot * 2654435761U + 1U);
  steal_table_[slot].store(&w, std::memory_order_relaxed);  // published by the release below
  published_.store(slot + 1, std::memory_order_release);    // pairs with the acquire in try_steal()/work_visible()
  worker_count_.fetch_add(1, std::memory_order_relaxed);    // fair-share hint only
  w.published_ = true;
}

detail::wake_group& pool_core::group_for(std::uint64_t mask) {
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

result<void> pool_core::resize(std::size_t n) {
  if (n == 0)
    return make_error_nothrow(error_code::invalid_argument,
                              [&] { return named() + ": resize(): the worker count must be at least 1"; });
  if (n > max_workers) return too_many_workers(kind_, name_, n);
  std::lock_guard lock(lifecycle_mutex_);
  const state st = state_.load(std::memory_order_relaxed);  // state_ only changes under this mutex
  if (st == state::stopping || st == state::stopped) {
    return make_error_nothrow(error_code::pool_stopped, [&] { return named() + ": cannot resize after stop()"; });
  }
  if (st == state::created) {
    // Before start(): set workers aside or take them back; none is
    // destroyed (get_workers() pointers stay valid), and start() starts
    // the active ones.
    std::size_t active = active_workers_locked();
    const std::size_t old_size = workers_.size();
    std::vector<pool_worker*> revived;
    try {
      revived.reserve(n);
      for (auto& w : workers_) {
        if (active + revived.size() >= n) break;
        // relaxed: membership only changes under lifecycle_mutex_ before start().
        if (state_of(*w).membership_.load(std::memory_order_relaxed) == pool_worker::exited)
          revived.push_back(&state_of(*w));
      }
      workers_.reserve(old_size + n);
      while (active + revived.size() + (workers_.size() - old_size) < n) {
        adopt(make_worker_());  // capacity reserved: no allocation
      }
    } catch (const std::bad_alloc&) {
      workers_.resize(old_size);  // never seen outside this call
      return make_error(error_code::resource_exhausted, "out of memory");
    }
    for (pool_worker* w : revived) w->membership_.store(pool_worker::active, std::memory_order_relaxed);
    active += revived.size() + (workers_.size() - old_size);
    for (auto it = workers_.rbegin(); it != workers_.rend() && active > n; ++it) {
      if (state_of(**it).membership_.load(std::memory_order_relaxed) == pool_worker::active) {
        state_of(**it).membership_.store(pool_worker::exited, std::memory_order_relaxed);  // as above
        --active;
      }
    }
    return {};
  }
  std::size_t active = active_workers_locked();
  if (active < n) {
    const std::size_t old_size = workers_.size();
    std::vector<pool_worker*> revived;  // were leaving, taken back without a new thread
    std::vector<pool_worker*> batch;    // need a thread: left earlier, or new
    try {
      revived.reserve(n);
      batch.reserve(n);
      // Grow: first take back workers that are leaving, then those that
      // left, then new ones.
      for (auto& w : workers_) {
        if (active + revived.size() >= n) break;
        int m = pool_worker::retiring;
        // acq_rel: pairs with the worker's CAS retiring -> exited; whoever wins decides.
        if (state_of(*w).membership_.compare_exchange_strong(m, pool_worker::active, std::memory_order_acq_rel)) {
          revived.push_back(&state_of(*w));
        }
      }
      for (auto& w : workers_) {
        if (active + revived.size() + batch.size() >= n) break;
        // relaxed: exited is final until this mutex's holder revives it.
        if (state_of(*w).membership_.load(std::memory_order_relaxed) == pool_worker::exited)
          batch.push_back(&state_of(*w));
      }
      workers_.reserve(old_size + n);
      while (active + revived.size() + batch.size() < n) {
        batch.push_back(&adopt(make_worker_()));  // both reserved: no allocation
      }
    } catch (const std::bad_alloc&) {
      for (pool_worker* w : revived) {
        // release: pairs with the acquire at the top of the worker loop.
        w->membership_.store(pool_worker::retiring, std::memory_order_release);
      }
      workers_.resize(old_size);
      wake_all_groups();
      return make_error(error_code::resource_exhausted, "out of memory");
    }
    if (auto r = launch(batch, [] {}); !r) {
      // Back to the previous size: the revived workers leave again, the new
      // ones never ran.
      for (pool_worker* w : revived) {
        // release: pairs with the acquire at the top of the worker loop.
        w->membership_.store(pool_worker::retiring, std::memory_order_release);
      }
      workers_.resize(old_size);
      wake_all_groups();
      return make_error_nothrow(r.error().code(), [&] {
        return named() + ": resize to " + std::to_string(n) + " kept " + std::to_string(active) +
               " workers: " + r.error().message();
      });
    }
    active = n;
  }
  // Shrink: the newest active workers leave.
  for (auto it = workers_.rbegin(); it != workers_.rend() && active > n; ++it) {
    int m = pool_worker::active;
    // release: pairs with the acquire load at the top of the worker loop.
    if (state_of(**it).membership_.compare_exchange_strong(m, pool_worker::retiring, std::memory_order_release,
                                                           std::memory_order_relaxed)) {
      --active;
    }
  }
  worker_count_.store(active, std::memory_order_relaxed);  // fair-share hint only
  wake_all_groups();                                       // parked leavers notice (work_visible() is true for them)
  return {};
}

}  // namespace thread_system::detail
