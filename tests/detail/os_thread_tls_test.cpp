// os_thread (detail/os_thread.hpp) in a program with a large static
// thread-local storage. A binary of its own: the thread_local below makes
// every thread of the program carry 50 000 bytes more, which glibc takes
// from the stack size each thread asked for.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <stdexcept>

#include "thread_system/detail/os_thread.hpp"
#include "thread_system/pools/thread_pool.hpp"

#if defined(__linux__)
#include <pthread.h>
#endif

namespace {

using thread_system::detail::os_thread;

constexpr std::size_t tls_bytes = 50'000;
// volatile: the stores below must stay (a thread_local only written could go).
thread_local std::array<volatile unsigned char, tls_bytes> g_tls_block{};

constexpr std::size_t stack_use = 40 * 1024;

// Uses about stack_use bytes of stack, touching every page (past the
// stack's end that is SIGSEGV).
[[gnu::noinline]] unsigned use_stack() {
  std::array<volatile unsigned char, stack_use> frame;
  for (std::size_t i = 0; i < frame.size(); i += 256) frame[i] = static_cast<unsigned char>(i / 256 + 1);
  unsigned sum = 0;
  for (std::size_t i = 0; i < frame.size(); i += 256) sum += frame[i];
  return sum;
}

#if defined(__linux__)
std::size_t current_stack_size() {
  std::size_t size = 0;
  pthread_attr_t attr;
  if (::pthread_getattr_np(::pthread_self(), &attr) == 0) {
    (void)::pthread_attr_getstacksize(&attr, &size);
    (void)::pthread_attr_destroy(&attr);
  }
  return size;
}

// The smallest stack (any size below the floor) holds 64 KiB beside the
// program's static TLS: glibc keeps that TLS in the stack's top and took it
// from the 64 KiB the floor asked for, leaving about 10 KiB here (a
// failing job's default report overflowed that: SIGSEGV), and refused the
// thread (EINVAL) once the TLS passed about 60 KB.
TEST(OsThreadWithLargeTls, TheSmallestStackHoldsTheFloorBesideTheProgramsThreadLocalStorage) {
  std::size_t seen = 0;
  unsigned used = 0;
  auto t = os_thread::start(
      [&] {
        g_tls_block[0] = 1;  // the block is this thread's
        seen = current_stack_size();
        // Only with room for it (without, the test fails below, not by a crash).
        if (seen >= os_thread::library_min_stack + tls_bytes) used = use_stack();
      },
      1);
  ASSERT_TRUE(t) << t.error().to_string();
  t->join();
  EXPECT_GE(seen, os_thread::library_min_stack + tls_bytes);
  EXPECT_GE(os_thread::min_stack_size(), os_thread::library_min_stack + tls_bytes);
  // What a helping wait's floor falls back on when the stack's bounds cannot
  // be looked up: the floor's usable part, the TLS left out.
  EXPECT_GE(os_thread::usable_stack_size(1), os_thread::library_min_stack);
  EXPECT_LT(os_thread::usable_stack_size(1), os_thread::min_stack_size());
  EXPECT_NE(used, 0U);
}
#endif

// A pool worker with the smallest stack reports a failing job (the default
// report to stderr formats through glibc's 8 KiB buffer on the stack) and
// goes on running jobs.
TEST(OsThreadWithLargeTls, APoolWorkerWithTheSmallestStackReportsAFailingJob) {
  thread_system::pool_options options;
  options.worker_stack_size = 1;
  options.name = "small-stack";
  thread_system::thread_pool pool{1, options};
  ASSERT_TRUE(pool.enqueue([] {
    g_tls_block[1] = 1;
    throw std::runtime_error("a failure the default handler reports (expected in this test's output)");
  }));
  auto f = pool.submit([] { return use_stack() != 0 ? 42 : 0; });
  EXPECT_EQ(f.get(), 42);
  pool.wait_idle();
  EXPECT_EQ(pool.get_statistics().failed, 1U);
}

}  // namespace
