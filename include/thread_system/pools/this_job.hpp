// this_job: moved to sync/this_job.hpp (it depends only on cancellation, and
// the coroutine support below the pools needs it); this header stays for
// code that includes it from here.
#pragma once

#include "thread_system/sync/this_job.hpp"
