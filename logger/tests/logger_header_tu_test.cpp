// The second translation unit that uses log_call_in_header.hpp's call site
// (see LoggerDeferred.ACallSiteInAHeaderWorksFromSeveralTranslationUnits).
#include "log_call_in_header.hpp"

void log_from_second_translation_unit(thread_system::logger& log, int value) {
  thread_system::test::log_from_header(log, value);
}
