// The scheduler core's workers as a pool's user sees them: the list and the count, the
// responsibility masks of the active ones (for the typed pool's resize()),
// and each worker's OS thread (native handle, affinity, nice level). The
// worker loop is in pool_core.cpp, starting and resizing in
// pool_core_lifecycle.cpp.
#include "pool_core.hpp"

#include <string>
#include <thread>

#include "thread_system/detail/thread_attributes.hpp"

namespace thread_system::detail {

std::vector<thread_worker*> pool_core::get_workers() const {
  std::lock_guard lock(lifecycle_mutex_);
  std::vector<thread_worker*> out;
  out.reserve(workers_.size());
  for (const auto& w : workers_) out.push_back(w.get());
  return out;
}

worker_masks pool_core::active_worker_masks(std::size_t first_n) const {
  std::lock_guard lock(lifecycle_mutex_);
  worker_masks out;
  for (const auto& handle : workers_) {
    const pool_worker& w = state_of(*handle);
    // relaxed: membership only changes under lifecycle_mutex_, except
    // retiring -> exited, which does not make a worker active.
    if (w.membership_.load(std::memory_order_relaxed) != pool_worker::active) continue;
    if (out.active < first_n) out.first_n |= w.responsibility_mask_;
    out.all |= w.responsibility_mask_;
    ++out.active;
  }
  return out;
}

std::size_t pool_core::worker_count() const {
  std::lock_guard lock(lifecycle_mutex_);
  return active_workers_locked();
}

result<pool_worker*> pool_core::running_worker_locked(std::size_t worker) const {
  if (worker >= workers_.size()) {
    return make_error_nothrow(error_code::invalid_argument,
                              [&] { return named() + ": no worker " + std::to_string(worker); });
  }
  pool_worker* w = &state_of(*workers_[worker]);
  // Running pool, active worker: stop() joins threads only after setting
  // `stopping` (under this mutex), and launch() replaces a thread only under
  // it, so the thread_ read below cannot race with a join. relaxed: state_
  // and membership_ are written under this mutex (membership_ also by the
  // worker on exit, which only ever leaves `retiring`, refused here anyway).
  if (state_.load(std::memory_order_relaxed) != state::running || !w->thread_.joinable() ||
      w->membership_.load(std::memory_order_relaxed) != pool_worker::active) {
    return make_error_nothrow(error_code::invalid_argument,
                              [&] { return named() + ": worker " + std::to_string(worker) + " is not running"; });
  }
  return w;
}

result<native_thread_handle> pool_core::native_handle(std::size_t worker) const {
  std::lock_guard lock(lifecycle_mutex_);
  auto w = running_worker_locked(worker);
  if (!w) return unexpected_error(std::move(w).error());
  return (*w)->thread_.native_handle();
}

result<int> pool_core::worker_os_tid_locked(std::size_t worker) const {
  auto running = running_worker_locked(worker);
  if (!running) return unexpected_error(std::move(running).error());
  const pool_worker* w = *running;
  // The thread may be starting: its id appears in a moment. (An active
  // worker with a thread passed launch()'s gate, which decides under this
  // mutex, so the thread reaches worker_main().)
  for (;;) {
    const int tid = w->os_tid_.load(std::memory_order_acquire);  // pairs with the store in worker_main()
    if (tid != 0) return tid;
    std::this_thread::yield();
  }
}

// Both hold lifecycle_mutex_ from the check to the system call: a worker
// that resize() retires, or stop() joins, needs it first, so the thread id
// they act on is still the worker's (an id of an exited thread may already
// name another process's thread).
result<void> pool_core::set_affinity(std::size_t worker, std::span<const int> cpus) {
  std::lock_guard lock(lifecycle_mutex_);
  auto tid = worker_os_tid_locked(worker);
  if (!tid) return unexpected_error(std::move(tid).error());
  return detail::set_thread_affinity(*tid, cpus);
}

result<void> pool_core::set_nice(std::size_t worker, int nice) {
  std::lock_guard lock(lifecycle_mutex_);
  auto tid = worker_os_tid_locked(worker);
  if (!tid) return unexpected_error(std::move(tid).error());
  return detail::set_thread_nice(*tid, nice);
}

std::size_t pool_core::active_workers_locked() const noexcept {
  std::size_t n = 0;
  for (const auto& w : workers_) {
    // relaxed: membership only changes under lifecycle_mutex_, except
    // retiring -> exited, which does not change this count.
    if (state_of(*w).membership_.load(std::memory_order_relaxed) == pool_worker::active) ++n;
  }
  return n;
}

}  // namespace thread_system::detail
