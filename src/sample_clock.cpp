// Calibration of detail::sample_clock (see the header).
#include "thread_system/detail/sample_clock.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <fcntl.h>
#include <unistd.h>
#endif

namespace thread_system::detail {
namespace {

#if THREAD_SYSTEM_SAMPLE_CLOCK_TSC
// Whether the counter may serve as a clock here (see the header).
bool counter_is_trusted() {
  const char* env = std::getenv("THREAD_SYSTEM_SAMPLE_CLOCK");
  if (env != nullptr && std::strcmp(env, "steady") == 0) return false;
#if defined(__linux__)
  const int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char name[32] = {};
  const ssize_t n = ::read(fd, name, sizeof name - 1);
  ::close(fd);
  return n >= 3 && std::strncmp(name, "tsc", 3) == 0 && (n == 3 || name[3] == '\n');
#else
  return false;
#endif
}

// The first reading of the calibration: both clocks, taken once.
struct calibration_start {
  bool trusted = false;
  std::uint64_t ticks = 0;
  std::uint64_t ns = 0;
};

// steady_clock between two counter reads; the counter's midpoint is taken
// as simultaneous with it (an error of half a clock_gettime call).
void read_both(std::uint64_t& ticks, std::uint64_t& ns) noexcept {
  const std::uint64_t before = __rdtsc();
  ns = sample_clock::steady_ns();
  const std::uint64_t after = __rdtsc();
  ticks = before + (after - before) / 2;
}

const calibration_start& start() {
  // Thread-safe static initialisation: one thread decides and reads.
  static const calibration_start s = [] {
    calibration_start c;
    c.trusted = counter_is_trusted();
    if (c.trusted) read_both(c.ticks, c.ns);
    return c;
  }();
  return s;
}

// One thread finishes the calibration (the others keep reading steady_clock
// meanwhile).
std::atomic<bool> finishing{false};
#endif

}  // namespace

std::uint64_t sample_clock::slow_now_ns() noexcept {
#if THREAD_SYSTEM_SAMPLE_CLOCK_TSC
  // relaxed: mode is only an early-out here; the acquire in now_ns() is the
  // load that reads the rate through it.
  if (state_.mode.load(std::memory_order_relaxed) == source::steady) return steady_ns();
  const calibration_start& s = start();
  if (!s.trusted) {
    // relaxed: nothing is published with `steady` (every thread that stores
    // it stores the same value).
    state_.mode.store(source::steady, std::memory_order_relaxed);
    return steady_ns();
  }
  std::uint64_t ticks = 0;
  std::uint64_t ns = 0;
  read_both(ticks, ns);
  if (ns - s.ns < calibration_ns || ticks <= s.ticks) return ns;
  // acq_rel: picks one winner; what it writes is published by the release
  // store below, so this exchange orders nothing else.
  if (finishing.exchange(true, std::memory_order_acq_rel)) return ns;
  __extension__ typedef unsigned __int128 uint128;
  const auto mult = static_cast<std::uint64_t>((static_cast<uint128>(ns - s.ns) << 32) / (ticks - s.ticks));
  state_.base_ticks = ticks;
  state_.base_ns = ns;
  state_.mult = mult;
  // release: publishes base_ticks/base_ns/mult; pairs with the acquire in
  // now_ns() and current_source().
  state_.mode.store(source::tsc, std::memory_order_release);
  return ns;
#else
  return steady_ns();
#endif
}

}  // namespace thread_system::detail
