// pool_timers: a pool's timer queue, created on first use (src/pool_timers.hpp).
#include "pool_timers.hpp"

#include <new>
#include <utility>

#include "thread_system/detail/thread_attributes.hpp"

namespace thread_system::detail {

result<timer_handle> pool_timers::add(std::string_view kind, const std::string& pool_name, timer_routed_dispatch target,
                                      built_timer&& timer) {
  timer_queue* q = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (closed_)
      return make_error_nothrow(error_code::pool_stopped,
                                [&] { return std::string(kind) + " '" + pool_name + "' is stopped"; });
    if (!queue_) {
      try {
        timer_queue_options o;
        // The OS keeps 15 bytes of a thread name: 9 of the pool's, cut
        // before a character, and "-timer".
        o.name = pool_name.substr(0, detail::utf8_prefix_length(pool_name, 9)) + "-timer";
        queue_ = std::make_unique<timer_queue>(std::move(target), std::move(o));
      } catch (const error_exception& e) {
        return error_of(e);
      } catch (const std::bad_alloc&) {
        return out_of_memory_error();
      }
    }
    q = queue_.get();  // never replaced or destroyed before *this: safe to use unlocked
  }
  // Outside the lock, as a timer_queue's own callers: a concurrent
  // close_and_stop() makes the queue refuse (pool_stopped).
  return q->add_built(std::move(timer));
}

void pool_timers::close_and_stop(stop_mode mode) {
  timer_queue* q = nullptr;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    q = queue_.get();  // as in add()
  }
  if (q != nullptr) (void)q->stop(mode);
}

void pool_timers::abandon_on_timer_thread(job_function&& after) noexcept {
  std::lock_guard lock(mutex_);
  closed_ = true;
  queue_->abandon_on_timer_thread(std::move(after));  // on its thread: the queue exists
}

bool pool_timers::on_timer_thread() const noexcept {
  std::lock_guard lock(mutex_);
  return queue_ != nullptr && queue_->on_timer_thread();
}

timer_statistics pool_timers::statistics() const {
  std::lock_guard lock(mutex_);
  return queue_ ? queue_->statistics() : timer_statistics{};
}

}  // namespace thread_system::detail
