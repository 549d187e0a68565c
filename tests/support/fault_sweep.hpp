// The driver of an allocation-fault sweep (see fault_injection.hpp, which
// this includes: include this header in one translation unit per binary).
//
// A workload is a function `void(fault::outcome&)` that calls the library
// (an optional `prepare()` runs before each run, unarmed, for allocations
// that are the test's own)
// through `attempt(out, f)` and records what it checks in `out` without
// asserting (gtest would allocate while a fault is armed). fault::sweep()
// runs it once clean to count its allocations N, then once per k in 1..N
// in a shuffled order (the seed printed first; THREAD_SYSTEM_FAULT_SEED
// replays it), with the k-th allocation failing, for at least
// scaled(200) runs and then while a 40 s budget lasts. Every run must end
// with nothing unreported and nothing broken. It prints
// "faults injected: N, survived: N".
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "fault_injection.hpp"
#include "test_support.hpp"
#include "thread_system/core/error.hpp"

namespace fault {

// What one run of the workload saw.
struct outcome {
  std::uint64_t unreported = 0;  // a std::bad_alloc (or other foreign exception) escaped a library call
  std::uint64_t refused = 0;     // refusals for lack of memory (resource_exhausted), reported as errors
  std::uint64_t broken = 0;      // an accounting invariant failed
  std::uint64_t on_workers = 0;  // allocation failures the library's own threads counted (and survived)
  std::string first_problem;

  void problem(const std::string& what) {
    ++broken;
    if (first_problem.empty()) first_problem = what;
  }
};

// Calls `f` (a library call). Returns true when it was accepted; counts a
// refusal reported as an error, or a foreign exception as unreported.
template <typename F>
bool attempt_at(outcome& out, int line, F&& f) {
  try {
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      return true;
    } else {
      auto r = f();
      if (r) return true;
      if (r.error().code() == thread_system::error_code::resource_exhausted) ++out.refused;
      return false;
    }
  } catch (const thread_system::error_exception& e) {
    if (e.code() == thread_system::error_code::resource_exhausted) ++out.refused;
    return false;
  } catch (...) {
    ++out.unreported;
    if (out.first_problem.empty()) {
      try {
        throw;
      } catch (const std::exception& e) {
        out.first_problem = "unreported exception at line " + std::to_string(line) + ": " + e.what();
      } catch (...) {
        out.first_problem = "unreported non-standard exception at line " + std::to_string(line);
      }
    }
    return false;
  }
}

// One run of `workload` with the k-th allocation failing (0: none).
// Returns the number of allocations the run made.
template <typename Workload, typename Prepare>
std::uint64_t run_once(Workload& workload, Prepare& prepare, std::uint64_t k, outcome& out) {
  out.first_problem.reserve(256);  // a problem found while armed is recorded without allocating
  prepare();                       // the test's own allocations, made before the fault is armed
  arm(k);
  try {
    workload(out);
  } catch (...) {  // a library call the workload did not expect to throw
    ++out.unreported;
    if (out.first_problem.empty()) out.first_problem = "an exception escaped an unguarded call";
  }
  return disarm();
}

struct nothing_to_prepare {
  void operator()() const noexcept {}
};

template <typename Workload, typename Prepare = nothing_to_prepare>
void sweep(Workload workload, Prepare prepare = {}) {
  // A clean run counts the allocations (N varies a little between runs:
  // threads race for the node chunks).
  outcome clean;
  const std::uint64_t n = run_once(workload, prepare, 0, clean);
  ASSERT_EQ(clean.unreported, 0U) << clean.first_problem;
  ASSERT_EQ(clean.broken, 0U) << clean.first_problem;
  ASSERT_EQ(clean.refused, 0U) << "a clean run refused something";
  ASSERT_GT(n, 0U);

  // Every k while the budget lasts, in a random order (so a short budget
  // still covers the whole range), at least `min_runs` of them.
  std::uint64_t seed = std::random_device{}();
  if (const char* env = std::getenv("THREAD_SYSTEM_FAULT_SEED")) seed = std::strtoull(env, nullptr, 10);
  std::vector<std::uint64_t> ks(n);
  std::iota(ks.begin(), ks.end(), 1);
  std::shuffle(ks.begin(), ks.end(), std::mt19937_64(seed));
  // Up front, so that a run that dies (terminate, a hang the watchdog ends)
  // can still be replayed in the same order.
  std::printf("fault sweep: seed %llu (THREAD_SYSTEM_FAULT_SEED=%llu replays this order)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  const std::size_t min_runs = std::min<std::size_t>(ks.size(), thread_system::test::scaled(200));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  std::uint64_t injected = 0;
  std::uint64_t survived = 0;
  std::uint64_t refusals = 0;
  std::uint64_t on_threads = 0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    if (i >= min_runs && std::chrono::steady_clock::now() > deadline) break;
    outcome out;
    (void)run_once(workload, prepare, ks[i], out);
    ++injected;
    refusals += out.refused;
    on_threads += out.on_workers;
    EXPECT_EQ(out.unreported, 0U) << "k = " << ks[i] << " (seed " << seed << "): " << out.first_problem;
    EXPECT_EQ(out.broken, 0U) << "k = " << ks[i] << " (seed " << seed << "): " << out.first_problem;
    if (out.unreported == 0 && out.broken == 0) ++survived;
  }
  std::printf(
      "faults injected: %llu, survived: %llu (of N = %llu allocations per run; seed %llu; %llu refusals "
      "reported as errors, %llu failures absorbed by the library's threads)\n",
      static_cast<unsigned long long>(injected), static_cast<unsigned long long>(survived),
      static_cast<unsigned long long>(n), static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(refusals), static_cast<unsigned long long>(on_threads));
  EXPECT_EQ(survived, injected);
}
}  // namespace fault

// attempt(out, f): fault::attempt_at() naming the caller's line.
#define attempt(out, ...) ::fault::attempt_at(out, __LINE__, __VA_ARGS__)
