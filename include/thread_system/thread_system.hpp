// Umbrella header: everything in Thread System's core library.
#pragma once

#include "thread_system/core/error.hpp"
#include "thread_system/core/job.hpp"
#include "thread_system/core/job_function.hpp"
#include "thread_system/core/thread_base.hpp"
#include "thread_system/pools/stop_mode.hpp"
#include "thread_system/pools/thread_pool.hpp"
#include "thread_system/pools/thread_worker.hpp"
#include "thread_system/queues/job_queue.hpp"
#include "thread_system/scheduler/worker_statistics.hpp"
#include "thread_system/sync/event_count.hpp"
