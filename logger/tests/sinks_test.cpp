// The shipped sinks: console colour detection, file sink, rotation by size
// and by time (injected clock), exactly-once across rotation.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"
#include "thread_system/logger/logger.hpp"
#include "thread_system/logger/sinks.hpp"

namespace thread_system {
namespace {

namespace fs = std::filesystem;
using test::scaled;

// A fresh directory per test, removed afterwards.
class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "ts_logger_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A rotating_file_sink clock that reads `*now` (seconds since the epoch).
std::function<std::chrono::system_clock::time_point()> injected_clock(std::shared_ptr<std::atomic<std::int64_t>> now) {
  return [now = std::move(now)] {
    return std::chrono::system_clock::time_point(std::chrono::seconds(now->load(std::memory_order_relaxed)));
  };
}

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  return out;
}

// The message part of a line: everything after the last "] ".
std::string message_of(const std::string& line) {
  const auto pos = line.rfind("] ");
  return pos == std::string::npos ? line : line.substr(pos + 2);
}

log_record record_with(std::string_view message, log_level level = log_level::info) {
  log_record r;
  r.level = level;
  r.time = std::chrono::system_clock::now();
  r.thread_id = 1;
  r.message = message;
  return r;
}

result<void> write_one(log_sink& sink, std::string_view message, log_level level = log_level::info) {
  line_formatter f;
  const log_record r = record_with(message, level);
  const log_entry e(r, f);
  return sink.write(e);
}

// ---------------------------------------------------------------------------
// console
// ---------------------------------------------------------------------------

TEST(ConsoleSink, NoColourWhenWritingToAFile) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(is_terminal(f));
  console_sink sink(f);
  EXPECT_FALSE(sink.uses_colour());
  ASSERT_TRUE(write_one(sink, "plain", log_level::error));
  ASSERT_TRUE(sink.flush());
  const std::string text = read_all(f);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("[error] [1] plain\n"), std::string::npos);
  std::fclose(f);
}

TEST(ConsoleSink, NoColourWhenWritingToAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::FILE* w = ::fdopen(fds[1], "w");
  ASSERT_NE(w, nullptr);
  console_sink sink(w);
  EXPECT_FALSE(sink.uses_colour());
  ASSERT_TRUE(write_one(sink, "through a pipe", log_level::warn));
  ASSERT_TRUE(sink.flush());
  char buf[256] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ASSERT_GT(n, 0);
  const std::string text(buf, static_cast<std::size_t>(n));
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("through a pipe\n"), std::string::npos);
  std::fclose(w);
  ::close(fds[0]);
}

TEST(ConsoleSink, ColourOnATerminal) {
  // A pseudo-terminal is a terminal as far as isatty() is concerned.
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) GTEST_SKIP() << "no pseudo-terminals here";
  const char* name = ::ptsname(master);
  ASSERT_NE(name, nullptr);
  std::FILE* tty = std::fopen(name, "w");
  ASSERT_NE(tty, nullptr);
  EXPECT_TRUE(is_terminal(tty));
  console_sink sink(tty);
  EXPECT_TRUE(sink.uses_colour());
  ASSERT_TRUE(write_one(sink, "coloured", log_level::error));
  ASSERT_TRUE(sink.flush());
  char buf[512] = {};
  const ssize_t n = ::read(master, buf, sizeof buf - 1);
  ASSERT_GT(n, 0);
  const std::string text(buf, static_cast<std::size_t>(n));
  EXPECT_NE(text.find("\x1b[31m\x1b[1merror\x1b[0m"), std::string::npos);
  std::fclose(tty);
  ::close(master);
}

TEST(ConsoleSink, ColourModeOverridesDetection) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  console_sink always(f, colour_mode::always);
  EXPECT_TRUE(always.uses_colour());
  ASSERT_TRUE(write_one(always, "x", log_level::info));
  EXPECT_NE(read_all(f).find("\x1b[32minfo\x1b[0m"), std::string::npos);
  console_sink never(stdout, colour_mode::never);
  EXPECT_FALSE(never.uses_colour());
  std::fclose(f);
}

// ---------------------------------------------------------------------------
// file
// ---------------------------------------------------------------------------

TEST(FileSink, WritesLinesAndAppends) {
  temp_dir dir;
  const fs::path p = dir.path() / "app.log";
  {
    auto sink = file_sink::create(p);
    ASSERT_TRUE(sink);
    logger log({*sink});
    log.info("one");
    log.warn("two {}", 2);
  }
  {
    auto sink = file_sink::create(p, file_open_mode::append);
    ASSERT_TRUE(sink);
    logger log({*sink});
    log.error("three");
  }
  const auto lines = read_lines(p);
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(message_of(lines[0]), "one");
  EXPECT_EQ(message_of(lines[1]), "two 2");
  EXPECT_EQ(message_of(lines[2]), "three");
  EXPECT_NE(lines[1].find("[warn]"), std::string::npos);
}

TEST(FileSink, FlushMakesLinesVisibleInTheFile) {
  temp_dir dir;
  const fs::path p = dir.path() / "flush.log";
  auto sink = file_sink::create(p, file_open_mode::truncate);
  ASSERT_TRUE(sink);
  logger_options o;
  o.flush_when_idle = false;
  logger log({*sink}, o);
  for (int i = 0; i < 100; ++i) log.info("line {}", i);
  ASSERT_TRUE(log.flush());
  const auto lines = read_lines(p);  // read by another handle: the data left our buffer
  ASSERT_EQ(lines.size(), 100U);
  EXPECT_EQ(message_of(lines[99]), "line 99");
}

TEST(FileSink, OpenFailureIsAnError) {
  auto sink = file_sink::create("/nonexistent-dir-for-logger-test/x.log");
  ASSERT_FALSE(sink);
  EXPECT_EQ(sink.error().code(), error_code::not_found);
  EXPECT_NE(sink.error().message().find("nonexistent-dir-for-logger-test"), std::string::npos);
}

// A NUL inside the path: refused, and no file is made or emptied (fopen()
// stopped at the NUL and opened - under truncate: emptied - the file its
// prefix names).
TEST(FileSink, APathWithANulIsRefusedAndTouchesNoFile) {
  temp_dir dir;
  const fs::path victim = dir.path() / "victim";
  {
    std::ofstream out(victim);
    out << "keep me\n";
  }
  const fs::path with_nul(victim.native() + std::string("\0.log", 5));
  auto sink = file_sink::create(with_nul, file_open_mode::truncate);
  ASSERT_FALSE(sink);
  EXPECT_EQ(sink.error().code(), error_code::invalid_argument);
  rotating_file_options o;
  o.path = fs::path((dir.path() / "other").native() + std::string("\0.log", 5));
  auto rotating = rotating_file_sink::create(o);
  ASSERT_FALSE(rotating);
  EXPECT_EQ(rotating.error().code(), error_code::invalid_argument);
  EXPECT_EQ(read_lines(victim), std::vector<std::string>{"keep me"});
  EXPECT_FALSE(fs::exists(dir.path() / "other"));
}

// ---------------------------------------------------------------------------
// rotating file
// ---------------------------------------------------------------------------

TEST(RotatingFileSink, NamesTheFiles) {
  temp_dir dir;
  rotating_file_options o;
  o.path = dir.path() / "app.log";
  auto sink = rotating_file_sink::create(o);
  ASSERT_TRUE(sink);
  EXPECT_EQ((*sink)->file_name(0), dir.path() / "app.log");
  EXPECT_EQ((*sink)->file_name(3), dir.path() / "app.3.log");
  o.max_files = 0;
  auto bad = rotating_file_sink::create(o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), error_code::invalid_argument);
}

TEST(RotatingFileSink, RotatesBySizeAndKeepsNFiles) {
  temp_dir dir;
  rotating_file_options o;
  o.path = dir.path() / "size.log";
  o.max_bytes = 1000;
  o.max_files = 3;
  auto created = rotating_file_sink::create(o);
  ASSERT_TRUE(created);
  auto sink = *created;
  const int total = 200;
  {
    logger log({sink});
    for (int i = 0; i < total; ++i) log.info("message number {:04}", i);
  }
  EXPECT_TRUE(fs::exists(dir.path() / "size.log"));
  EXPECT_TRUE(fs::exists(dir.path() / "size.1.log"));
  EXPECT_TRUE(fs::exists(dir.path() / "size.2.log"));
  EXPECT_FALSE(fs::exists(dir.path() / "size.3.log"));
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 3U);
  // Oldest to newest, the kept lines are the newest messages, contiguous.
  std::vector<std::string> kept;
  for (const char* name : {"size.2.log", "size.1.log", "size.log"}) {
    EXPECT_LE(fs::file_size(dir.path() / name), 1000U);
    for (auto& l : read_lines(dir.path() / name)) kept.push_back(message_of(l));
  }
  ASSERT_FALSE(kept.empty());
  const int first = total - static_cast<int>(kept.size());
  for (std::size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i], fmt::format("message number {:04}", first + static_cast<int>(i)));
  }
  EXPECT_GE(sink->rotations(), 3U);
  // Each full file held as many lines as fit: the rotated ones are near 1000 bytes.
  EXPECT_GT(fs::file_size(dir.path() / "size.1.log"), 900U);
}

TEST(RotatingFileSink, EveryMessageExactlyOnceAcrossRotations) {
  temp_dir dir;
  rotating_file_options o;
  o.path = dir.path() / "all.log";
  o.max_bytes = 16384;
  o.max_files = 100000;  // keep everything, so every line can be read back
  auto created = rotating_file_sink::create(o);
  ASSERT_TRUE(created);
  constexpr int producers = 4;
  const int per = static_cast<int>(scaled(5000));
  {
    logger_options lo;
    lo.thread_buffer_bytes = 8192;
    logger log({*created}, lo);
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        for (int s = 0; s < per; ++s) log.info("p{} s{}", p, s);
      });
    }
    for (auto& t : threads) t.join();
  }
  std::vector<std::vector<int>> seen(producers, std::vector<int>(static_cast<std::size_t>(per), 0));
  std::size_t lines = 0;
  std::size_t file_count = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    ++file_count;
    for (const auto& l : read_lines(entry.path())) {
      int p = -1;
      int s = -1;
      ASSERT_EQ(std::sscanf(message_of(l).c_str(), "p%d s%d", &p, &s), 2) << l;
      ++seen[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)];
      ++lines;
    }
  }
  EXPECT_GT(file_count, 1U);
  EXPECT_EQ(lines, static_cast<std::size_t>(producers) * static_cast<std::size_t>(per));
  for (int p = 0; p < producers; ++p) {
    for (int s = 0; s < per; ++s) ASSERT_EQ(seen[static_cast<std::size_t>(p)][static_cast<std::size_t>(s)], 1);
  }
}

// A rotation that can reopen neither the new file nor the old one (the
// directory was removed) returns an error from write(), and so does every
// write until the file can be opened again - one that would rotate again
// (long lines; a period that ended) included; then writing goes on. (A
// write after the failed rotation wrote through a null FILE*; later, one
// that rotated again closed it, rotate() running before the reopen: crashes
// on the writer thread.)
TEST(RotatingFileSink, WritesThatWouldRotateWhileTheDirectoryIsGoneFailUntilItIsBack) {
  for (const bool by_time : {false, true}) {
    SCOPED_TRACE(by_time ? "time rotation, one file" : "size rotation");
    temp_dir dir;
    const fs::path sub = dir.path() / "logs";
    fs::create_directory(sub);
    auto now = std::make_shared<std::atomic<std::int64_t>>(1'000'000);  // seconds
    rotating_file_options o;
    o.path = sub / "gone.log";
    if (by_time) {
      o.period = std::chrono::hours(1);
      o.max_files = 1;
      o.clock = injected_clock(now);
    } else {
      o.max_bytes = 200;
      o.max_files = 3;
    }
    auto created = rotating_file_sink::create(o);
    ASSERT_TRUE(created);
    auto sink = *created;
    ASSERT_TRUE(write_one(*sink, "first"));
    fs::remove_all(sub);
    const std::string long_line(250, 'x');
    for (int i = 0; i < 3; ++i) {
      now->fetch_add(3600);  // (time rotation) a period ended before each write
      EXPECT_FALSE(write_one(*sink, long_line));
    }
    EXPECT_FALSE(write_one(*sink, "still no directory"));
    EXPECT_FALSE(sink->flush());
    fs::create_directory(sub);
    now->fetch_add(3600);
    ASSERT_TRUE(write_one(*sink, "back"));
    ASSERT_TRUE(write_one(*sink, "and on"));
    ASSERT_TRUE(sink->flush());
    const std::vector<std::string> lines = read_lines(o.path);
    ASSERT_GE(lines.size(), 2U);
    EXPECT_EQ(message_of(lines[lines.size() - 2]), "back");
    EXPECT_EQ(message_of(lines.back()), "and on");
  }
}

// A rename that fails stops the shifting: app.log is not renamed over
// app.1.log, which could not move away (here app.2.log is a non-empty
// directory, so app.1.log -> app.2.log fails). Before, app.log replaced
// app.1.log and that file's records were lost.
TEST(RotatingFileSink, AFailedRenameReplacesNoFile) {
  temp_dir dir;
  rotating_file_options o;
  o.path = dir.path() / "keep.log";
  o.max_bytes = 200;
  o.max_files = 3;
  { std::ofstream(dir.path() / "keep.1.log") << "older record\n"; }
  const fs::path blocker = dir.path() / "keep.2.log";
  fs::create_directory(blocker);
  {
    std::ofstream(blocker / "keep") << "x";  // a non-empty directory: rename onto it fails
  }
  auto created = rotating_file_sink::create(o);
  ASSERT_TRUE(created);
  auto sink = *created;
  const std::string line_text(60, 'a');
  int failed = 0;
  for (int i = 0; i < 10; ++i) {
    if (!write_one(*sink, fmt::format("{} {:02}", line_text, i))) ++failed;
  }
  ASSERT_TRUE(sink->flush());
  EXPECT_GE(failed, 1) << "the size rotation was tried";
  EXPECT_EQ(read_lines(dir.path() / "keep.1.log"), std::vector<std::string>{"older record"});
  EXPECT_EQ(read_lines(o.path).size(), 10U) << "every line kept in keep.log";
}

// A rotation that cannot rename app.log away (app.1.log is a directory here;
// as root, permissions would not stop it) keeps appending to app.log and
// reports the failure - but tries again only once the file has grown by
// another max_bytes, not on every write (each try closes, renames and
// reopens the file). Nothing is lost, and rotation resumes once it can.
TEST(RotatingFileSink, AFailedRotationIsRetriedAfterAnotherMaxBytesNotOnEveryWrite) {
  temp_dir dir;
  rotating_file_options o;
  o.path = dir.path() / "stuck.log";
  o.max_bytes = 400;
  o.max_files = 3;
  auto created = rotating_file_sink::create(o);
  ASSERT_TRUE(created);
  auto sink = *created;
  const fs::path blocker = dir.path() / "stuck.1.log";
  fs::create_directory(blocker);
  {
    std::ofstream(blocker / "keep") << "x";  // a non-empty directory: rename onto it fails
  }
  const std::string line_text(60, 'a');
  ASSERT_TRUE(write_one(*sink, line_text));
  ASSERT_TRUE(sink->flush());
  const auto line_bytes = fs::file_size(o.path);
  ASSERT_GT(line_bytes, 60U);
  constexpr int writes = 60;
  int failed = 0;
  for (int i = 0; i < writes; ++i) {
    if (!write_one(*sink, fmt::format("{} {:02}", line_text, i))) ++failed;
  }
  ASSERT_TRUE(sink->flush());
  EXPECT_EQ(sink->rotations(), 0U);
  // Every line is in the file, none lost to the failing rotations.
  EXPECT_EQ(read_lines(o.path).size(), static_cast<std::size_t>(writes) + 1);
  // A try when the next line would take the file past another max_bytes:
  // tries at least max_bytes - line_bytes apart, far from one per write
  // (60 before).
  const auto written = static_cast<int>(fs::file_size(o.path));
  EXPECT_GE(failed, 2);
  EXPECT_LE(failed, written / (400 - static_cast<int>(line_bytes)) + 1)
      << "a failed rotation was retried on every write";
  EXPECT_LT(failed, writes / 2);
  fs::remove_all(blocker);
  for (int i = 0; failed > 0 && i < 20 && sink->rotations() == 0; ++i) {
    ASSERT_TRUE(write_one(*sink, line_text));
  }
  EXPECT_EQ(sink->rotations(), 1U);
  EXPECT_TRUE(fs::exists(dir.path() / "stuck.1.log"));
}

TEST(RotatingFileSink, RotatesByTimeWithAnInjectedClock) {
  temp_dir dir;
  auto now = std::make_shared<std::atomic<std::int64_t>>(1'000'000);  // seconds
  rotating_file_options o;
  o.path = dir.path() / "time.log";
  o.period = std::chrono::hours(1);
  o.max_files = 3;
  o.clock = injected_clock(now);
  auto created = rotating_file_sink::create(o);
  ASSERT_TRUE(created);
  auto sink = *created;
  logger log({sink});
  auto batch = [&](int hour) {
    for (int i = 0; i < 5; ++i) log.info("hour {} line {}", hour, i);
    ASSERT_TRUE(log.flush());
  };
  batch(0);
  now->fetch_add(1800);  // half an hour: same period
  batch(0);
  now->fetch_add(1800);  // the period ended
  batch(1);
  now->fetch_add(3 * 3600 + 5);  // several periods later: one rotation, not three
  batch(4);
  now->fetch_add(3600);
  batch(5);
  log.stop();
  EXPECT_EQ(sink->rotations(), 3U);
  auto check = [&](const char* name, int hour, std::size_t count) {
    const auto lines = read_lines(dir.path() / name);
    ASSERT_EQ(lines.size(), count) << name;
    for (const auto& l : lines)
      EXPECT_EQ(message_of(l).rfind(fmt::format("hour {} ", hour), 0), 0U) << name << ": " << l;
  };
  check("time.log", 5, 5);
  check("time.1.log", 4, 5);
  check("time.2.log", 1, 5);
  EXPECT_FALSE(fs::exists(dir.path() / "time.3.log"));  // hour 0 was deleted (3 files kept)
}

TEST(RotatingFileSink, OneFileMeansTruncateOnRotation) {
  temp_dir dir;
  rotating_file_options o;
  o.path = dir.path() / "one.log";
  o.max_bytes = 200;
  o.max_files = 1;
  auto created = rotating_file_sink::create(o);
  ASSERT_TRUE(created);
  {
    logger log({*created});
    for (int i = 0; i < 50; ++i) log.info("entry {}", i);
  }
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1U);
  const auto lines = read_lines(dir.path() / "one.log");
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(message_of(lines.back()), "entry 49");
  EXPECT_LE(fs::file_size(dir.path() / "one.log"), 200U);
}

TEST(CallbackSink, SeesRecordsAndFlushes) {
  std::vector<std::string> got;
  int flushes = 0;
  auto sink =
      std::make_shared<callback_sink>([&](const log_entry& e) { got.emplace_back(e.line()); }, [&] { ++flushes; });
  {
    logger log({sink});
    log.info("cb {}", 1);
    ASSERT_TRUE(log.flush());
  }
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(message_of(got[0]), "cb 1\n");
  EXPECT_GE(flushes, 1);
}

}  // namespace
}  // namespace thread_system
