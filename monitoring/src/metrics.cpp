#include "thread_system/monitoring/metrics.hpp"

namespace thread_system::monitoring {

latency_summary summarise(const histogram_snapshot& h) noexcept {
  latency_summary s;
  s.count = h.count;
  if (h.count == 0) return s;
  s.mean_ns = h.mean();
  s.min_ns = h.min;
  s.p50_ns = h.percentile(0.50);
  s.p95_ns = h.percentile(0.95);
  s.p99_ns = h.percentile(0.99);
  s.p999_ns = h.percentile(0.999);
  s.max_ns = h.max;
  return s;
}

double pool_metrics::utilisation() const noexcept {
  if (workers.empty()) return 0.0;
  double total = 0.0;
  for (const worker_metrics& w : workers) total += w.utilisation;
  return total / static_cast<double>(workers.size());
}

}  // namespace thread_system::monitoring
