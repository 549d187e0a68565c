// A log call site in a header, compiled into two test translation units
// (logger_deferred_test.cpp, logger_header_tu_test.cpp): both must produce
// the same text and the same source location.
#pragma once

#include "thread_system/logger/logger.hpp"

namespace thread_system::test {

inline void log_from_header(logger& log, int value) { log.info("from the header: {} ({})", value, "text"); }

}  // namespace thread_system::test
