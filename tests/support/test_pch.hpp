// Precompiled for every test binary (tests/CMakeLists.txt,
// THREAD_SYSTEM_TEST_PCH): GoogleTest and the standard headers most tests
// include. Parsing GoogleTest alone costs a test file about as much as its
// own code at -O1, and the suite is compiled by six presets in CI. Only
// headers from outside the project belong here: a library header would hide
// a missing include in a test, and every header edit would rebuild the PCH.
// That each public header compiles on its own is checked separately
// (scripts/check-headers-standalone.sh).
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>
