// line_formatter and current_thread_id(); see log_record.hpp.
#include "thread_system/logger/log_record.hpp"

#include <fmt/format.h>

#include <ctime>
#include <functional>
#include <thread>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace thread_system {

std::uint32_t current_thread_id() noexcept {
  thread_local const std::uint32_t id = [] {
#if defined(__linux__)
    return static_cast<std::uint32_t>(::syscall(SYS_gettid));
#else
    return static_cast<std::uint32_t>(std::hash<std::thread::id>{}(std::this_thread::get_id()));
#endif
  }();
  return id;
}

line_formatter::line_formatter() = default;

std::string_view line_formatter::format(const log_record& record, std::size_t& level_begin, std::size_t& level_end) {
  using namespace std::chrono;
  const std::int64_t ns = duration_cast<nanoseconds>(record.time.time_since_epoch()).count();
  // Floor divisions (before the epoch too): the microsecond the time falls
  // in, then its second.
  const auto floor_div = [](std::int64_t a, std::int64_t b) { return a / b - (a % b < 0 ? 1 : 0); };
  const std::int64_t all_micros = floor_div(ns, 1000);
  const std::int64_t second = floor_div(all_micros, 1'000'000);
  std::int64_t micros = all_micros - second * 1'000'000;
  if (second != cached_second_) {
    const std::time_t t = static_cast<std::time_t>(second);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    const auto end = fmt::format_to_n(cached_prefix_, sizeof(cached_prefix_) - 1, "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
                                      tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    *end.out = '\0';
    cached_prefix_length_ = static_cast<std::size_t>(end.out - cached_prefix_);
    cached_second_ = second;
  }
  // Appends without a format-string pass: this runs once per record on the
  // writer thread and bounds its throughput.
  auto append = [this](std::string_view text) { line_.append(text.data(), text.data() + text.size()); };
  line_.clear();
  append(std::string_view(cached_prefix_, cached_prefix_length_));
  char fraction[10] = {'.', '0', '0', '0', '0', '0', '0', 'Z', ' ', '['};
  for (int i = 6; i >= 1 && micros != 0; --i, micros /= 10) fraction[i] = static_cast<char>('0' + micros % 10);
  append(std::string_view(fraction, sizeof fraction));
  level_begin = line_.size();
  append(to_string(record.level));
  level_end = line_.size();
  append("] [");
  append(fmt::format_int(record.thread_id).c_str());
  append("] ");
  if (record.file != nullptr && record.file[0] != '\0') {
    if (record.file != cached_file_) {  // most records come from a few call sites: skip the strlen
      std::string_view file = record.file;
      if (const auto slash = file.find_last_of('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
      cached_file_ = record.file;
      cached_base_name_ = file;
    }
    line_.push_back('[');
    append(cached_base_name_);
    line_.push_back(':');
    append(fmt::format_int(record.line).c_str());
    append("] ");
  }
  append(record.message);
  if (record.truncated) append(" [truncated]");
  line_.push_back('\n');
  return std::string_view(line_.data(), line_.size());
}

}  // namespace thread_system
