// The umbrella header (include/thread_system/thread_system.hpp): it reaches
// every public header (checked by walking the include tree from the sources,
// not by trusting the umbrella's own list), and a program that includes only
// it can use each folder's names.
#include "thread_system/thread_system.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace ts = thread_system;
namespace fs = std::filesystem;

namespace {

// The headers `header` (relative to `include_dir`) reaches through
// #include "thread_system/..." lines, itself included.
std::set<std::string> reachable_from(const fs::path& include_dir, const std::string& header) {
  std::set<std::string> seen;
  std::vector<std::string> pending{header};
  const std::regex include_line(R"re(^\s*#\s*include\s+"(thread_system/[^"]+)")re");
  while (!pending.empty()) {
    std::string h = pending.back();
    pending.pop_back();
    if (!seen.insert(h).second) continue;
    std::ifstream in(include_dir / h);
    EXPECT_TRUE(in) << "cannot open " << h;
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, include_line)) pending.push_back(m[1].str());
    }
  }
  return seen;
}

TEST(Umbrella, ReachesEveryPublicHeader) {
  const fs::path include_dir{THREAD_SYSTEM_INCLUDE_DIR};
  const std::set<std::string> reached = reachable_from(include_dir, "thread_system/thread_system.hpp");
  std::size_t public_headers = 0;
  for (const auto& entry : fs::recursive_directory_iterator(include_dir / "thread_system")) {
    if (!entry.is_regular_file() || entry.path().extension() != ".hpp") continue;
    const std::string relative = fs::relative(entry.path(), include_dir).generic_string();
    if (relative.rfind("thread_system/detail/", 0) == 0) continue;  // implementation details
    ++public_headers;
    EXPECT_TRUE(reached.count(relative) == 1) << relative << " is not reachable from thread_system.hpp";
  }
  EXPECT_GT(public_headers, 40U) << "the walk found the include tree";
}

// One name from each folder, through the umbrella alone.
ts::task<int> twice(ts::thread_pool& pool, int v) {
  co_await pool.schedule();
  co_return 2 * v;
}

TEST(Umbrella, AProgramThatIncludesOnlyTheUmbrellaUsesEveryFolder) {
  ts::thread_pool pool{2, ts::pool_options{}};  // pools/
  std::atomic<int> ran{0};
  ts::cancellation_source source;  // sync/
  ASSERT_TRUE(pool.enqueue(source.token(), [&ran] { ran.fetch_add(1, std::memory_order_relaxed); }));
  auto f = pool.submit([] { return 21; });  // scheduler/future.hpp
  EXPECT_EQ(f.get(), 21);
  EXPECT_EQ(ts::sync_wait(twice(pool, 4)), 8);  // coro/
  ts::job_queue queue;                          // queues/
  ASSERT_TRUE(queue.try_push(ts::job_function([&ran] { ran.fetch_add(1, std::memory_order_relaxed); })));
  ts::job_function job;
  ASSERT_TRUE(queue.try_pop(job));
  job();
  auto seed_job = std::make_unique<ts::callback_job>([]() -> ts::result_void { return {}; });  // compat/
  ASSERT_TRUE(pool.enqueue(std::move(seed_job)));
  pool.wait_idle();
  EXPECT_EQ(ran.load(std::memory_order_relaxed), 2);  // relaxed: after wait_idle()
  EXPECT_EQ(pool.get_statistics().failed, 0U);        // scheduler/worker_statistics.hpp
  ts::latency_histogram histogram;                    // diagnostics/
  histogram.record(100);
  EXPECT_EQ(histogram.snapshot().count, 1U);
}

}  // namespace
