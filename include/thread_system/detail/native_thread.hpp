// The platform's thread handle type (pthread_t where threads are POSIX
// threads, std::thread's native_handle_type elsewhere): what a pool's
// native_handle() returns, without the thread wrapper (detail/os_thread.hpp).
#pragma once

#if defined(__linux__) || defined(__APPLE__)
#include <pthread.h>
#define THREAD_SYSTEM_DETAIL_POSIX_THREADS 1
#else
#include <thread>
#endif

namespace thread_system::detail {

/// The platform's thread handle.
#if defined(THREAD_SYSTEM_DETAIL_POSIX_THREADS)
using native_thread_handle = pthread_t;
#else
using native_thread_handle = std::thread::native_handle_type;
#endif

}  // namespace thread_system::detail
