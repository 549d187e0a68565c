#include "thread_system/monitoring/pool_monitor.hpp"

#include <algorithm>
#include <chrono>
#include <new>
#include <system_error>
#include <utility>

#include "thread_system/detail/duration.hpp"

namespace thread_system::monitoring {

namespace {
// The monitors whose sample() runs on this thread (their collectors are
// being called, each with its monitor's mutex_ held), innermost first: a
// collector may sample another monitor, whose collector may then use the
// first (which must see that it is inside its own sample, not lock its
// mutex_ again). Frames live on sample()'s stack.
struct sampling_frame {
  const pool_monitor* monitor;
  const sampling_frame* outer;
};
thread_local const sampling_frame* tl_sampling = nullptr;

[[noreturn]] void refuse_from_collector(const char* what) {
  // Built without throwing: out of memory, the refusal keeps its code.
  throw error_exception(make_error_nothrow(error_code::invalid_argument, [what] {
                          return std::string("pool_monitor: ") + what + " called from the monitor's own collector";
                        }).value);
}
// The workers a report's shares are taken over (see derive()).
std::size_t current_workers(const pool_metrics& m) noexcept {
  return m.worker_count != 0 && m.worker_count < m.workers.size() ? static_cast<std::size_t>(m.worker_count)
                                                                  : m.workers.size();
}
}  // namespace

pool_monitor::pool_monitor(collector source, monitor_options options)
    : source_(std::move(source)), options_(std::move(options)) {
  if (!source_) throw error_exception(error{error_code::invalid_argument, "pool_monitor: null collector"});
  if (options_.interval.count() <= 0) {
    throw error_exception(error{error_code::invalid_argument, "pool_monitor: interval must be positive"});
  }
  if (options_.window_samples < 2 || options_.window_samples > monitor_options::max_window_samples) {
    throw error_exception(
        error{error_code::invalid_argument, "pool_monitor: window_samples must be in [2, max_window_samples]"});
  }
  try {
    ring_.resize(options_.window_samples);  // the only allocation of the history
  } catch (const std::bad_alloc&) {
    throw error_exception(error{error_code::resource_exhausted, "pool_monitor: no memory for the history"});
  }
}

pool_monitor::~pool_monitor() { stop(); }

std::uint64_t pool_monitor::now() const { return options_.clock ? options_.clock() : detail::steady_now_ns(); }

bool pool_monitor::in_own_sample() const noexcept {
  for (const sampling_frame* f = tl_sampling; f != nullptr; f = f->outer) {
    if (f->monitor == this) return true;
  }
  return false;
}

bool pool_monitor::on_sampler_thread() const noexcept {
  // relaxed: the sampler's own id is stored before it runs its first
  // sample (start() holds control_mutex_, which sampler_main() takes
  // first); any other thread compares it with its own id, never equal.
  return sampler_id_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

result<void> pool_monitor::start() {
  if (on_sampler_thread()) {
    return make_error(error_code::already_started, "pool_monitor: start() called on the sampler thread");
  }
  // From a collector that sample() runs on another thread: joining a
  // sampler that is leaving would wait for it, and it waits for this
  // sample's mutex.
  if (in_own_sample()) {
    return make_error(error_code::invalid_argument, "pool_monitor: start() called from the monitor's own collector");
  }
  // Held across the join below and in stop(): a start() cannot run between
  // a stop()'s request and its join (it would clear the request the old
  // sampler waits for, and stop() would wait for ever).
  std::lock_guard lifecycle(lifecycle_mutex_);
  std::unique_lock lock(control_mutex_);
  if (sampler_.joinable()) {
    if (!stop_requested_) return make_error(error_code::already_started, "pool_monitor: sampler already running");
    // A stop that the collector began (stop() on the sampler thread): the
    // sampler is leaving; join it before starting another.
    std::thread leaving = std::move(sampler_);
    lock.unlock();
    leaving.join();
    lock.lock();
  }
  stop_requested_ = false;
  try {
    sampler_ = std::thread([this] { sampler_main(); });
  } catch (const std::system_error& e) {
    // Built without throwing (the message needs memory too).
    return make_error_nothrow(error_code::resource_exhausted,
                              [&e] { return std::string("pool_monitor: cannot start sampler: ") + e.what(); });
  } catch (const std::bad_alloc&) {  // the thread's state
    return thread_system::detail::out_of_memory_error();
  }
  sampler_id_.store(sampler_.get_id(), std::memory_order_relaxed);  // see on_sampler_thread()
  running_.store(true, std::memory_order_release);                  // pairs with is_running()'s acquire
  return {};
}

void pool_monitor::stop() noexcept {
  if (on_sampler_thread() || in_own_sample()) {
    // From the collector: the sampler cannot join itself, and from a
    // collector on another thread joining would wait for a sampler that
    // waits for this sample's mutex. It leaves once it sees the request
    // (after this sample, or at once from its wait); the next stop() or
    // start() from outside a collector, or the destructor, joins it. (No
    // lifecycle_mutex_: a stop() on another thread may hold it while
    // joining the sampler.)
    {
      std::lock_guard lock(control_mutex_);
      stop_requested_ = true;
      running_.store(false, std::memory_order_release);  // pairs with is_running()'s acquire
    }
    control_cv_.notify_all();
    return;
  }
  std::lock_guard lifecycle(lifecycle_mutex_);
  std::thread t;
  {
    std::lock_guard lock(control_mutex_);
    if (!sampler_.joinable()) return;
    stop_requested_ = true;
    t = std::move(sampler_);
    running_.store(false, std::memory_order_release);  // pairs with is_running()'s acquire
  }
  control_cv_.notify_all();
  t.join();
  sampler_id_.store(std::thread::id{}, std::memory_order_relaxed);  // see on_sampler_thread()
}

bool pool_monitor::is_running() const noexcept {
  return running_.load(std::memory_order_acquire);  // pairs with the stores in start()/stop()
}

void pool_monitor::sampler_main() {
  std::unique_lock lock(control_mutex_);
  while (!stop_requested_) {
    lock.unlock();
    try {
      (void)sample();
    } catch (...) {
      // A collector that throws (e.g. out of memory) loses this sample only.
    }
    lock.lock();
    // Saturating: an interval near nanoseconds::max() overflowed now() +
    // interval into the past, and the sampler sampled without pause.
    control_cv_.wait_until(lock,
                           thread_system::detail::saturating_add(std::chrono::steady_clock::now(), options_.interval),
                           [this] { return stop_requested_; });
  }
}

monitor_report pool_monitor::sample() {
  if (in_own_sample()) refuse_from_collector("sample()");  // mutex_ is this thread's already
  return thread_system::detail::throw_if_out_of_memory([this] {
    std::lock_guard lock(mutex_);
    struct sampling_scope {
      sampling_frame frame;
      explicit sampling_scope(const pool_monitor* m) noexcept : frame{m, tl_sampling} { tl_sampling = &frame; }
      sampling_scope(const sampling_scope&) = delete;
      sampling_scope& operator=(const sampling_scope&) = delete;
      ~sampling_scope() { tl_sampling = frame.outer; }
    } scope(this);
    // Built aside and made the latest only once complete, and copied for
    // the caller before that: a collector, derive() or the copy that throws
    // (out of memory) leaves latest() as it was. The collector gets a
    // default pool_metrics, not the report before the latest (what it set
    // only sometimes would have come back from two samples ago).
    scratch_.metrics = pool_metrics{};
    monitor_report& r = scratch_;
    source_(r.metrics);
    const std::uint64_t t = now();
    r.metrics.steady_ns = t;
    if (!options_.pool_label.empty()) r.metrics.pool_name = options_.pool_label;
    // derive() advances the history: once it has run, this sample is
    // committed (below), so the caller's copy is made first.
    derived_state saved = save_derived_state();
    try {
      derive(r, t);
      monitor_report out = r;
      std::swap(latest_, scratch_);
      ++samples_;
      return out;
    } catch (...) {
      restore_derived_state(std::move(saved));  // the sample is lost: the history as it was
      throw;
    }
  });
}

pool_monitor::derived_state pool_monitor::save_derived_state() const {
  return derived_state{ring_next_, ring_size_, ring_[ring_next_], peak_queue_depth_, tracks_};
}

void pool_monitor::restore_derived_state(derived_state&& saved) noexcept {
  ring_next_ = saved.ring_next;
  ring_size_ = saved.ring_size;
  ring_[ring_next_] = saved.overwritten;
  peak_queue_depth_ = saved.peak_queue_depth;
  tracks_ = std::move(saved.tracks);
}

void pool_monitor::derive(monitor_report& r, std::uint64_t t) {
  const pool_metrics& m = r.metrics;
  r.sample_number = samples_ + 1;  // counted by sample() once the report is complete

  // History ring: overwrite the oldest entry.
  ring_[ring_next_] = ring_entry{t, m.accepted, m.executed, m.cancelled, m.failed, m.queue_depth};
  ring_next_ = (ring_next_ + 1) % ring_.size();
  ring_size_ = std::min(ring_size_ + 1, ring_.size());
  const ring_entry& newest = ring_[(ring_next_ + ring_.size() - 1) % ring_.size()];
  const ring_entry& oldest = ring_[(ring_next_ + ring_.size() - ring_size_) % ring_.size()];

  std::uint64_t min_depth = newest.queue_depth;
  for (std::size_t i = 0; i < ring_size_; ++i) {
    min_depth = std::min(min_depth, ring_[(ring_next_ + ring_.size() - 1 - i) % ring_.size()].queue_depth);
  }
  r.window_min_queue_depth = min_depth;
  peak_queue_depth_ = std::max(peak_queue_depth_, m.queue_depth);
  r.peak_queue_depth = peak_queue_depth_;

  const auto delta = [](std::uint64_t later, std::uint64_t earlier) { return later >= earlier ? later - earlier : 0; };
  const std::uint64_t span = ring_size_ >= 2 ? delta(newest.t, oldest.t) : 0;
  r.window = std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(span));
  r.window_executed = ring_size_ >= 2 ? delta(newest.executed, oldest.executed) : 0;
  r.window_failed = ring_size_ >= 2 ? delta(newest.failed, oldest.failed) : 0;
  const std::uint64_t finished =
      ring_size_ >= 2 ? delta(newest.executed + newest.cancelled, oldest.executed + oldest.cancelled) : 0;
  const double seconds = static_cast<double>(span) / 1e9;
  r.throughput_per_s = seconds > 0 ? static_cast<double>(finished) / seconds : 0.0;
  r.accept_rate_per_s = seconds > 0 ? static_cast<double>(delta(newest.accepted, oldest.accepted)) / seconds : 0.0;
  r.error_rate =
      r.window_executed > 0 ? static_cast<double>(r.window_failed) / static_cast<double>(r.window_executed) : 0.0;

  // Per-worker: utilisation since the previous sample, and stuck detection.
  const auto stuck_after =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, options_.thresholds.stuck_after.count()));
  tracks_.resize(m.workers.size());
  r.workers.resize(m.workers.size());
  r.stuck_workers = 0;
  double utilisation_sum = 0.0;
  for (std::size_t i = 0; i < m.workers.size(); ++i) {
    const worker_metrics& w = m.workers[i];
    worker_track& k = tracks_[i];
    worker_report& out = r.workers[i];

    const auto busy = static_cast<std::uint64_t>(w.busy_time.count());
    out.recent_utilisation = 0.0;
    if (k.have_prev && t > k.prev_t) {
      out.recent_utilisation =
          std::clamp(static_cast<double>(delta(busy, k.prev_busy_ns)) / static_cast<double>(t - k.prev_t), 0.0, 1.0);
    }
    k.prev_busy_ns = busy;
    k.prev_t = t;
    k.have_prev = true;
    utilisation_sum += out.recent_utilisation;

    out.stuck = false;
    out.no_progress_for = std::chrono::nanoseconds{0};
    if (!w.busy_since_known || w.busy_since_ns == 0) {
      k.tracking = false;  // parked (or unknown): not stuck
      continue;
    }
    if (k.tracking && k.busy_since == w.busy_since_ns && k.completed == w.completed()) {
      const std::uint64_t observed = delta(t, k.first_seen);
      out.no_progress_for = std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(observed));
      out.stuck = stuck_after > 0 && observed >= stuck_after;
    } else {
      // A new state (another stretch, or progress): start observing it now.
      k.busy_since = w.busy_since_ns;
      k.completed = w.completed();
      k.first_seen = t;
      k.tracking = true;
    }
    if (out.stuck) ++r.stuck_workers;
  }
  // Over the pool's current workers: get_workers() also lists those a
  // resize() removed (with no busy time since), which must not dilute the
  // share. A collector that sets no worker_count: the workers it listed.
  const std::size_t current = current_workers(m);
  r.recent_utilisation = current == 0 ? 0.0 : std::min(1.0, utilisation_sum / static_cast<double>(current));

  r.wait = m.has_latency ? summarise(m.wait) : latency_summary{};
  r.run = m.has_latency ? summarise(m.run) : latency_summary{};

  health_inputs in;
  in.have_window = ring_size_ >= 2 && span > 0;
  in.throughput_per_s = r.throughput_per_s;
  in.backlog_sustained = min_depth > 0;
  in.queue_depth = m.queue_depth;
  in.window_executed = r.window_executed;
  in.window_failed = r.window_failed;
  in.utilisation = r.recent_utilisation;
  in.have_wait_latency = m.has_latency && m.wait.count > 0;
  in.wait_p99_ns = r.wait.p99_ns;
  in.workers = current;
  in.stuck_workers = r.stuck_workers;
  r.health = evaluate_health(in, options_.thresholds);
}

std::unique_lock<std::mutex> pool_monitor::lock_unless_sampling() const {
  // In its own collector this thread holds mutex_ already (in sample(),
  // which writes only scratch_ until the collector returns): read unlocked.
  return in_own_sample() ? std::unique_lock<std::mutex>(mutex_, std::defer_lock) : std::unique_lock<std::mutex>(mutex_);
}

std::optional<monitor_report> pool_monitor::latest() const {
  return thread_system::detail::throw_if_out_of_memory([this]() -> std::optional<monitor_report> {
    const auto lock = lock_unless_sampling();
    if (samples_ == 0) return std::nullopt;
    return latest_;
  });
}

health_report pool_monitor::health() {
  {
    std::optional<health_report> latest_health =
        thread_system::detail::throw_if_out_of_memory([this]() -> std::optional<health_report> {
          const auto lock = lock_unless_sampling();
          if (samples_ == 0) return std::nullopt;
          return latest_.health;
        });
    if (latest_health) return std::move(*latest_health);
  }
  if (in_own_sample()) refuse_from_collector("health() before the first sample");
  return sample().health;
}

}  // namespace thread_system::monitoring
