// The OS attributes of a thread (include/thread_system/detail/thread_attributes.hpp):
// name, OS id, affinity and nice level, each refusal a result error with a code.
// Linux only: elsewhere these report not_supported, which the last test checks.
#include "thread_system/detail/thread_attributes.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#endif

namespace thread_system::detail {
namespace {

#if defined(__linux__)
std::string current_name() {
  std::array<char, 64> buf{};
  if (::pthread_getname_np(::pthread_self(), buf.data(), buf.size()) != 0) return "?";
  return buf.data();
}

TEST(ThreadAttributes, ANameIsSetAndALongOneIsTruncatedTo15Bytes) {
  std::string seen_short;
  std::string seen_long;
  bool short_ok = false;
  bool long_ok = false;
  std::thread t([&] {
    short_ok = static_cast<bool>(set_current_thread_name("worker-1"));
    seen_short = current_name();
    long_ok = static_cast<bool>(set_current_thread_name("a-thread-name-longer-than-fifteen"));
    seen_long = current_name();
  });
  t.join();
  EXPECT_TRUE(short_ok);
  EXPECT_EQ(seen_short, "worker-1");
  EXPECT_TRUE(long_ok) << "truncated, not refused";
  EXPECT_EQ(seen_long, "a-thread-name-l");
}

// A long name is cut before a UTF-8 character, not inside one. (Cut at 15
// bytes, "...\xc3" of an "é" was left: invalid UTF-8 in the thread's name.)
TEST(ThreadAttributes, ALongNameIsCutBeforeACharacterNotInsideOne) {
  std::string seen;
  std::thread t([&] {
    (void)set_current_thread_name("abcdefghijklmn\xc3\xa9-worker");  // "é" at bytes 14-15
    seen = current_name();
  });
  t.join();
  EXPECT_EQ(seen, "abcdefghijklmn");
}

TEST(ThreadAttributes, EachThreadHasItsOwnOsId) {
  const int mine = current_os_thread_id();
  int other = 0;
  std::thread t([&] { other = current_os_thread_id(); });
  t.join();
  EXPECT_GT(mine, 0);
  EXPECT_GT(other, 0);
  EXPECT_NE(mine, other);
}

TEST(ThreadAttributes, AffinityToAnAllowedCpuIsSetAndBadListsAreRefused) {
  const int cpu = test::first_allowed_cpu();
  ASSERT_GE(cpu, 0);
  std::thread t([&] {
    const int tid = current_os_thread_id();
    const std::vector<int> one{cpu};
    EXPECT_TRUE(set_thread_affinity(tid, one));
    cpu_set_t now;
    CPU_ZERO(&now);
    ASSERT_EQ(::sched_getaffinity(0, sizeof now, &now), 0);
    EXPECT_EQ(CPU_COUNT(&now), 1);
    EXPECT_TRUE(CPU_ISSET(cpu, &now));

    const auto empty = set_thread_affinity(tid, std::span<const int>{});
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().code(), error_code::invalid_argument);
    const std::vector<int> negative{-1};
    const auto neg = set_thread_affinity(tid, negative);
    ASSERT_FALSE(neg);
    EXPECT_EQ(neg.error().code(), error_code::invalid_argument);
    const std::vector<int> absent{CPU_SETSIZE + 1};
    const auto far = set_thread_affinity(tid, absent);
    ASSERT_FALSE(far);
    EXPECT_EQ(far.error().code(), error_code::invalid_argument);
    EXPECT_NE(far.error().message().find("does not exist"), std::string::npos) << far.error().message();
  });
  t.join();
}

TEST(ThreadAttributes, NiceOutsideItsRangeIsRefusedAndTheCurrentLevelIsAccepted) {
  std::thread t([&] {
    const int tid = current_os_thread_id();
    errno = 0;
    const int level = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
    ASSERT_EQ(errno, 0);
    EXPECT_TRUE(set_thread_nice(tid, level)) << "the level it has needs no privilege";
    for (int bad : {-21, 20, 100}) {
      const auto r = set_thread_nice(tid, bad);
      ASSERT_FALSE(r) << bad;
      EXPECT_EQ(r.error().code(), error_code::invalid_argument) << bad;
    }
    if (level < 19) {  // lowering the priority needs no privilege either
      EXPECT_TRUE(set_thread_nice(tid, level + 1));
      EXPECT_EQ(::getpriority(PRIO_PROCESS, static_cast<id_t>(tid)), level + 1);
    }
  });
  t.join();
}
#else
TEST(ThreadAttributes, AffinityAndNiceAreNotSupportedOffLinux) {
  const std::vector<int> one{0};
  const auto a = set_thread_affinity(current_os_thread_id(), one);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code(), error_code::not_supported);
  const auto n = set_thread_nice(current_os_thread_id(), 0);
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().code(), error_code::not_supported);
}
#endif

}  // namespace
}  // namespace thread_system::detail
