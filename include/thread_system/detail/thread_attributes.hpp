// The OS attributes of a thread: its name, its OS id, the CPUs it may run
// on and its nice level, and the machine's number of hardware threads
// (implemented in src/platform.cpp). Every function is noexcept and reports
// a refusal as a result error with the OS's reason.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "thread_system/core/error.hpp"

namespace thread_system::detail {

/// The length of the longest prefix of `name` of at most `limit` bytes that
/// ends before a character, not inside one: a byte that continues a UTF-8
/// sequence (10xxxxxx) is never the first one left out. (Text that is not
/// UTF-8 is cut where that rule puts it.)
[[nodiscard]] std::size_t utf8_prefix_length(std::string_view name, std::size_t limit) noexcept;

/// Names the calling thread for the OS (visible in top, gdb, perf). Linux
/// keeps at most 15 bytes; longer names are cut before a character
/// (utf8_prefix_length()), not refused.
result<void> set_current_thread_name(std::string_view name) noexcept;

/// std::thread::hardware_concurrency() (0 when unknown), asked once per
/// process and kept: glibc reads /sys/devices/system/cpu/online on every
/// call (three system calls, about 5 us on the development machine), which
/// was a tenth of constructing and destroying a 2-worker pool. CPUs brought
/// online or offline later do not change it.
[[nodiscard]] unsigned hardware_threads() noexcept;

/// The calling thread's OS thread id (Linux: gettid()), 0 where there is none.
[[nodiscard]] int current_os_thread_id() noexcept;

/// Pins the thread with OS id `os_tid` to `cpus` (Linux), all or nothing.
/// Empty, negative or absent CPUs, and a CPU that is offline or outside the
/// process's cpuset (which the kernel would silently leave out): the mask
/// is left as it was and the result is invalid_argument; other platforms:
/// not_supported; a refusal by the OS: the errno text.
result<void> set_thread_affinity(int os_tid, std::span<const int> cpus) noexcept;

/// Sets the nice level (-20..19) of the thread with OS id `os_tid` (Linux:
/// nice is per thread). Out of range: invalid_argument; raising priority
/// without the privilege: not_supported with the errno text.
result<void> set_thread_nice(int os_tid, int nice) noexcept;

}  // namespace thread_system::detail
