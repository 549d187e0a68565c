#include <string>

#include "thread_system/detail/thread_naming.hpp"

#if defined(__linux__) || defined(__APPLE__)
#include <pthread.h>
#endif
#if defined(__linux__)
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#endif

namespace thread_system::detail {

result<void> set_current_thread_name(std::string_view name) noexcept {
#if defined(__linux__)
  char buf[16] = {};
  const std::size_t n = name.size() < 15 ? name.size() : 15;
  for (std::size_t i = 0; i < n; ++i) buf[i] = name[i];
  if (::pthread_setname_np(::pthread_self(), buf) != 0) {
    return make_error(error_code::not_supported, "pthread_setname_np failed");
  }
  return {};
#elif defined(__APPLE__)
  std::string copy(name.substr(0, 63));
  if (::pthread_setname_np(copy.c_str()) != 0)
    return make_error(error_code::not_supported, "pthread_setname_np failed");
  return {};
#else
  (void)name;
  return make_error(error_code::not_supported, "thread names are not supported on this platform");
#endif
}

int current_os_thread_id() noexcept {
#if defined(__linux__)
  return static_cast<int>(::syscall(SYS_gettid));
#else
  return 0;
#endif
}

result<void> set_thread_affinity(int os_tid, std::span<const int> cpus) noexcept {
#if defined(__linux__)
  if (cpus.empty()) return make_error(error_code::invalid_argument, "set_affinity: empty CPU list");
  const long online = ::sysconf(_SC_NPROCESSORS_CONF);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE || (online > 0 && cpu >= online)) {
      return make_error(error_code::invalid_argument, "set_affinity: CPU " + std::to_string(cpu) +
                                                          " does not exist (this machine has " +
                                                          std::to_string(online) + ")");
    }
    CPU_SET(cpu, &set);
  }
  if (::sched_setaffinity(os_tid, sizeof set, &set) != 0) {
    const int e = errno;
    return make_error(e == EINVAL ? error_code::invalid_argument : error_code::not_supported,
                      std::string("set_affinity: sched_setaffinity failed: ") + std::strerror(e));
  }
  return {};
#else
  (void)os_tid;
  (void)cpus;
  return make_error(error_code::not_supported, "set_affinity: CPU affinity is not supported on this platform");
#endif
}

result<void> set_thread_nice(int os_tid, int nice) noexcept {
#if defined(__linux__)
  if (nice < -20 || nice > 19) {
    return make_error(error_code::invalid_argument, "set_nice: " + std::to_string(nice) + " is outside -20..19");
  }
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(os_tid), nice) != 0) {
    const int e = errno;
    return make_error(error_code::not_supported, std::string("set_nice: setpriority failed: ") + std::strerror(e));
  }
  return {};
#else
  (void)os_tid;
  (void)nice;
  return make_error(error_code::not_supported, "set_nice: per-thread nice levels are not supported on this platform");
#endif
}

}  // namespace thread_system::detail
