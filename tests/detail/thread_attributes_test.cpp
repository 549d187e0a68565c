// The OS attributes of a thread (include/thread_system/detail/thread_attributes.hpp):
// name, OS id, affinity and nice level, each refusal a result error with a code.
// Linux only: elsewhere these report not_supported, which the last test checks.
#include "thread_system/detail/thread_attributes.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

#if defined(__linux__)
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#endif

#if defined(__linux__)
// A stand-in for the kernel's treatment of offline CPUs, which this machine
// may not have: while t_offline_cpu is set, sched_setaffinity() leaves that
// CPU out of any mask that has another one (as the kernel does with CPUs
// that are offline or outside the cpuset) and refuses a mask of it alone
// with EINVAL. This binary's calls reach the real one otherwise.
namespace {
std::atomic<int> t_offline_cpu{-1};
cpu_set_t t_last_asked;  // the mask of the last call made while t_offline_cpu was set (the test's thread only)
}  // namespace

extern "C" int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t* mask) noexcept {
  using real_fn = int (*)(pid_t, size_t, const cpu_set_t*);
  static const auto real = reinterpret_cast<real_fn>(::dlsym(RTLD_NEXT, "sched_setaffinity"));
  const int offline = t_offline_cpu.load(std::memory_order_relaxed);  // set by the test's own thread
  if (offline < 0 || size != sizeof(cpu_set_t)) return real(pid, size, mask);
  t_last_asked = *mask;
  if (!CPU_ISSET(offline, mask)) return real(pid, size, mask);
  cpu_set_t narrowed = *mask;
  CPU_CLR(offline, &narrowed);
  if (CPU_COUNT(&narrowed) == 0) {
    errno = EINVAL;
    return -1;
  }
  return real(pid, size, &narrowed);
}
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

namespace {
std::string shortened(std::string_view name, std::size_t limit) {
  std::array<char, 64> out{};
  const std::size_t n = shortened_thread_name(name, limit, std::span<char>(out.data(), out.size()));
  return std::string(out.data(), n);
}
}  // namespace

// A pool's worker index survives the OS's limit, so the workers of a pool
// with a long name keep distinct names (cut at 15 bytes, every worker of a
// typed pool was "typed_thread_po").
TEST(ThreadAttributes, AShortenedNameKeepsAWorkersIndex) {
  EXPECT_EQ(shortened("thread_pool-3", 15), "thread_pool-3");  // fits: unchanged
  EXPECT_EQ(shortened("typed_thread_pool-0", 15), "typed_thread-0");
  EXPECT_EQ(shortened("typed_thread_pool-12", 15), "typed_thread-12");
  EXPECT_EQ(shortened("typed_thread_pool-255", 15), "typed_threa-255");
  EXPECT_EQ(shortened("a-thread-name-longer-than-fifteen", 15), "a-thread-name-l");  // no index: the prefix
  EXPECT_EQ(shortened("x-12345678901234567", 15), "x-1234567890123");                // the index alone does not fit
  EXPECT_EQ(shortened("----------------7", 15), "---------------");                  // nothing of the rest is left
  EXPECT_EQ(shortened("abcdefghijkl\xc3\xa9-4", 15), "abcdefghijkl-4");              // cut before the character
  EXPECT_EQ(shortened("typed_thread_pool-12", 4), "t-12");
  EXPECT_EQ(shortened("typed_thread_pool-12", 3), "typ");  // no room for any of the rest with the index
  EXPECT_EQ(shortened("", 15), "");
  // A NUL would end the OS's name there: every worker of a pool named
  // "a\0b" was called "a".
  using namespace std::string_view_literals;
  EXPECT_EQ(shortened("a\0b-3"sv, 15), "a?b-3");
  EXPECT_EQ(shortened("a\0bcdefghijklmnopq-12"sv, 15), "a?bcdefghijk-12");
}

TEST(ThreadAttributes, ALongWorkerNameKeepsItsIndexForTheOs) {
  std::string seen;
  std::thread t([&] {
    (void)set_current_thread_name("typed_thread_pool-12");
    seen = current_name();
  });
  t.join();
  EXPECT_EQ(seen, "typed_thread-12");
}

TEST(ThreadAttributes, HardwareThreadsIsTheStandardCountAskedOnce) {
  EXPECT_EQ(hardware_threads(), std::thread::hardware_concurrency());
  EXPECT_EQ(hardware_threads(), hardware_threads());
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

// CPU numbers may have gaps (a machine whose possible CPUs are "0-3,8-11"
// has 8 CPUs, the highest numbered 11): set_affinity() checks a number
// against the highest of the kernel's list, not against the count, which
// refused CPUs 8-11 there as absent.
TEST(ThreadAttributes, TheHighestCpuNumberOfAKernelListIsItsLastNotItsCount) {
  EXPECT_EQ(highest_cpu_number("0-3,8-11\n"), 11);
  EXPECT_EQ(highest_cpu_number("0-1\n"), 1);
  EXPECT_EQ(highest_cpu_number("0"), 0);
  EXPECT_EQ(highest_cpu_number("0,2,4,6"), 6);
  EXPECT_EQ(highest_cpu_number("8-11,0-3"), 11) << "the highest, wherever it stands";
  EXPECT_EQ(highest_cpu_number(""), -1);
  EXPECT_EQ(highest_cpu_number("\n"), -1);
  EXPECT_EQ(highest_cpu_number("99999999999999999999"), -1) << "not a CPU number";
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

// A list with a CPU the kernel cannot use (offline, or outside the cpuset)
// is refused whole: the kernel alone would pin the thread to the rest of
// the list and say nothing.
TEST(ThreadAttributes, AffinityWithAnOfflineCpuIsRefusedAndLeavesTheMaskAsItWas) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> usable;
  const long configured = ::sysconf(_SC_NPROCESSORS_CONF);
  for (int cpu = 0; cpu < configured && cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) usable.push_back(cpu);
  }
  if (usable.size() < 2) GTEST_SKIP() << "needs two CPUs this process may use";
  std::thread t([&] {
    const int tid = current_os_thread_id();
    cpu_set_t before;
    CPU_ZERO(&before);
    ASSERT_EQ(::sched_getaffinity(0, sizeof before, &before), 0);
    t_offline_cpu.store(usable[1], std::memory_order_relaxed);
    const std::vector<int> mixed{usable[0], usable[1]};
    const auto r = set_thread_affinity(tid, mixed);
    // (With two CPUs the narrowed mask and the one put back may be the same
    // set, so what the call last asked the kernel for is what shows that it
    // put the old one back.)
    const cpu_set_t asked_last = t_last_asked;
    const std::vector<int> alone{usable[1]};
    const auto r_alone = set_thread_affinity(tid, alone);
    t_offline_cpu.store(-1, std::memory_order_relaxed);
    ASSERT_FALSE(r) << "the kernel left CPU " << usable[1] << " out";
    EXPECT_EQ(r.error().code(), error_code::invalid_argument);
    EXPECT_NE(r.error().message().find("offline"), std::string::npos) << r.error().message();
    ASSERT_FALSE(r_alone);
    EXPECT_EQ(r_alone.error().code(), error_code::invalid_argument);
    EXPECT_TRUE(CPU_EQUAL(&before, &asked_last)) << "the refused call did not put the thread's CPUs back";
    EXPECT_TRUE(set_thread_affinity(tid, mixed)) << "both CPUs usable again";
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
