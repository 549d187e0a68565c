// pool_options: the settings of a thread_pool, for both constructors that
// take them (`thread_pool pool{n, options}`, started; seed style
// `thread_pool{name, options}`, not started), and error_handler, the
// callback that receives the exception of a failed fire-and-forget job.
//
//   pool_options opt;
//   opt.name = "io";
//   opt.queue = pool_queue::sharded;
//   opt.backpressure = backpressure::block_for(1024, std::chrono::milliseconds(5));
//   thread_pool pool{4, opt};
//
// Every field has a default that gives a working pool; the constructor
// checks them (README's refusal table says what it refuses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "thread_system/detail/chrono.hpp"
#include "thread_system/detail/functional.hpp"
#include "thread_system/detail/spin.hpp"
#include "thread_system/pools/backpressure.hpp"
#include "thread_system/queues/queue_kind.hpp"

namespace thread_system {

/// Receives the exception of a failed fire-and-forget job. Called on the
/// worker thread that ran the job; must be thread-safe. Exceptions it throws
/// are swallowed (and counted in `failed` already).
using error_handler = std::function<void(std::exception_ptr)>;

/// Settings of a thread_pool (both constructors that take them).
struct pool_options {
  /// Pool name: in error messages, and worker threads are named "<name>-<index>"
  /// (for the OS, which keeps 15 bytes on Linux, a long name is cut before
  /// the index: "typed_thread_pool-12" shows as "typed_thread-12").
  /// Not used by thread_pool(name, options), whose `name` wins.
  std::string name = "thread_pool";
  /// Null: print one line per failure to stderr.
  error_handler on_error{};
  /// The queue for jobs submitted from outside the pool's workers.
  pool_queue queue = pool_queue::mutex;
  /// The mutex queue's segment size in jobs (it adds segments on demand;
  /// any value is accepted, clamped to [16, 2^19] jobs: two_lock_job_queue);
  /// the bounded queue's fixed capacity, rounded up to a power of two (a
  /// submission into a full one is refused with `queue_full`; 0 or a value
  /// above 2^62 makes the constructor throw invalid_argument, one whose ring
  /// cannot be allocated error_exception{resource_exhausted}). Other kinds ignore it.
  std::size_t initial_queue_capacity = 1024;
  /// Latency sampling: every Nth job a thread submits is stamped, and the
  /// worker that runs it records its enqueue->start wait and its run time
  /// (see latency()). 0 turns sampling off; 1 times every job. A sampled
  /// job costs three steady_clock readings and two histogram records; on
  /// empty jobs, timing every one costs about 35 ns of wall time per job
  /// (docs/PERFORMANCE.md), so the default of 32 costs about 1 ns per job
  /// (~2.5% of an empty job's ~43 ns; less for any real work) and still
  /// samples tens of thousands of jobs per second from a busy pool.
  std::uint32_t latency_sample_every = 32;
  /// A bound on queued jobs and the policy when it is reached (see
  /// backpressure.hpp). Default: unbounded.
  thread_system::backpressure backpressure{};
  /// Stack size of each worker thread in bytes; 0: the platform default.
  /// Smaller sizes are raised to 64 KiB of usable stack, plus the
  /// program's static thread-local storage that glibc takes from a thread's
  /// stack (the library's own paths need that much, detail/os_thread.hpp); above PTRDIFF_MAX (also once rounded up
  /// to whole pages) the constructor
  /// throws error_exception{invalid_argument}.
  /// See "Workers and their threads" in thread_pool.hpp for the nesting it allows.
  std::size_t worker_stack_size = 0;
  /// How long a worker out of work keeps looking for more (a few
  /// microseconds of spinning, then polls with the CPU yielded between
  /// them) before it parks: the OpenMP `KMP_BLOCKTIME` / `GOMP_SPINCOUNT`
  /// trade-off. A job submitted within this time of a worker's last one
  /// starts without a futex wake-up (0.5-0.7 us instead of ~4 us submit to
  /// start on the development machine, docs/PERFORMANCE.md), at the price
  /// of CPU time: every idle worker keeps a CPU busy for up to this long
  /// after its last job (yielding it to any thread that wants it). 0 parks
  /// right after the spin; negative: the constructor throws
  /// `invalid_argument`. Longer than a pool lives is allowed (workers never
  /// park; stop(), resize() and pause() still reach them).
  std::chrono::nanoseconds idle_wait{detail::idle_yield_ns};
};

}  // namespace thread_system
