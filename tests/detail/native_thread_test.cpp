// detail/native_thread.hpp: native_thread_handle is the platform's thread
// handle (pthread_t where threads are POSIX threads), the type a pool's
// native_handle() returns, naming the worker's own thread.
#include "thread_system/detail/native_thread.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <type_traits>

#include "thread_system/pools/thread_pool.hpp"

namespace ts = thread_system;

namespace {

TEST(NativeThread, IsThePlatformsHandle) {
#if defined(THREAD_SYSTEM_DETAIL_POSIX_THREADS)
  static_assert(std::is_same_v<ts::detail::native_thread_handle, pthread_t>);
#else
  static_assert(std::is_same_v<ts::detail::native_thread_handle, std::thread::native_handle_type>);
#endif
  static_assert(std::is_same_v<ts::native_thread_handle, ts::detail::native_thread_handle>);
  SUCCEED();
}

#if defined(THREAD_SYSTEM_DETAIL_POSIX_THREADS)
TEST(NativeThread, APoolsHandleNamesTheWorkersOwnThread) {
  ts::thread_pool pool{1};
  pthread_t inside{};
  pool.submit([&] { inside = pthread_self(); }).get();  // get(): the job's write happens-before this
  auto handle = pool.native_handle(0);
  ASSERT_TRUE(handle) << handle.error().message();
  EXPECT_NE(pthread_equal(*handle, inside), 0);
  EXPECT_EQ(pthread_equal(*handle, pthread_self()), 0);
}
#endif

}  // namespace
