// Allocation-fault sweep of the logger: a fixed workload (construct, short,
// long and formatted calls, a flush, stop) is run once per allocation it
// makes, with that allocation failing (tests/support/fault_sweep.hpp). The
// failed allocation may land on the caller's thread or the writer's.
//
// Each run must end without terminate, every refusal reported (an error
// result or an error_exception, never a raw std::bad_alloc), and the
// logger's own accounting exact: every accepted record reaches the sink
// once (accepted == written == records the sink saw).
//
// This binary replaces the global allocation functions, so it is a binary
// of its own.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "support/fault_sweep.hpp"
#include "thread_system/logger/log_module.hpp"
#include "thread_system/logger/logger.hpp"
#include "thread_system/logger/sinks.hpp"

namespace ts = thread_system;

namespace {

// Longer than any inline buffer.
const std::string& long_text() {
  static const std::string text(600, 'x');
  return text;
}

struct logger_workload {
  // Made by prepare() before each run: the test's allocations, not the logger's.
  std::vector<std::shared_ptr<ts::log_sink>>* sinks = nullptr;
  std::atomic<std::uint64_t>* seen = nullptr;

  void operator()(fault::outcome& out) const {
    seen->store(0, std::memory_order_relaxed);
    ts::logger_options options;
    options.thread_buffer_bytes = 4096;  // small: the long messages fill it quickly
    options.error_handler = [](const ts::error&) {};
    std::optional<ts::logger> log;
    if (!attempt(out, [&] { log.emplace(std::move(*sinks), std::move(options)); })) return;
    std::uint64_t accepted = 0;
    std::uint64_t calls = 0;
    const std::string& long_text = ::long_text();
    for (int i = 0; i < 16; ++i) {
      ++calls;
      if (attempt(out, [&] { return log->try_log(ts::log_level::info, "short {}", i); })) ++accepted;
      ++calls;
      if (attempt(out, [&] { return log->try_log(ts::log_level::warn, "long {} {}", long_text, 3.25); })) ++accepted;
      ++calls;
      if (attempt(out, [&] { return log->try_log_text(ts::log_level::error, long_text); })) ++accepted;
    }
    attempt(out, [&] { return log->flush(); });
    attempt(out, [&] { log->stop(); });
    const ts::logger_statistics s = log->statistics();
    if (s.accepted != accepted) {
      out.problem("accepted " + std::to_string(s.accepted) + " != calls that succeeded " + std::to_string(accepted));
    }
    if (s.written != s.accepted) {
      out.problem("written " + std::to_string(s.written) + " != accepted " + std::to_string(s.accepted));
    }
    if (seen->load(std::memory_order_relaxed) != s.written) {
      out.problem("the sink saw " + std::to_string(seen->load(std::memory_order_relaxed)) + " of " +
                  std::to_string(s.written) + " written");
    }
    if (s.rejected + s.dropped + s.accepted != calls) {
      out.problem("accepted + rejected + dropped != calls");
    }
  }
};

}  // namespace

TEST(LoggerFaultSweep, EveryAllocationFailureIsSurvivedAndReported) {
  // The sink exists before any fault is armed: it is the test's, not the logger's.
  std::atomic<std::uint64_t> seen{0};
  auto sink = std::make_shared<ts::callback_sink>(
      [&seen](const ts::log_entry&) { seen.fetch_add(1, std::memory_order_relaxed); });
  std::vector<std::shared_ptr<ts::log_sink>> sinks;
  (void)long_text();
  fault::sweep(logger_workload{&sinks, &seen}, [&] { sinks.assign({sink}); });
}

// The file sinks' create() under each allocation failure: a refusal with
// resource_exhausted (a raw std::bad_alloc escaped, and file_sink's open
// file leaked), never a crash; LSan checks the files are closed.
TEST(LoggerFaultSweep, FileSinksAreCreatedOrRefused) {
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / "ts_sweep_XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path dir = pattern;
  const fs::path plain = dir / "plain.log";
  const fs::path rotating = dir / "rotating.log";
  ts::rotating_file_options o;  // made by prepare() (the test's allocations), moved into create()
  fault::sweep(
      [&](fault::outcome& out) {
        attempt(out, [&] { return ts::file_sink::create(plain); });
        attempt(out, [&] { return ts::rotating_file_sink::create(std::move(o)); });
      },
      [&] {
        o = ts::rotating_file_options{};
        o.path = rotating;
        o.max_bytes = 100;
        o.max_files = 2;
      });
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// log_module::start(sinks, options) refusing bad options (batch_size 0)
// whichever allocation fails: a result error, invalid_argument or
// resource_exhausted (the error caught from the logger's constructor was
// copied inside the catch clause, and a std::bad_alloc of that copy escaped).
TEST(LoggerFaultSweep, LogModuleStartReportsARefusalWhicheverAllocationFails) {
  auto sink = std::make_shared<ts::callback_sink>([](const ts::log_entry&) {});
  std::vector<std::shared_ptr<ts::log_sink>> sinks;  // made by prepare(): the test's allocations
  ts::logger_options options;
  fault::sweep(
      [&](fault::outcome& out) {
        const bool started = attempt(out, [&] { return ts::log_module::start(std::move(sinks), std::move(options)); });
        if (started) {
          out.problem("batch_size 0 was accepted");
          ts::log_module::stop();
        }
      },
      [&] {
        sinks.assign({sink});
        options = ts::logger_options{};
        options.batch_size = 0;
      });
}
