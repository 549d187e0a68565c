#include <string>

#include "thread_system/detail/thread_naming.hpp"

#if defined(__linux__) || defined(__APPLE__)
#include <pthread.h>
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

}  // namespace thread_system::detail
