// Compiled, never run: every public header, and the templates users
// instantiate most, under a strict warning set with -Werror (GCC: -Wconversion,
// -Wsign-conversion, -Wshadow, -Wold-style-cast, -Wswitch-enum, -Wfloat-equal,
// ...; Clang: -Weverything less the purely stylistic groups; see
// tests/CMakeLists.txt). A user who builds with such flags, and includes the
// library's headers as non-system headers (add_subdirectory, or -I), must not
// see a warning from them. Callables are passed the ways users pass them: a
// lambda, a function named directly, a function pointer.
#include <thread_system/coro/spawn.hpp>
#include <thread_system/coro/task.hpp>
#include <thread_system/coro/when_all.hpp>
#include <thread_system/logger/log_module.hpp>
#include <thread_system/logger/logger.hpp>
#include <thread_system/logger/sinks.hpp>
#include <thread_system/monitoring/monitoring.hpp>
#include <thread_system/queues/adaptive_job_queue.hpp>
#include <thread_system/queues/bounded_queue.hpp>
#include <thread_system/queues/job_queue.hpp>
#include <thread_system/queues/lockfree_queue.hpp>
#include <thread_system/queues/sharded_queue.hpp>
#include <thread_system/queues/two_lock_job_queue.hpp>
#include <thread_system/scheduler/timer_queue.hpp>
#include <thread_system/thread_system.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace strict_warnings {

namespace ts = thread_system;
using namespace std::chrono_literals;

void no_op();
int answer();
int twice(int x);
ts::result<void> seed_callback();
struct service {
  service() = default;
  service(const service&) = delete;
  service& operator=(const service&) = delete;
  virtual ~service();
};
std::shared_ptr<service> make_service();

void pools(ts::thread_pool& pool, ts::typed_thread_pool& typed, ts::cancellation_source& source) {
  void (*fn_ptr)() = no_op;
  (void)pool.enqueue(no_op);
  (void)pool.enqueue(fn_ptr);
  (void)pool.enqueue([] {});
  (void)pool.enqueue(source.token(), no_op);
  std::vector<void (*)()> batch{no_op, fn_ptr};
  (void)pool.enqueue_batch(batch);
  auto a = pool.submit(answer);
  auto b = pool.submit(twice, 21);
  auto c = pool.submit(
      source.token(), [](int x) { return x * 0.5; }, 3);
  (void)a.wait_for(10ms);
  (void)b.wait_for(std::chrono::duration<double>(0.25));
  (void)c.wait_until(std::chrono::steady_clock::now() + 1ms);
  (void)a.get();
  (void)pool.schedule_after(1ms, no_op);
  (void)pool.schedule_after(std::chrono::duration<double, std::milli>(1.5), [] {});
  (void)pool.schedule_at(std::chrono::steady_clock::now() + 1ms, no_op);
  (void)pool.schedule_every(1ms, [](const ts::timer_tick& t) { (void)t.index; });
  (void)pool.schedule_every(2ms, std::chrono::duration<float>(0.5F), no_op);
  (void)pool.enqueue(std::make_unique<ts::callback_job>(seed_callback));
  (void)pool.enqueue(std::make_unique<ts::callback_job>(no_op));

  ts::task_group group(pool);
  group.run(no_op);
  group.run([] {});
  group.wait();
  std::vector<float> data(1000);
  ts::parallel_for(pool, std::size_t{0}, data.size(), [&](std::size_t i) { data[i] = 1.0F; });
  ts::parallel_for(pool, 0, 100, [](int i) { (void)i; });
  const double sum = ts::parallel_reduce(
      pool, std::size_t{0}, data.size(), 0.0,
      [&](std::size_t lo, std::size_t hi, double acc) {
        for (std::size_t i = lo; i < hi; ++i) acc += static_cast<double>(data[i]);
        return acc;
      },
      [](double x, double y) { return x + y; });
  (void)sum;

  (void)typed.enqueue(ts::job_types::Batch, no_op);
  (void)typed.enqueue(ts::job_types::RealTime, [] {});
  auto t = typed.submit(ts::job_types::Background, answer);
  (void)t.get();
  (void)typed.schedule_after(ts::job_types::Batch, 1ms, no_op);

  ts::wait_group wg;
  (void)wg.add(1);
  (void)wg.done();
  wg.wait();
  auto registration = source.token().register_callback([] {});
  (void)source.cancel();
}

void timers_and_queues(ts::thread_pool& pool) {
  ts::timer_queue timers{[&pool](ts::job_function&& f) { return pool.enqueue(std::move(f)); }};
  (void)timers.schedule_after(1ms, no_op);
  (void)timers.schedule_every(std::chrono::duration<double>(0.001), no_op);

  ts::job_function out;
  ts::job_queue mutex_queue;
  (void)mutex_queue.try_push(ts::job_function(no_op));
  (void)mutex_queue.try_pop(out);
  ts::two_lock_job_queue two_lock;
  bool was_empty = false;
  (void)two_lock.try_push(ts::job_function(no_op), was_empty);
  (void)two_lock.try_pop(out);
  std::array<ts::job_function, 4> share;
  (void)two_lock.pop_share(share, 2);
  ts::lockfree_queue lockfree;
  (void)lockfree.try_push(ts::job_function([] {}));
  (void)lockfree.try_pop(out);
  ts::sharded_queue sharded;
  (void)sharded.try_push(ts::job_function(no_op));
  (void)sharded.try_pop(out);
  ts::bounded_queue bounded{64};
  (void)bounded.try_push(ts::job_function(no_op));
  (void)bounded.try_pop(out);
  ts::adaptive_job_queue adaptive;
  (void)adaptive.try_push(ts::job_function(no_op));
  (void)adaptive.try_pop(out);

  ts::latency_histogram h;
  h.record(123);
  (void)h.snapshot().percentile(0.99);

  ts::service_registry registry;
  (void)registry.register_factory<service>(make_service);
  (void)registry.resolve<service>();
}

ts::task<void> background(ts::thread_pool& pool) { co_await pool.schedule(); }

ts::task<int> child(ts::thread_pool& pool) {
  co_await pool.schedule();
  co_await pool.sleep_for(1ms);
  co_return 1;
}

ts::task<int> parent(ts::thread_pool& pool) {
  auto [x, y] = co_await ts::when_all(child(pool), child(pool));
  const int z = co_await pool.submit(answer);
  co_return x + y + z;
}

int coroutines(ts::thread_pool& pool) {
  (void)ts::spawn(pool, background(pool));
  return ts::sync_wait(parent(pool));
}

// Settings are aggregates a user fills with designated initializers, naming
// only what differs from the defaults: every member has a default member
// initializer, so -Wmissing-field-initializers (GCC's -Wextra, Clang's
// -Wmissing-designated-field-initializers) stays quiet.
void options_by_designated_initializers() {
  const ts::pool_options pool{.queue = ts::pool_queue::sharded};
  const ts::typed_pool_options<ts::job_types> typed{.name = "typed"};
  const ts::sharded_queue_options sharded{.shards = 2};
  const ts::timer_queue_options timers{.name = "timers"};
  const ts::logger_options logger{.level = ts::log_level::debug};
  const ts::rotating_file_options rotating{.path = "app.log"};
  const ts::monitoring::monitor_options monitor{.interval = 1s};
  const ts::monitoring::health_thresholds health{.stuck_after = 5s};
  (void)pool, (void)typed, (void)sharded, (void)timers, (void)logger, (void)rotating, (void)monitor, (void)health;
}

void logging(ts::logger& log) {
  const std::string host = "example";
  log.info("plain text");
  log.info("{} of {} at {:.2f}", 1, host, 0.5);
  log.error("failed: {}", std::string_view("reason"));
  ts::log_module::write_information("message {}", 42);
}

}  // namespace strict_warnings
