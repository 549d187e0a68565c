// file_sink: appends each record's line to a file.
//
// Created by file_sink::create(path, mode), which reports a file that cannot
// be opened as an error (not_found when a directory on the path is missing,
// resource_exhausted otherwise, with the system's reason; out of memory,
// resource_exhausted, the file closed again) instead of throwing. Output is buffered (64 KiB); flush() hands it to the
// kernel (fflush), it does not fsync.
//
// Thread-safety: write() and flush() from one thread at a time (one logger's
// writer thread, or a thread in its flush()). The file is closed when the sink is destroyed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "thread_system/logger/sink.hpp"

namespace thread_system {

/// Whether file_sink::create() appends to an existing file or empties it first.
enum class file_open_mode { append, truncate };

/// Appends each record's line to a file, buffered (64 KiB); flush() hands the buffer to the kernel (no fsync).
class file_sink final : public log_sink {
 public:
  /// Opens `path` for writing per `mode`. Errors: `invalid_argument` for a path containing a NUL character,
  /// `not_found` when a directory on the path is missing, `resource_exhausted` otherwise (with the system's reason).
  [[nodiscard]] static result<std::shared_ptr<file_sink>> create(const std::filesystem::path& path,
                                                                 file_open_mode mode = file_open_mode::append);
  /// Closes the file.
  ~file_sink() override;
  /// Not copyable.
  file_sink(const file_sink&) = delete;
  /// Not copyable.
  file_sink& operator=(const file_sink&) = delete;

  result<void> write(const log_entry& entry) override;
  result<void> flush() override;

  /// The path given to create().
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// Bytes written through this sink (including buffered ones).
  [[nodiscard]] std::uint64_t bytes_written() const noexcept { return bytes_; }

 private:
  file_sink(std::filesystem::path path, std::FILE* file) noexcept : path_(std::move(path)), file_(file) {}

  std::filesystem::path path_;
  std::FILE* file_;
  std::uint64_t bytes_ = 0;
};

namespace detail {
/// fopen with a 64 KiB buffer; errors carry the path and strerror.
result<std::FILE*> open_log_file(const std::filesystem::path& path, bool truncate);
}  // namespace detail

}  // namespace thread_system
