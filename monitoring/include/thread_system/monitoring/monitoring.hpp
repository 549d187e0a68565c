// thread_system::monitoring: metrics, sampling, health and export for pools.
// Umbrella header; see docs/MONITORING.md.
#pragma once

#include "thread_system/diagnostics/latency_histogram.hpp"
#include "thread_system/monitoring/collect.hpp"
#include "thread_system/monitoring/health.hpp"
#include "thread_system/monitoring/json.hpp"
#include "thread_system/monitoring/metrics.hpp"
#include "thread_system/monitoring/pool_monitor.hpp"
#include "thread_system/monitoring/prometheus.hpp"
