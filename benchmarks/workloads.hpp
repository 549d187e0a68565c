// Workloads shared by the benchmarks: calibrated busy work and percentile helpers.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace thread_system::bench {

/// A counter the workers bump for every job, alone on its cache line. On
/// the producer's stack next to what the producer reads for every
/// submission (the pool object, its own locals) it made every job a
/// cross-core line transfer for the producer (false sharing), whose cost
/// depended on the benchmark's frame layout - on the size of the pool
/// object, say - rather than on the pool: BM_EnqueueThroughput with empty
/// jobs read 0.81x when thread_pool shrank by 48 bytes, with identical loop
/// code. Every per-job counter of the pool benchmarks is one of these.
struct alignas(64) job_counter {
  std::atomic<std::uint64_t> value{0};
};

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

/// Resident memory of this process in bytes (0 when /proc is unavailable).
/// Read from /proc/self/smaps_rollup, a walk of the page tables, because
/// VmRSS in /proc/self/status is approximate: Linux keeps it in per-CPU
/// counters read without summing, so it can lag the truth by tens of pages
/// (here it read 98 KiB for a 4-thread pool whose page tables held 28 KiB
/// more). VmRSS is the fallback on kernels without smaps_rollup (< 4.14).
inline double resident_bytes() {
  const auto read_kib = [](const char* path, const std::string& key) -> double {
    std::ifstream file(path);
    std::string line;
    while (std::getline(file, line)) {
      if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size())) * 1024.0;  // "Rss:   1234 kB"
    }
    return -1.0;
  };
  const double exact = read_kib("/proc/self/smaps_rollup", "Rss:");
  if (exact >= 0) return exact;
  const double approximate = read_kib("/proc/self/status", "VmRSS:");
  return approximate >= 0 ? approximate : 0.0;
}

}  // namespace thread_system::bench
