// The std::chrono clocks, durations, time points and literals, without the
// calendar, time-zone and formatting parts. In C++20 mode libstdc++'s
// <chrono> also includes <sstream> (for operator<< and std::format of
// durations), which is about a third of a second of every translation unit
// on a 2-core machine (`-fsyntax-only`, GCC 12) for parts no header of this
// library uses. Its <bits/chrono.h> holds exactly the part used here
// (duration, time_point, steady_clock, system_clock, duration_cast,
// chrono_literals); other standard libraries get <chrono>. Code that uses
// the calendar or streams durations includes <chrono> itself, as the
// standard asks of it anyway.
#pragma once

#include <version>  // defines __GLIBCXX__ for the test below

#if defined(__GLIBCXX__) && __has_include(<bits/chrono.h>)
#include <bits/chrono.h>  // IWYU pragma: export
#else
#include <chrono>  // IWYU pragma: export
#endif
