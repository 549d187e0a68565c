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

/// Writes to `out` the name a thread gets when the OS keeps at most `limit`
/// bytes (and `out` has room for `limit`; no terminator is written) and
/// returns its length: `name` itself if it fits; else, when `name` ends in
/// "-" and digits (a pool's worker index) and some of the rest fits with
/// them, the rest cut before a character, less trailing '-', '_', '.' and
/// spaces, then the index ("typed_thread_pool-12" in 15 bytes:
/// "typed_thread-12"), so the workers of one pool keep distinct names;
/// else the first utf8_prefix_length(name, limit) bytes. A NUL byte in
/// `name` is written as '?' (the OS would end the name there).
std::size_t shortened_thread_name(std::string_view name, std::size_t limit, std::span<char> out) noexcept;

/// Names the calling thread for the OS (visible in top, gdb, perf). Linux
/// keeps at most 15 bytes, macOS 63; a longer name is shortened by
/// shortened_thread_name(), not refused.
result<void> set_current_thread_name(std::string_view name) noexcept;

/// std::thread::hardware_concurrency() (0 when unknown), asked once per
/// process and kept: glibc reads /sys/devices/system/cpu/online on every
/// call (three system calls, about 5 us on the development machine), which
/// was a tenth of constructing and destroying a 2-worker pool. CPUs brought
/// online or offline later do not change it.
[[nodiscard]] unsigned hardware_threads() noexcept;

/// The calling thread's OS thread id (Linux: gettid()), 0 where there is none.
[[nodiscard]] int current_os_thread_id() noexcept;

/// The highest CPU number of a list in the kernel's format ("0-3,8-11" ->
/// 11; /sys/devices/system/cpu/possible), or -1 for a list with none.
[[nodiscard]] int highest_cpu_number(std::string_view cpu_list) noexcept;

/// Pins the thread with OS id `os_tid` to `cpus` (Linux), all or nothing.
/// Empty, negative or absent CPUs (above the highest possible CPU number:
/// numbers may have gaps, so not the CPU count), and a CPU that is offline
/// or outside the process's cpuset (which the kernel would silently leave
/// out): the mask is left as it was and the result is invalid_argument;
/// masks are as wide as the kernel's, beyond 1024 CPUs too; other
/// platforms: not_supported; a refusal by the OS, or a mask that could not
/// be read back to check it: not_supported with the errno text;
/// resource_exhausted when a mask wider than 1024 CPUs cannot be allocated.
result<void> set_thread_affinity(int os_tid, std::span<const int> cpus) noexcept;

/// Sets the nice level (-20..19) of the thread with OS id `os_tid` (Linux:
/// nice is per thread). Out of range: invalid_argument; raising priority
/// without the privilege: not_supported with the errno text.
result<void> set_thread_nice(int os_tid, int nice) noexcept;

}  // namespace thread_system::detail
