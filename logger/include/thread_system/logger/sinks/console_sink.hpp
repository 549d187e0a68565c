// console_sink: writes each record's line to a stdio stream (stdout by
// default), with the level name coloured by ANSI escape codes only when the
// stream is a terminal.
//
// Colour: colour_mode::automatic (the default) decides once, at
// construction, with isatty(fileno(stream)): a file, a pipe or /dev/null get
// plain text. `always` and `never` override the check.
//
// Thread-safety: write() and flush() are called by one logger's writer
// thread. Several loggers may share one console_sink or one stream: each line
// is written with one fwrite() (which locks the stream), so lines do not
// interleave mid-line. The stream must stay open for the sink's lifetime; the
// sink does not close it.
#pragma once

#include <cstdio>

#include "thread_system/logger/sink.hpp"

namespace thread_system {

/// When a console_sink colours the level name: only if the stream is a terminal, always, or never.
enum class colour_mode { automatic, always, never };

/// Writes each record's line to a stdio stream, with the level name coloured by ANSI codes when enabled.
class console_sink final : public log_sink {
 public:
  /// Writes to `stream` (null: stdout), which must stay open for the sink's lifetime and is not closed by it;
  /// `mode` decides colour once, here.
  explicit console_sink(std::FILE* stream = stdout, colour_mode mode = colour_mode::automatic);

  result<void> write(const log_entry& entry) override;
  result<void> flush() override;

  /// Whether lines carry colour codes (decided at construction).
  [[nodiscard]] bool uses_colour() const noexcept { return colour_; }

 private:
  std::FILE* stream_;
  bool colour_;
};

/// True when `stream` refers to a terminal (isatty on its descriptor).
[[nodiscard]] bool is_terminal(std::FILE* stream) noexcept;

}  // namespace thread_system
