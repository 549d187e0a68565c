// console_sink, file_sink and rotating_file_sink; contracts in their headers.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <system_error>

#include "thread_system/logger/sinks/console_sink.hpp"
#include "thread_system/logger/sinks/file_sink.hpp"
#include "thread_system/logger/sinks/rotating_file_sink.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace thread_system {

namespace {

std::string_view colour_of(log_level level) noexcept {
  switch (level) {
    case log_level::trace:
      return "\x1b[90m";  // grey
    case log_level::debug:
      return "\x1b[36m";  // cyan
    case log_level::info:
      return "\x1b[32m";  // green
    case log_level::warn:
      return "\x1b[33m\x1b[1m";  // bold yellow
    case log_level::error:
      return "\x1b[31m\x1b[1m";  // bold red
    case log_level::critical:
      return "\x1b[1m\x1b[41m";  // bold on red
    case log_level::off:
      break;
  }
  return {};
}
constexpr std::string_view colour_reset = "\x1b[0m";

std::string system_reason(int err) { return std::error_code(err, std::generic_category()).message(); }

// The sinks are used by one writer thread at a time: the stream's own lock
// would be pure overhead (glibc: fwrite_unlocked).
std::size_t write_unlocked(const char* data, std::size_t size, std::FILE* file) {
#if defined(__GLIBC__)
  return ::fwrite_unlocked(data, 1, size, file);
#else
  return std::fwrite(data, 1, size, file);
#endif
}

result<void> write_all(std::FILE* file, std::string_view text, const std::filesystem::path& path) {
  if (write_unlocked(text.data(), text.size(), file) != text.size()) {
    const int err = errno;
    return make_error(error_code::resource_exhausted, "cannot write " + path.string() + ": " + system_reason(err));
  }
  return {};
}

result<void> flush_file(std::FILE* file, const std::filesystem::path& path) {
  if (std::fflush(file) != 0) {
    const int err = errno;
    return make_error(error_code::resource_exhausted, "cannot flush " + path.string() + ": " + system_reason(err));
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------
// console
// ---------------------------------------------------------------------------

bool is_terminal(std::FILE* stream) noexcept {
#if defined(__unix__) || defined(__APPLE__)
  if (stream == nullptr) return false;
  const int fd = ::fileno(stream);
  return fd >= 0 && ::isatty(fd) == 1;
#else
  (void)stream;
  return false;
#endif
}

console_sink::console_sink(std::FILE* stream, colour_mode mode)
    : stream_(stream != nullptr ? stream : stdout),
      colour_(mode == colour_mode::always || (mode == colour_mode::automatic && is_terminal(stream_))) {}

result<void> console_sink::write(const log_entry& entry) {
  const std::string_view line = entry.line();
  if (!colour_) {
    if (std::fwrite(line.data(), 1, line.size(), stream_) != line.size()) {
      return make_error(error_code::resource_exhausted, "console: write failed");
    }
    return {};
  }
  // One fwrite per line even with colour, so lines of loggers sharing the
  // stream do not interleave.
  const std::string_view colour = colour_of(entry.record().level);
  std::string coloured;
  coloured.reserve(line.size() + colour.size() + colour_reset.size());
  coloured.append(line.substr(0, entry.level_begin()));
  coloured.append(colour);
  coloured.append(line.substr(entry.level_begin(), entry.level_end() - entry.level_begin()));
  coloured.append(colour_reset);
  coloured.append(line.substr(entry.level_end()));
  if (std::fwrite(coloured.data(), 1, coloured.size(), stream_) != coloured.size()) {
    return make_error(error_code::resource_exhausted, "console: write failed");
  }
  return {};
}

result<void> console_sink::flush() {
  if (std::fflush(stream_) != 0) return make_error(error_code::resource_exhausted, "console: flush failed");
  return {};
}

// ---------------------------------------------------------------------------
// file
// ---------------------------------------------------------------------------

namespace detail {
result<std::FILE*> open_log_file(const std::filesystem::path& path, bool truncate) {
  // A NUL inside the path names a file no call can open: fopen() would stop
  // at it and open (or truncate) the file its prefix names.
  if (path.native().find('\0') != std::filesystem::path::string_type::npos) {
    return make_error(error_code::invalid_argument, "cannot open a log file whose path contains a NUL character");
  }
  std::FILE* file = std::fopen(path.c_str(), truncate ? "wb" : "ab");
  if (file == nullptr) {
    const int err = errno;
    return make_error(err == ENOENT ? error_code::not_found : error_code::resource_exhausted,
                      "cannot open " + path.string() + ": " + system_reason(err));
  }
  // Full buffering; flush() pushes the buffer out. Failure just keeps the default buffer.
  (void)std::setvbuf(file, nullptr, _IOFBF, std::size_t{64} * 1024);
  return file;
}
}  // namespace detail

result<std::shared_ptr<file_sink>> file_sink::create(const std::filesystem::path& path, file_open_mode mode) {
  try {
    auto opened = detail::open_log_file(path, mode == file_open_mode::truncate);
    if (!opened) return opened.error();
    // The file is the guard's until the sink owns it (which closes it even
    // when the shared_ptr's control block cannot be allocated).
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(*opened, &std::fclose);
    auto* sink = new file_sink(path, file.get());
    (void)file.release();
    return std::shared_ptr<file_sink>(sink);
  } catch (const std::bad_alloc&) {
    return detail::out_of_memory_error();
  }
}

file_sink::~file_sink() {
  if (file_ != nullptr) (void)std::fclose(file_);
}

result<void> file_sink::write(const log_entry& entry) {
  const std::string_view line = entry.line();
  bytes_ += line.size();
  return write_all(file_, line, path_);
}

result<void> file_sink::flush() { return flush_file(file_, path_); }

// ---------------------------------------------------------------------------
// rotating file
// ---------------------------------------------------------------------------

result<std::shared_ptr<rotating_file_sink>> rotating_file_sink::create(rotating_file_options options) {
  try {
    return create_unguarded(std::move(options));
  } catch (const std::bad_alloc&) {  // the sink (and its file, by its destructor) is gone
    return detail::out_of_memory_error();
  }
}

result<std::shared_ptr<rotating_file_sink>> rotating_file_sink::create_unguarded(rotating_file_options options) {
  if (options.max_files == 0)
    return make_error(error_code::invalid_argument, "rotating_file_sink: max_files must be >= 1");
  if (options.path.empty()) return make_error(error_code::invalid_argument, "rotating_file_sink: empty path");
  if (options.period.count() < 0)
    return make_error(error_code::invalid_argument, "rotating_file_sink: negative period");
  std::shared_ptr<rotating_file_sink> sink(new rotating_file_sink(std::move(options)));
  auto opened = detail::open_log_file(sink->options_.path, false);
  if (!opened) return opened.error();
  sink->file_ = *opened;
  std::error_code ec;
  const auto existing = std::filesystem::file_size(sink->options_.path, ec);
  sink->size_ = ec ? 0 : existing;
  sink->period_start_ = sink->now();
  // Rotated files already present (a previous run): rotation shifts only
  // these and one more, so it costs O(files present), not O(max_files).
  while (sink->rotated_present_ + 1 < sink->options_.max_files &&
         std::filesystem::exists(sink->file_name(sink->rotated_present_ + 1), ec)) {
    ++sink->rotated_present_;
  }
  return sink;
}

rotating_file_sink::~rotating_file_sink() {
  if (file_ != nullptr) (void)std::fclose(file_);
}

std::filesystem::path rotating_file_sink::file_name(std::size_t index) const {
  if (index == 0) return options_.path;
  std::filesystem::path name = options_.path;
  const std::string extension = name.extension().string();
  name.replace_extension();
  std::string suffix(1, '.');
  suffix.append(std::to_string(index));
  suffix.append(extension);
  name += suffix;
  return name;
}

result<void> rotating_file_sink::write(const log_entry& entry) {
  const std::string_view line = entry.line();
  if (file_ == nullptr) {
    // The last rotation could open neither the new file nor the old one (the
    // directory is gone): open it again first, so that a rotation below
    // starts from an open file of known size (it closed a null FILE* before).
    if (auto reopened = open_for_append(); !reopened) return reopened;
  }
  result<void> outcome;
  bool rotate_now = false;
  if (options_.period.count() > 0) {
    const auto current = now();
    if (current - period_start_ >= options_.period) {
      rotate_now = true;
      // The next period starts at the last boundary at or before now.
      const auto periods = (current - period_start_) / options_.period;
      period_start_ += periods * options_.period;
    }
  }
  // After a rotation that could not move the file away, the next try waits
  // until the file has grown by another max_bytes (kept_bytes_: its size
  // then), instead of renaming, closing and reopening on every write.
  if (options_.max_bytes != 0 && size_ != 0 && size_ - kept_bytes_ + line.size() > options_.max_bytes) {
    rotate_now = true;
  }
  if (rotate_now) outcome = rotate();
  if (file_ == nullptr) {
    // A rotation closed the file and could not open it again (nor the old
    // one), or threw in between: try the old one again, else refuse.
    if (auto reopened = open_for_append(); !reopened) return reopened;
  }
  if (auto w = write_all(file_, line, options_.path); !w) return w;
  size_ += line.size();
  return outcome;
}

// Opens app.log to append to it: after a rotation that did not move it away,
// or that left no file open. Its size now counts (maybe another process
// wrote to it), and a size rotation waits until it has grown by another
// max_bytes.
result<void> rotating_file_sink::open_for_append() {
  auto reopened = detail::open_log_file(options_.path, false);
  if (!reopened) return reopened.error();
  file_ = *reopened;
  std::error_code ec;
  const auto existing = std::filesystem::file_size(options_.path, ec);
  size_ = ec ? 0 : existing;
  kept_bytes_ = size_;
  return {};
}

result<void> rotating_file_sink::rotate() {
  // Close first so that the renamed file is complete.
  if (file_ != nullptr) {
    (void)std::fflush(file_);
    (void)std::fclose(file_);
    file_ = nullptr;
  }
  result<void> outcome;
  bool active_moved = options_.max_files == 1;  // with one file, rotation truncates it
  const std::size_t highest = rotated_present_ + 1 < options_.max_files ? rotated_present_ + 1 : options_.max_files - 1;
  for (std::size_t i = highest; i >= 1; --i) {
    const std::filesystem::path from = file_name(i - 1);
    std::error_code ec;
    if (!std::filesystem::exists(from, ec)) continue;
    std::filesystem::rename(from, file_name(i), ec);  // replaces the target
    if (ec) {
      // Stop shifting: the next rename would replace the file that could
      // not move (its records lost). app.log stays and is appended to.
      outcome = make_error(error_code::resource_exhausted,
                           "rotating_file_sink: cannot rename " + from.string() + ": " + ec.message());
      break;
    }
    if (i == 1) {
      active_moved = true;
    }
  }
  if (active_moved) {
    // The files moved (whatever the opens below do): the next rotation
    // shifts them all, none is overwritten.
    ++rotations_;
    rotated_present_ = highest;
  }
  // Truncate only a file whose content was moved away; otherwise (or when
  // the fresh file cannot be opened) keep appending to it and report why.
  if (active_moved) {
    auto opened = detail::open_log_file(options_.path, true);
    if (opened) {
      file_ = *opened;
      size_ = 0;
      kept_bytes_ = 0;
      return outcome;
    }
    outcome = opened.error();
  }
  if (auto appending = open_for_append(); !appending) return appending;
  return outcome;
}

result<void> rotating_file_sink::flush() {
  if (file_ == nullptr) {  // see write(): nothing was written since
    return make_error(error_code::resource_exhausted, "rotating_file_sink: no open file to flush");
  }
  return flush_file(file_, options_.path);
}

}  // namespace thread_system
