#include "thread_system/core/thread_base.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../support/test_support.hpp"

namespace ts = thread_system;
using namespace std::chrono_literals;

namespace {

class recording_thread : public ts::thread_base {
 public:
  explicit recording_thread(bool fail_start = false) : thread_base("recorder"), fail_start_(fail_start) {}
  ~recording_thread() override { (void)stop(); }

  std::vector<std::string> events() {
    std::lock_guard lock(m_);
    return events_;
  }
  std::atomic<int> work{0};
  std::atomic<int> pending{0};
  std::atomic<int> errors{0};
  std::atomic<ts::result<void>*> self_stop_result{nullptr};

 protected:
  ts::result<void> before_start() override {
    record("before_start");
    if (fail_start_) return ts::make_error(ts::error_code::invalid_argument, "refusing to start");
    return {};
  }
  // seq_cst: pairs with the writers' RMW/store
  bool should_continue_work() const override { return pending.load(std::memory_order_seq_cst) > 0; }
  ts::result<void> do_work() override {
    // seq_cst: pairs with the other side's load/RMW
    if (pending.load(std::memory_order_seq_cst) > 0) pending.fetch_sub(1, std::memory_order_seq_cst);
    work.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    return ts::make_error(ts::error_code::job_failed, "each round reports an error");
  }
  ts::result<void> after_stop() override {
    record("after_stop");
    return {};
  }
  void on_error(const ts::error& e) override {
    // seq_cst: pairs with the checking load(s)
    if (e.code() == ts::error_code::job_failed) errors.fetch_add(1, std::memory_order_seq_cst);
  }

 private:
  void record(std::string e) {
    std::lock_guard lock(m_);
    events_.push_back(std::move(e));
  }
  bool fail_start_;
  std::mutex m_;
  std::vector<std::string> events_;
};

using thread_system::test::eventually;

}  // namespace

TEST(ThreadBase, HooksRunInOrder) {
  recording_thread t;
  ASSERT_TRUE(t.start());
  EXPECT_TRUE(t.is_running());
  ASSERT_TRUE(t.stop());
  EXPECT_FALSE(t.is_running());
  EXPECT_EQ(t.events(), (std::vector<std::string>{"before_start", "after_stop"}));
}

TEST(ThreadBase, StartErrorIsReturned) {
  recording_thread t(/*fail_start=*/true);
  auto r = t.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::invalid_argument);
  EXPECT_FALSE(t.is_running());
}

TEST(ThreadBase, DoubleStartIsRefused) {
  recording_thread t;
  ASSERT_TRUE(t.start());
  auto r = t.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::already_started);
}

TEST(ThreadBase, WakeRunsOneRoundAndErrorsReachOnError) {
  recording_thread t;
  ASSERT_TRUE(t.start());
  t.wake();
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.work.load(std::memory_order_seq_cst) >= 1; }));
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.errors.load(std::memory_order_seq_cst) >= 1; }));
  ASSERT_TRUE(t.stop());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(t.work.load(std::memory_order_seq_cst), t.errors.load(std::memory_order_seq_cst));
}

// A wake() while no thread runs is kept for the next start() (it was
// dropped: start() cleared it, and nothing ran until another wake()).
TEST(ThreadBase, AWakeBeforeStartOrAfterStopRunsARoundOfTheNextStart) {
  recording_thread t;
  t.wake();
  ASSERT_TRUE(t.start());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.work.load(std::memory_order_seq_cst) >= 1; }));
  ASSERT_TRUE(t.stop());
  const int after_first = t.work.load(std::memory_order_seq_cst);  // seq_cst: as above; the thread was joined
  t.wake();
  ASSERT_TRUE(t.start());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.work.load(std::memory_order_seq_cst) > after_first; }));
  ASSERT_TRUE(t.stop());
}

TEST(ThreadBase, WakeIntervalRepeatsWork) {
  recording_thread t;
  t.set_wake_interval(2ms);
  ASSERT_EQ(t.get_wake_interval(), std::optional<std::chrono::milliseconds>(2ms));
  ASSERT_TRUE(t.start());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.work.load(std::memory_order_seq_cst) >= 5; }));
  ASSERT_TRUE(t.stop());
  EXPECT_GE(t.work_rounds(), 5U);
}

// The longest interval means "only when woken" (the wait saturates instead
// of overflowing: UBSan flags the overflow); a negative one counts as zero.
TEST(ThreadBase, ExtremeWakeIntervalsAreSaturated) {
  recording_thread t;
  t.set_wake_interval(std::chrono::milliseconds::max());
  ASSERT_TRUE(t.start());
  std::this_thread::sleep_for(20ms);
  // No round without a wake (an overflowing deadline lies in the past: rounds without end).
  EXPECT_EQ(t.work.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
  t.wake();
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.work.load(std::memory_order_seq_cst) >= 1; }));
  t.set_wake_interval(std::chrono::milliseconds(-5));
  t.wake();  // the new interval applies from the next round
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_TRUE(eventually([&] { return t.work.load(std::memory_order_seq_cst) >= 5; }));
  ASSERT_TRUE(t.stop());
}

TEST(ThreadBase, ShouldContinueWorkDrainsBeforeStopping) {
  recording_thread t;
  ASSERT_TRUE(t.start());
  t.pending.store(50, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
  t.wake();
  ASSERT_TRUE(t.stop());
  // seq_cst: pairs with the writers' RMW/store
  EXPECT_EQ(t.pending.load(std::memory_order_seq_cst), 0) << "stop() must let the loop finish the work it reports";
}

namespace {

// Hooks that throw, each on request.
class throwing_thread : public ts::thread_base {
 public:
  enum class where { nowhere, before_start, do_work, after_stop, should_continue };
  explicit throwing_thread(where w) : thread_base("thrower"), where_(w) {}
  ~throwing_thread() override { (void)stop(); }

  std::vector<ts::error> errors() {
    std::lock_guard lock(m_);
    return errors_;
  }
  std::atomic<int> rounds{0};

 protected:
  ts::result<void> before_start() override {
    if (where_ == where::before_start) throw std::runtime_error("before_start failed");
    return {};
  }
  bool should_continue_work() const override {
    if (where_ == where::should_continue) throw std::runtime_error("should_continue_work failed");
    return false;
  }
  ts::result<void> do_work() override {
    rounds.fetch_add(1, std::memory_order_seq_cst);  // seq_cst: pairs with the test's loads
    if (where_ == where::do_work) throw std::runtime_error("do_work failed");
    return {};
  }
  ts::result<void> after_stop() override {
    if (where_ == where::after_stop) throw 42;  // not even a std::exception
    return {};
  }
  void on_error(const ts::error& e) override {
    std::lock_guard lock(m_);
    errors_.push_back(e);
  }

 private:
  where where_;
  std::mutex m_;
  std::vector<ts::error> errors_;
};

bool mentions(const ts::error& e, const char* text) { return e.message().find(text) != std::string::npos; }

}  // namespace

TEST(ThreadBase, ExceptionFromBeforeStartIsReturnedByStart) {
  throwing_thread t(throwing_thread::where::before_start);
  auto r = t.start();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::job_failed);
  EXPECT_TRUE(mentions(r.error(), "before_start failed")) << r.error().to_string();
  EXPECT_FALSE(t.is_running());
}

TEST(ThreadBase, ExceptionFromDoWorkGoesToOnErrorAndTheLoopGoesOn) {
  throwing_thread t(throwing_thread::where::do_work);
  ASSERT_TRUE(t.start());
  t.wake();
  // seq_cst: pairs with the thread's RMW
  ASSERT_TRUE(eventually([&] { return t.rounds.load(std::memory_order_seq_cst) >= 1; }));
  t.wake();
  // seq_cst: pairs with the thread's RMW
  ASSERT_TRUE(eventually([&] { return t.rounds.load(std::memory_order_seq_cst) >= 2; }));
  ASSERT_TRUE(t.stop());
  const auto errors = t.errors();
  ASSERT_GE(errors.size(), 2U);
  EXPECT_EQ(errors[0].code(), ts::error_code::job_failed);
  EXPECT_TRUE(mentions(errors[0], "do_work failed")) << errors[0].to_string();
}

TEST(ThreadBase, ExceptionFromAfterStopGoesToOnError) {
  throwing_thread t(throwing_thread::where::after_stop);
  ASSERT_TRUE(t.start());
  ASSERT_TRUE(t.stop());
  const auto errors = t.errors();
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].code(), ts::error_code::job_failed);
  EXPECT_TRUE(mentions(errors[0], "after_stop()")) << errors[0].to_string();
}

TEST(ThreadBase, ExceptionFromShouldContinueWorkIsReportedAsFalse) {
  throwing_thread t(throwing_thread::where::should_continue);
  ASSERT_TRUE(t.start());
  t.wake();
  // seq_cst: pairs with the thread's RMW
  ASSERT_TRUE(eventually([&] { return t.rounds.load(std::memory_order_seq_cst) >= 1; }));
  ASSERT_TRUE(t.stop());
  const auto errors = t.errors();
  ASSERT_GE(errors.size(), 1U);
  EXPECT_TRUE(mentions(errors[0], "should_continue_work failed")) << errors[0].to_string();
}

namespace {
// do_work() stops (and starts) itself on its first round, at once after
// start(): the calls must answer without touching the thread handle that
// start() may still be assigning.
class self_stopping_thread : public ts::thread_base {
 public:
  self_stopping_thread() : thread_base("self-stop") {}
  ~self_stopping_thread() override { (void)stop(); }
  std::atomic<int> stop_code{-1};
  std::atomic<int> start_code{-1};

 protected:
  bool should_continue_work() const override { return !done_.load(std::memory_order_acquire); }  // pairs with do_work
  ts::result<void> do_work() override {
    auto s = stop();
    auto r = start();
    // seq_cst: pairs with the test's loads
    stop_code.store(s ? 0 : static_cast<int>(s.error().code()), std::memory_order_seq_cst);
    start_code.store(r ? 0 : static_cast<int>(r.error().code()), std::memory_order_seq_cst);
    done_.store(true, std::memory_order_release);  // pairs with should_continue_work()
    return {};
  }

 private:
  std::atomic<bool> done_{false};
};
}  // namespace

TEST(ThreadBase, StopAndStartFromItsOwnThreadAreRefusedWithoutARace) {
  for (int i = 0; i < 50; ++i) {
    self_stopping_thread t;
    ASSERT_TRUE(t.start());
    // seq_cst: pairs with do_work()'s stores
    ASSERT_TRUE(eventually([&] { return t.start_code.load(std::memory_order_seq_cst) != -1; }));
    EXPECT_EQ(t.stop_code.load(std::memory_order_seq_cst), static_cast<int>(ts::error_code::invalid_argument));
    EXPECT_EQ(t.start_code.load(std::memory_order_seq_cst), static_cast<int>(ts::error_code::already_started));
    ASSERT_TRUE(t.stop());
  }
}

// 8 threads call start(), stop() and wake() on one object at random; every
// call answers, exactly one start() wins while the thread is down, and the
// object ends stopped and restartable (run under TSan in CI).
TEST(ThreadBase, ConcurrentStartStopWakeFromEightThreads) {
  recording_thread t;
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  // At most 4000 calls in all, and no new call after 5 s (a loaded machine
  // makes each start/stop pair cost whole time slices).
  std::atomic<std::int64_t> calls_left{static_cast<std::int64_t>(ts::test::scaled(4000))};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int c = 0; c < 8; ++c) {
    callers.emplace_back([&, c] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();  // pairs with the release below
      std::uint32_t x = 2463534242U + static_cast<std::uint32_t>(c);
      // relaxed: a shared countdown only
      while (calls_left.fetch_sub(1, std::memory_order_relaxed) > 0 && std::chrono::steady_clock::now() < deadline) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        switch (x % 3) {
          case 0: {
            auto r = t.start();
            if (!r && r.error().code() != ts::error_code::already_started) {
              failures.fetch_add(1, std::memory_order_relaxed);  // counted, checked after join
            }
            break;
          }
          case 1:
            if (!t.stop()) failures.fetch_add(1, std::memory_order_relaxed);  // counted, checked after join
            break;
          default:
            t.wake();
            break;
        }
      }
    });
  }
  go.store(true, std::memory_order_release);  // pairs with the callers' acquire
  for (auto& c : callers) c.join();
  EXPECT_EQ(failures.load(std::memory_order_relaxed), 0);
  ASSERT_TRUE(t.stop());
  EXPECT_FALSE(t.is_running());
  ASSERT_TRUE(t.start());
  EXPECT_TRUE(t.is_running());
  ASSERT_TRUE(t.stop());
}

TEST(ThreadBase, StartReportsAThreadTheSystemRefuses) {
  recording_thread t;
  ts::detail::testing::set_thread_start_budget(0);
  auto r = t.start();
  ts::detail::testing::set_thread_start_budget(-1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ts::error_code::resource_exhausted);
  EXPECT_FALSE(t.is_running());
  ASSERT_TRUE(t.start());  // the object is usable afterwards
  ASSERT_TRUE(t.stop());
}

TEST(ThreadBase, RunsOnAThreadWithTheRequestedStackSize) {
  class stack_probe : public ts::thread_base {
   public:
    stack_probe() : thread_base("stack", std::size_t{256} << 20) {}
    ~stack_probe() override { (void)stop(); }
    std::atomic<bool> ok{false};

   protected:
    ts::result<void> before_start() override {
      // 16 MiB of frames: twice the usual default stack (8 MiB).
      ok.store(recurse(16 * 1024) != 0, std::memory_order_release);  // pairs with the test's acquire
      return {};
    }

   private:
    static int recurse(int kib) {
      volatile char frame[1024];
      frame[0] = static_cast<char>(kib);
      if (kib == 0) return 1;
      return recurse(kib - 1) + (frame[0] == 0 ? 1 : 0);
    }
  };
  stack_probe p;
  ASSERT_TRUE(p.start());
  EXPECT_TRUE(p.ok.load(std::memory_order_acquire));  // pairs with before_start()
  ASSERT_TRUE(p.stop());
}

// A service destroyed by its own do_work() (the last shared_ptr to it
// dropped on its thread): the thread is detached and ends when the hook
// returns, touching nothing of the object. (Its loop went on with the freed
// object - a use after free - and the thread was never detached.)
namespace {
std::atomic<bool> g_self_destroyed_thread_ended{false};
std::atomic<bool> g_self_destroying_started{false};
struct thread_end_flag {
  ~thread_end_flag() { g_self_destroyed_thread_ended.store(true, std::memory_order_release); }  // pairs with the test
};

class self_destroying : public ts::thread_base {
 public:
  explicit self_destroying(std::shared_ptr<self_destroying>* owner, std::atomic<int>* after_stops)
      : thread_base("self-destroying"), owner_(owner), after_stops_(after_stops) {}
  ~self_destroying() override { (void)stop(); }  // invalid_argument on its own thread: nothing to join

 protected:
  ts::result<void> do_work() override {
    // Only once start() has returned on the test's thread (destroying the
    // object while another thread is inside one of its members is outside
    // the contract). acquire: pairs with the release store in the test.
    if (!g_self_destroying_started.load(std::memory_order_acquire)) return {};
    thread_local thread_end_flag flag;  // set when this thread ends
    (void)flag;
    owner_->reset();  // the last reference: destroys this object, here
    return {};
  }
  ts::result<void> after_stop() override {
    after_stops_->fetch_add(1, std::memory_order_relaxed);  // read after the thread ended
    return {};
  }

 private:
  std::shared_ptr<self_destroying>* owner_;
  std::atomic<int>* after_stops_;
};
}  // namespace

namespace {
// Destroys itself in its first do_work(), which may run before start() has
// returned on the starting thread.
class destroyed_at_once : public ts::thread_base {
 public:
  destroyed_at_once(std::shared_ptr<destroyed_at_once>* owner, std::atomic<bool>* ended)
      : thread_base("destroyed-at-once"), owner_(owner), ended_(ended) {}
  ~destroyed_at_once() override { (void)stop(); }

 protected:
  bool should_continue_work() const override { return true; }
  ts::result<void> do_work() override {
    std::atomic<bool>* ended = ended_;
    owner_->reset();                                // the last reference: destroys this object, here
    ended->store(true, std::memory_order_release);  // pairs with the test's acquire
    return {};
  }

 private:
  std::shared_ptr<destroyed_at_once>* owner_;
  std::atomic<bool>* ended_;
};
}  // namespace

// start() releases its two locks so that nothing of the object is touched
// once the thread may run a hook: the lifecycle lock was released after the
// state lock, and a do_work() destroying the object at once raced with that
// unlock (TSan: data race on the destroyed mutex).
TEST(ThreadBase, AHookMayDestroyItsObjectBeforeStartHasReturned) {
  for (int round = 0; round < 50; ++round) {
    std::atomic<bool> ended{false};
    auto owner = std::make_shared<std::shared_ptr<destroyed_at_once>>();
    *owner = std::make_shared<destroyed_at_once>(owner.get(), &ended);
    destroyed_at_once* raw = owner->get();
    ASSERT_TRUE(raw->start());  // raw is not touched after this call
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!ended.load(std::memory_order_acquire)) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the thread did not destroy its object";
      std::this_thread::yield();
    }
    EXPECT_EQ(*owner, nullptr);
  }
}

TEST(ThreadBase, AHookMayDestroyItsOwnObject) {
  // (Set by an earlier run of this test under --gtest_repeat.)
  g_self_destroying_started.store(false, std::memory_order_relaxed);
  g_self_destroyed_thread_ended.store(false, std::memory_order_relaxed);
  std::atomic<int> after_stops{0};
  auto owner = std::make_shared<std::shared_ptr<self_destroying>>();
  *owner = std::make_shared<self_destroying>(owner.get(), &after_stops);
  self_destroying* raw = owner->get();
  // Woken by its interval (a wake() from here could still be inside the
  // object when the thread destroys it).
  raw->set_wake_interval(std::chrono::milliseconds(1));
  ASSERT_TRUE(raw->start());
  g_self_destroying_started.store(true, std::memory_order_release);  // do_work() then destroys the object
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!g_self_destroyed_thread_ended.load(std::memory_order_acquire)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the thread did not end";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(*owner, nullptr);
  EXPECT_EQ(after_stops.load(std::memory_order_relaxed), 0);  // the object was gone: no hook after that
}

// A hook that destroys its object while a stop() on another thread waits
// for the thread (after_stop() always runs inside one), or that destroys it
// and then fails: stop() returns {} touching nothing of the object, and what
// the destroying hook returned or threw is dropped - on_error() is a member
// of the destroyed object. (stop() joined through the destroyed object's
// thread handle: a null pointer; the loop called on_error() and read the
// name of the freed object: use after free.)
namespace {
enum class destroyer { after_stop, do_work };
enum class ending { ok, error, exception };

class destroyed_by_its_hook : public ts::thread_base {
 public:
  destroyed_by_its_hook(destroyer who, ending how, std::atomic<int>* reports, std::atomic<int>* destroyed)
      : thread_base("destroyed-by-hook"), who_(who), how_(how), reports_(reports), destroyed_(destroyed) {}
  ~destroyed_by_its_hook() override {
    (void)stop();                                         // invalid_argument on its own thread
    destroyed_->fetch_add(1, std::memory_order_release);  // pairs with the test's acquire
  }
  std::shared_ptr<destroyed_by_its_hook> self;  // the last reference, dropped by the hook

 protected:
  ts::result<void> do_work() override {
    if (who_ != destroyer::do_work || !armed.load(std::memory_order_acquire)) return {};  // pairs with the test
    return end_here();
  }
  ts::result<void> after_stop() override { return end_here(); }
  void on_error(const ts::error& /*e*/) override {
    // relaxed: on the object's thread before its destructor's release
    // increment of `destroyed_`, which the test acquires before reading this.
    reports_->fetch_add(1, std::memory_order_relaxed);
  }

 public:
  std::atomic<bool> armed{false};  // destroyer::do_work: destroy in the next round

 private:
  ts::result<void> end_here() {
    const ending how = how_;
    self.reset();  // destroys this object, here: nothing of it is touched below
    if (how == ending::exception) throw std::runtime_error("thrown by the hook that destroyed its object");
    if (how == ending::error) return ts::make_error(ts::error_code::job_failed, "returned by the destroying hook");
    return {};
  }

  destroyer who_;
  ending how_;
  std::atomic<int>* reports_;
  std::atomic<int>* destroyed_;
};
}  // namespace

TEST(ThreadBase, AHookMayDestroyItsObjectWhileStopWaitsForItAndThenFail) {
  for (const destroyer who : {destroyer::after_stop, destroyer::do_work}) {
    for (const ending how : {ending::ok, ending::error, ending::exception}) {
      SCOPED_TRACE(static_cast<int>(who) * 10 + static_cast<int>(how));
      std::atomic<int> reports{0};
      std::atomic<int> destroyed{0};
      auto owner = std::make_shared<destroyed_by_its_hook>(who, how, &reports, &destroyed);
      owner->self = owner;
      destroyed_by_its_hook* raw = owner.get();
      if (who == destroyer::do_work) raw->set_wake_interval(1ms);
      ASSERT_TRUE(raw->start());
      owner.reset();  // the object's own reference is the last
      if (who == destroyer::do_work) {
        raw->armed.store(true, std::memory_order_release);  // the next round destroys it; raw is not touched again
      } else {
        EXPECT_TRUE(raw->stop()) << "the stop() the hook destroyed the object under";
      }
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (destroyed.load(std::memory_order_acquire) == 0) {  // pairs with the destructor's release
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the hook did not destroy its object";
        std::this_thread::sleep_for(1ms);
      }
      EXPECT_EQ(destroyed.load(std::memory_order_acquire), 1);  // as above
      // relaxed: ordered by the acquire above (see on_error()).
      EXPECT_EQ(reports.load(std::memory_order_relaxed), 0) << "on_error() of a destroyed object";
    }
  }
}

// A hook that destroys its own object and builds another in the same
// storage: the new object is not the hook's own, so its start() and stop()
// from there succeed, and its thread is joined, not detached. (The thread
// kept pointing at the destroyed object as its own: the new object's
// start() was refused with already_started, and the destructor of one
// started elsewhere detached its running thread, which then used the freed
// object.)
namespace {
class in_place_service : public ts::thread_base {
 public:
  in_place_service(void* storage, int generation, std::atomic<bool>* armed, std::atomic<int>* rounds,
                   ts::result<void>* start_result, ts::result<void>* stop_result, std::atomic<bool>* done)
      : thread_base("in-place"),
        armed_(armed),
        storage_(storage),
        generation_(generation),
        rounds_(rounds),
        start_result_(start_result),
        stop_result_(stop_result),
        done_(done) {}
  ~in_place_service() override { (void)stop(); }

 protected:
  ts::result<void> do_work() override {
    if (generation_ != 0) {
      rounds_->fetch_add(1, std::memory_order_relaxed);  // read after the replacement's stop()
      return {};
    }
    // Only once start() has returned on the test's thread (see
    // AHookMayDestroyItsOwnObject). acquire: pairs with the test's release.
    if (!armed_->load(std::memory_order_acquire)) return {};
    // Copies first: *this is gone after the destructor call.
    void* storage = storage_;
    std::atomic<bool>* armed = armed_;
    std::atomic<int>* rounds = rounds_;
    ts::result<void>* start_result = start_result_;
    ts::result<void>* stop_result = stop_result_;
    std::atomic<bool>* done = done_;
    this->~in_place_service();
    auto* replacement = new (storage) in_place_service(storage, 1, armed, rounds, start_result, stop_result, done);
    *start_result = replacement->start();
    replacement->wake();
    const auto deadline = std::chrono::steady_clock::now() + 20s;  // within the test's own limit
    while (rounds->load(std::memory_order_relaxed) < 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    *stop_result = replacement->stop();
    replacement->~in_place_service();
    done->store(true, std::memory_order_release);  // pairs with the test's acquire
    return {};
  }

 private:
  std::atomic<bool>* armed_;
  void* storage_;
  int generation_;
  std::atomic<int>* rounds_;
  ts::result<void>* start_result_;
  ts::result<void>* stop_result_;
  std::atomic<bool>* done_;
};
}  // namespace

TEST(ThreadBase, AnObjectBuiltWhereAHookDestroyedItsOwnIsNotThatThreadsOwn) {
  alignas(in_place_service) static unsigned char storage[sizeof(in_place_service)];
  std::atomic<bool> armed{false};
  std::atomic<int> rounds{0};
  std::atomic<bool> done{false};
  ts::result<void> start_result;
  ts::result<void> stop_result;
  auto* first = new (storage) in_place_service(storage, 0, &armed, &rounds, &start_result, &stop_result, &done);
  // Woken by its interval (a wake() from here could still be inside the
  // object when the hook destroys it).
  first->set_wake_interval(1ms);
  ASSERT_TRUE(first->start());
  armed.store(true, std::memory_order_release);  // start() has returned: the hook may destroy the object now
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!done.load(std::memory_order_acquire)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the hook did not finish";
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(start_result) << start_result.error().to_string();
  EXPECT_TRUE(stop_result) << stop_result.error().to_string();
  EXPECT_GE(rounds.load(std::memory_order_relaxed), 1);  // the replacement's thread ran a round
}
