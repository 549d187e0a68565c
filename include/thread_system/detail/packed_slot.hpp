// packed_slot<Words>: a fixed-size home for one job inside a queue node or
// ring cell, in job_function's packed form (see job_function.hpp).
//
// A job whose packed form fits in `Words` words is stored inline. A larger
// one is first *boxed*: moved into a job_function of its own on the heap and
// replaced by a one-word `job_box` that points at it (3 packed words). The
// box forwards run, cancel and the report hook, and take() unwraps it again,
// so a consumer receives exactly the job_function that was pushed (callable,
// hooks and metadata). Boxing costs one allocation per push of a large job;
// small jobs - function pointers, lambdas capturing a few words, callables
// job_function already keeps on the heap - never box.
//
// Protocol (the owner provides all synchronisation):
//   prepare(job)  before the job is committed to the structure. Boxes it
//                 when needed; false when the box cannot be allocated (the
//                 job is then untouched).
//   unprepare(job) undoes prepare() for a job that was not stored after all
//                 (a refused push): the caller gets back what it pushed.
//   put(job)      moves a prepared, non-empty job into the slot.
//   take(out)     moves the slot's job into `out` (unboxed); the slot then
//                 holds nothing.
//   take_prepared(out) moves the slot's job into `out` as it was put, still
//                 boxed if prepare() boxed it: for a push that stored a job
//                 and must take it back to try again.
//   destroy()     destroys the slot's job without running or cancelling it.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/config.hpp"

namespace thread_system::detail {

/// One word that owns a heap-held job_function (see the header comment).
class job_box {
 public:
  explicit job_box(job_function* inner) noexcept : inner_(inner) {}
  job_box(job_box&& other) noexcept : inner_(std::exchange(other.inner_, nullptr)) {}
  job_box& operator=(job_box&&) = delete;
  job_box(const job_box&) = delete;
  job_box& operator=(const job_box&) = delete;
  ~job_box() { delete inner_; }

  job_outcome run_and_report() { return inner_->run(); }
  void cancel() noexcept { inner_->cancel(); }
  void cancel_because(const char* why) noexcept { inner_->cancel(why); }

  /// Gives up ownership of the boxed job.
  [[nodiscard]] job_function* release() noexcept { return std::exchange(inner_, nullptr); }

 private:
  job_function* inner_;
};
static_assert(job_function::stored_inline<job_box>);

/// Moves `job` into a heap box in place. False (job untouched) when the box
/// cannot be allocated. The box carries no metadata of its own: the inner
/// job keeps its tag and stamp, and nothing reads them while it is queued.
inline bool box_job(job_function& job) noexcept {
  auto* inner = new (std::nothrow) job_function(std::move(job));
  if (inner == nullptr) return false;  // nothing was moved: `new` failed before constructing
  job = job_function(job_box(inner));
  return true;
}

/// Replaces a boxed job by the job it holds; any other job is left as it is.
THREAD_SYSTEM_ALWAYS_INLINE void unbox_job(job_function& job) noexcept {
  if (!job.holds<job_box>()) [[likely]] {
    return;
  }
  job_function* inner = job.get_if<job_box>()->release();
  job = std::move(*inner);
  delete inner;
}

template <std::size_t Words>
class packed_slot {
  static_assert(Words >= 3, "a slot must hold at least a job_box (3 packed words)");
  static_assert(Words <= job_function::max_packed_words, "more words than any packed job needs");

 public:
  /// Callables up to this many bytes are stored in the slot without a box.
  static constexpr std::size_t inline_bytes = (Words - 2) * 8;

  /// True when `job` (non-empty) is stored without a box.
  [[nodiscard]] static bool fits(const job_function& job) noexcept { return job.packed_words() <= Words; }

  [[nodiscard]] static bool prepare(job_function& job) noexcept { return fits(job) || box_job(job); }
  static void unprepare(job_function& job) noexcept { unbox_job(job); }

  THREAD_SYSTEM_ALWAYS_INLINE void put(job_function&& job) noexcept { job.pack_into(words_); }
  THREAD_SYSTEM_ALWAYS_INLINE void take(job_function& out) noexcept {
    out.reset();
    out.unpack_from(words_);
    unbox_job(out);
  }
  THREAD_SYSTEM_ALWAYS_INLINE void take_prepared(job_function& out) noexcept {
    out.reset();
    out.unpack_from(words_);
  }
  void destroy() noexcept {
    job_function doomed;
    doomed.unpack_from(words_);
  }

 private:
  alignas(8) unsigned char words_[Words * 8];
};

}  // namespace thread_system::detail
