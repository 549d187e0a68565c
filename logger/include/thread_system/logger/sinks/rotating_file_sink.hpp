// rotating_file_sink: a file sink that starts a new file when the current one
// would exceed a size, and/or when a period has elapsed, keeping a fixed
// number of files.
//
// Files, for path "logs/app.log" and max_files = 3:
//   logs/app.log     the file being written
//   logs/app.1.log   the previous one
//   logs/app.2.log   the one before; older files are deleted
// Rotation closes app.log, renames app.1.log -> app.2.log (replacing it),
// app.log -> app.1.log, and opens a new, empty app.log. With max_files == 1
// rotation just truncates app.log.
//
// Size: before writing a line, if the file is not empty and the line would
// take it past max_bytes, the sink rotates first. A single line longer than
// max_bytes is written whole into a fresh file. max_bytes == 0: no size limit.
// Time: the first period starts when the sink opens; before writing a line,
// if the clock has reached the end of the current period, the sink rotates
// and the next period starts at the first period boundary after now. No
// record in a period means no file for it. period == 0: no time rotation.
// The clock is injectable (tests); by default system_clock::now.
// An existing app.log is appended to (its size counts toward max_bytes), and
// existing app.1.log, app.2.log ... (up to the first gap) are shifted by the
// next rotations like the sink's own.
//
// Failures: create() returns an error for a file that cannot be opened or an
// invalid option (max_files == 0). A failed rename/reopen during rotation is
// returned from write() (the logger counts it). A rename that fails stops
// the shifting there, so no file is replaced by one that could not move
// away; app.log then stays where it is. When app.log could not be
// renamed, the sink keeps appending to it and tries the size rotation again
// once it has grown by another max_bytes (a time rotation: at the next
// period), not on every write. When the new file cannot be
// opened, the sink keeps writing to the old one, and when neither can (the
// directory is gone), each write() tries to open it again and returns the
// error until it can (then appends, its size counted as after a failed
// rename) - a record it could not write is counted, never a crash.
//
// Thread-safety: write() and flush() from one thread at a time (one logger's
// writer thread, or a thread in its flush()).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "thread_system/logger/sink.hpp"

namespace thread_system {

/// Settings of a rotating_file_sink (see the header comment for the rotation rules).
struct rotating_file_options {
  std::filesystem::path path{};                                    ///< e.g. "logs/app.log"
  std::uint64_t max_bytes = 0;                                     ///< 0: no size rotation
  std::chrono::system_clock::duration period{0};                   ///< 0: no time rotation
  std::size_t max_files = 5;                                       ///< files kept, the active one included (>= 1)
  std::function<std::chrono::system_clock::time_point()> clock{};  ///< default: system_clock::now
};

/// A file sink that starts a new file by size and/or by period, keeping at most `max_files` files.
class rotating_file_sink final : public log_sink {
 public:
  /// Opens `options.path` for appending. `invalid_argument` for max_files == 0, an empty path or a negative period;
  /// otherwise fails as file_sink::create().
  [[nodiscard]] static result<std::shared_ptr<rotating_file_sink>> create(rotating_file_options options);
  /// Closes the active file.
  ~rotating_file_sink() override;
  /// Not copyable.
  rotating_file_sink(const rotating_file_sink&) = delete;
  /// Not copyable.
  rotating_file_sink& operator=(const rotating_file_sink&) = delete;

  result<void> write(const log_entry& entry) override;
  result<void> flush() override;

  /// Name of file `index` (0: the active file; i: app.i.log).
  [[nodiscard]] std::filesystem::path file_name(std::size_t index) const;
  /// Rotations performed so far.
  [[nodiscard]] std::uint64_t rotations() const noexcept { return rotations_; }

 private:
  explicit rotating_file_sink(rotating_file_options options) noexcept : options_(std::move(options)) {}
  result<void> rotate();
  result<void> open_for_append();
  static result<std::shared_ptr<rotating_file_sink>> create_unguarded(rotating_file_options options);
  [[nodiscard]] std::chrono::system_clock::time_point now() const {
    return options_.clock ? options_.clock() : std::chrono::system_clock::now();
  }

  rotating_file_options options_;
  std::FILE* file_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint64_t kept_bytes_ = 0;  // the file's size when a rotation could not move it away
  std::uint64_t rotations_ = 0;
  std::size_t rotated_present_ = 0;  // app.1.log .. app.N.log known to exist
  std::chrono::system_clock::time_point period_start_{};
};

}  // namespace thread_system
