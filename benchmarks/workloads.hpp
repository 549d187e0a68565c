// Workloads shared by the benchmarks: calibrated busy work and percentile helpers.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace thread_system::bench {

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// Busy work for about `ns` nanoseconds of this thread's time (a spin on the
/// clock, not a sleep: the CPU is really occupied, as in the seed's "1 us job").
inline void spin_for_ns(std::uint64_t ns) {
  if (ns == 0) return;
  const std::uint64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

/// The p-th percentile (0..100) of samples, nearest-rank. Sorts in place.
inline double percentile(std::vector<double>& samples, double p) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(rank, samples.size() - 1)];
}

}  // namespace thread_system::bench
