#include "thread_system/sync/cancellation.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "../support/test_support.hpp"

namespace ts = thread_system;

namespace {

// Two persistent threads that run one step each per round, started together.
// Each round crosses three barriers, so on an oversubscribed machine a round
// costs several scheduler time slices: the rounds run under a
// test::round_budget, and run() returns how many ran.
class round_runner {
 public:
  template <typename A, typename B, typename Check>
  static std::size_t run(std::size_t rounds, A&& a, B&& b, Check&& check) {
    ts::test::round_budget budget(rounds);
    std::barrier start(2);
    std::barrier end(2);
    // Written by this thread before a start barrier and read by the other
    // after it: the barrier orders the two, so relaxed is enough.
    std::atomic<bool> stop{false};
    std::thread other([&] {
      for (std::size_t i = 0;; ++i) {
        start.arrive_and_wait();
        if (stop.load(std::memory_order_relaxed)) return;  // ordered by `start`
        b(i);
        end.arrive_and_wait();
        end.arrive_and_wait();  // wait for the check before the next setup
      }
    });
    for (std::size_t i = 0; budget.next(i); ++i) {
      start.arrive_and_wait();
      a(i);
      end.arrive_and_wait();
      check(i);
      end.arrive_and_wait();
    }
    stop.store(true, std::memory_order_relaxed);  // ordered by `start` below
    start.arrive_and_wait();
    other.join();
    return budget.ran();
  }
};

}  // namespace

TEST(Cancellation, SourceCancelsOnceAndTokensSeeIt) {
  ts::cancellation_source src;
  ts::cancellation_token tok = src.token();
  ts::cancellation_token copy = tok;
  EXPECT_FALSE(src.is_cancelled());
  EXPECT_FALSE(copy.is_cancelled());
  EXPECT_TRUE(copy.can_be_cancelled());
  EXPECT_TRUE(src.cancel());
  EXPECT_FALSE(src.cancel());
  EXPECT_FALSE(tok.cancel());
  EXPECT_TRUE(tok.is_cancelled());
  EXPECT_TRUE(copy.is_cancelled());
  EXPECT_EQ(tok, copy);
}

TEST(Cancellation, CallbacksRunOnceInRegistrationOrderOnTheCancellingThread) {
  ts::cancellation_source src;
  std::vector<int> order;
  std::thread::id ran_on;
  auto r1 = src.token().register_callback([&] { order.push_back(1); });
  auto r2 = src.token().register_callback([&] {
    order.push_back(2);
    ran_on = std::this_thread::get_id();
  });
  auto r3 = src.token().register_callback([&] { order.push_back(3); });
  EXPECT_TRUE(r2.active());
  std::thread t([&] { EXPECT_TRUE(src.cancel()); });
  const std::thread::id canceller = t.get_id();
  t.join();
  EXPECT_FALSE(src.cancel());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(ran_on, canceller);
  EXPECT_FALSE(r1.unregister());  // already ran
}

TEST(Cancellation, RegisterAfterCancelRunsInlineOnTheRegisteringThread) {
  ts::cancellation_source src;
  src.cancel();
  int ran = 0;
  std::thread::id ran_on;
  auto reg = src.token().register_callback([&] {
    ++ran;
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(reg.active());
  EXPECT_FALSE(reg.unregister());
  EXPECT_EQ(ran, 1);
}

TEST(Cancellation, UnregisteredCallbackNeverRuns) {
  ts::cancellation_source src;
  int ran = 0;
  {
    auto reg = src.token().register_callback([&] { ++ran; });
    EXPECT_TRUE(reg.unregister());
    EXPECT_FALSE(reg.active());
  }
  {
    auto reg = src.token().register_callback([&] { ++ran; });
  }  // destructor unregisters
  src.cancel();
  EXPECT_EQ(ran, 0);
}

TEST(Cancellation, MovedRegistrationKeepsTheCallback) {
  ts::cancellation_source src;
  int ran = 0;
  ts::cancellation_registration outer;
  {
    auto reg = src.token().register_callback([&] { ++ran; });
    outer = std::move(reg);
    EXPECT_FALSE(reg.active());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  }
  EXPECT_TRUE(outer.active());
  src.cancel();
  EXPECT_EQ(ran, 1);
}

// The race the issue names: a callback registered for the life of a piece of
// work, the work completing (unregister) while another thread cancels.
// Either unregister removed it (then it never runs) or it ran exactly once
// and had finished when unregister returned.
TEST(Cancellation, CancelVersusCompleteRaceHasExactCallbackCounts) {
  const std::size_t rounds = ts::test::scaled(100'000);
  std::optional<ts::cancellation_source> src;
  std::optional<ts::cancellation_registration> reg;
  std::atomic<int> ran{0};
  std::atomic<bool> finished{false};
  bool removed = false;
  bool finished_at_return = false;
  std::size_t removed_rounds = 0;
  std::size_t ran_total = 0;

  auto setup = [&] {
    src.emplace();
    ran.store(0, std::memory_order_relaxed);
    finished.store(false, std::memory_order_relaxed);
    reg.emplace(src->token().register_callback([&] {
      ran.fetch_add(1, std::memory_order_relaxed);
      for (int i = 0; i < 50; ++i) ts::detail::cpu_relax();  // widen the window
      finished.store(true, std::memory_order_release);
    }));
  };
  setup();
  const std::size_t ran_rounds = round_runner::run(
      rounds,
      [&](std::size_t) {
        removed = reg->unregister();
        finished_at_return = finished.load(std::memory_order_acquire);
      },
      [&](std::size_t) { src->cancel(); },
      [&](std::size_t) {
        const int r = ran.load(std::memory_order_relaxed);
        if (removed) {
          ASSERT_EQ(r, 0);
          ++removed_rounds;
        } else {
          ASSERT_EQ(r, 1);
          ASSERT_TRUE(finished_at_return) << "unregister returned while the callback was still running";
        }
        ran_total += static_cast<std::size_t>(r);
        reg.reset();
        setup();
      });
  EXPECT_EQ(removed_rounds + ran_total, ran_rounds);
}

// Registration racing with cancel: the callback runs exactly once, either
// inline in register_callback or on the cancelling thread.
TEST(Cancellation, RegisterVersusCancelRaceRunsEachCallbackOnce) {
  const std::size_t rounds = ts::test::scaled(100'000);
  std::optional<ts::cancellation_source> src{std::in_place};
  std::atomic<int> ran{0};
  std::optional<ts::cancellation_registration> reg;
  round_runner::run(
      rounds,
      [&](std::size_t) {
        reg.emplace(src->token().register_callback([&] { ran.fetch_add(1, std::memory_order_seq_cst); }));
      },
      [&](std::size_t) { src->cancel(); },
      [&](std::size_t) {
        ASSERT_EQ(ran.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
        reg.reset();
        src.emplace();
        ran.store(0, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
      });
}

// After unregister returns, the callback never runs and does not touch the
// object it captured, which is freed at once (ASan reports a use after free).
TEST(Cancellation, UnregisterVersusConcurrentCancelNeverRunsAfterReturn) {
  const std::size_t rounds = ts::test::scaled(50'000);
  std::atomic<int> violations{0};
  for (std::size_t i = 0; i < rounds; i += 64) {
    ts::cancellation_source src;
    struct slot {
      std::unique_ptr<int> payload = std::make_unique<int>(0);
      std::atomic<bool> unregistered{false};
      std::optional<ts::cancellation_registration> reg;
    };
    std::vector<slot> slots(64);
    for (auto& s : slots) {
      slot* sp = &s;
      s.reg.emplace(src.token().register_callback([sp, &violations] {
        // seq_cst: pairs with the checking load(s)
        if (sp->unregistered.load(std::memory_order_acquire)) violations.fetch_add(1, std::memory_order_seq_cst);
        *sp->payload += 1;
      }));
    }
    std::thread canceller([&] { src.cancel(); });
    for (auto& s : slots) {
      (void)s.reg->unregister();
      s.unregistered.store(true, std::memory_order_release);
      s.payload.reset();  // the callback must be done with it
    }
    canceller.join();
  }
  EXPECT_EQ(violations.load(std::memory_order_seq_cst), 0);  // seq_cst: pairs with the writers' RMW/store
}

TEST(Cancellation, UnregisterFromInsideTheCallbackDoesNotDeadlock) {
  ts::cancellation_source src;
  std::optional<ts::cancellation_registration> reg;
  bool unregister_result = true;
  int ran = 0;
  reg.emplace(src.token().register_callback([&] {
    ++ran;
    unregister_result = reg->unregister();  // we are the running callback
  }));
  // Also: a callback that destroys another's registration that already ran,
  // and one that destroys its own registration object.
  std::optional<ts::cancellation_registration> self_destroying;
  self_destroying.emplace(src.token().register_callback([&] {
    ++ran;
    self_destroying.reset();
  }));
  std::thread t([&] { src.cancel(); });
  t.join();
  EXPECT_EQ(ran, 2);
  EXPECT_FALSE(unregister_result);
  EXPECT_FALSE(self_destroying.has_value());
}

TEST(Cancellation, DestroyingTheLastReferenceInsideACallbackIsSafe) {
  auto src = std::make_unique<ts::cancellation_source>();
  std::optional<ts::cancellation_registration> reg;
  int ran = 0;
  ts::cancellation_source* raw = src.get();
  reg.emplace(raw->token().register_callback([&] {
    ++ran;
    reg.reset();  // drops the registration's state reference
    src.reset();  // and the source's: cancel() keeps its own until it returns
  }));
  raw->cancel();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(src, nullptr);
}

TEST(Cancellation, UnregisterWaitsForACallbackRunningOnAnotherThread) {
  ts::cancellation_source src;
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  auto reg = src.token().register_callback([&] {
    entered.store(true, std::memory_order_release);
    while (!release.load(std::memory_order_acquire)) std::this_thread::yield();
    finished.store(true, std::memory_order_release);
  });
  std::thread canceller([&] { src.cancel(); });
  while (!entered.load(std::memory_order_acquire)) std::this_thread::yield();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release.store(true, std::memory_order_release);
  });
  EXPECT_FALSE(reg.unregister());
  EXPECT_TRUE(finished.load(std::memory_order_acquire));
  canceller.join();
  releaser.join();
}

TEST(Cancellation, LinkedSourceCancelsWhenAnyParentDoes) {
  ts::cancellation_source a;
  ts::cancellation_source b;
  auto child = ts::cancellation_source::linked(a.token(), b.token());
  int ran = 0;
  auto reg = child.token().register_callback([&] { ++ran; });
  EXPECT_FALSE(child.is_cancelled());
  b.cancel();
  EXPECT_TRUE(child.is_cancelled());
  EXPECT_EQ(ran, 1);
  a.cancel();
  EXPECT_EQ(ran, 1);

  // Cancelling the child does not cancel the parents.
  ts::cancellation_source p;
  auto c2 = ts::cancellation_source::linked({p.token()});
  c2.cancel();
  EXPECT_FALSE(p.is_cancelled());

  // A parent already cancelled: the child starts cancelled.
  auto c3 = ts::cancellation_source::linked(a.token(), ts::cancellation_token::none());
  EXPECT_TRUE(c3.is_cancelled());

  // Seed spelling.
  ts::cancellation_token s1 = ts::cancellation_token::create();
  ts::cancellation_token s2 = ts::cancellation_token::create();
  ts::cancellation_token linked = ts::cancellation_token::create_linked({s1, s2});
  s2.cancel();
  EXPECT_TRUE(linked.is_cancelled());
  EXPECT_FALSE(s1.is_cancelled());
}

TEST(Cancellation, LinkedChildUnregistersFromParentsWhenDestroyed) {
  ts::cancellation_source parent;
  std::weak_ptr<int> probe;
  {
    auto child = ts::cancellation_source::linked(parent.token());
    auto marker = std::make_shared<int>(7);
    probe = marker;
    child.token().register_callback([marker] {}).detach();  // lives with the child's state
  }
  // The child's state (and the detached callback's capture) are gone: the
  // parent did not keep it alive.
  EXPECT_TRUE(probe.expired());
  EXPECT_TRUE(parent.cancel());  // the removed link is not called (ASan would see a stale one)
}

// The header: "Parents are not kept alive by the child." A parent whose last
// source and token are gone dies (its detached callback's capture with it)
// while its child lives on; the child still works and dies cleanly after.
TEST(Cancellation, LinkedChildDoesNotKeepItsParentsAlive) {
  std::weak_ptr<int> parent_capture;
  std::weak_ptr<int> other_capture;
  std::optional<ts::cancellation_source> child;
  ts::cancellation_source other;  // a second parent that lives on
  {
    ts::cancellation_source parent;
    auto marker = std::make_shared<int>(1);
    parent_capture = marker;
    parent.token().register_callback([marker] {}).detach();  // lives with the parent's state
    child.emplace(ts::cancellation_source::linked(parent.token(), other.token()));
    auto marker2 = std::make_shared<int>(2);
    other_capture = marker2;
    other.token().register_callback([marker2] {}).detach();
  }
  EXPECT_TRUE(parent_capture.expired()) << "the child kept its dead parent's state alive";
  EXPECT_FALSE(other_capture.expired());
  EXPECT_FALSE(child->is_cancelled());
  // The live parent still cancels the child.
  int ran = 0;
  auto reg = child->token().register_callback([&] { ++ran; });
  EXPECT_TRUE(other.cancel());
  EXPECT_TRUE(child->is_cancelled());
  EXPECT_EQ(ran, 1);
  // The child dies after both of its links were used up in both ways (the
  // dead parent's node and the ran one); ASan/LSan check the node counts.
  reg = {};
  child.reset();

  // A child that dies after its only parent did.
  std::optional<ts::cancellation_source> orphan;
  {
    ts::cancellation_source parent;
    orphan.emplace(ts::cancellation_source::linked({parent.token()}));
  }
  EXPECT_FALSE(orphan->is_cancelled());
  EXPECT_TRUE(orphan->cancel());
  orphan.reset();
}

// Children dying while their parent is being cancelled on another thread.
TEST(Cancellation, LinkedChildDestructionRacesWithParentCancel) {
  const std::size_t rounds = ts::test::scaled(20'000);
  std::optional<ts::cancellation_source> parent{std::in_place};
  std::optional<ts::cancellation_source> child;
  std::atomic<int> ran{0};
  auto setup = [&] {
    parent.emplace();
    child.emplace(ts::cancellation_source::linked(parent->token()));
    child->token().register_callback([&] { ran.fetch_add(1, std::memory_order_relaxed); }).detach();
  };
  setup();
  int total = 0;
  const std::size_t ran_rounds = round_runner::run(
      rounds, [&](std::size_t) { child.reset(); }, [&](std::size_t) { parent->cancel(); },
      [&](std::size_t) {
        const int r = ran.exchange(0, std::memory_order_seq_cst);  // seq_cst: pairs with the callbacks' fetch_add
        ASSERT_LE(r, 1);
        total += r;
        setup();
      });
  EXPECT_LE(total, static_cast<int>(ran_rounds));
}

// std::stop_token interop exists where the standard library has it
// (detail/config.hpp).
#if THREAD_SYSTEM_HAS_STOP_TOKEN
TEST(Cancellation, FromStdStopToken) {
  std::stop_source ss;
  ts::cancellation_token tok = ts::cancellation_token::from_stop_token(ss.get_token());
  int ran = 0;
  auto reg = tok.register_callback([&] { ++ran; });
  EXPECT_FALSE(tok.is_cancelled());
  ss.request_stop();
  EXPECT_TRUE(tok.is_cancelled());
  EXPECT_EQ(ran, 1);

  std::stop_source already;
  already.request_stop();
  EXPECT_TRUE(ts::cancellation_source::from_stop_token(already.get_token()).is_cancelled());

  // A jthread's stop token drives a cancellation token.
  std::atomic<bool> seen{false};
  {
    std::jthread worker([&seen](std::stop_token st) {
      auto t = ts::cancellation_token::from_stop_token(st);
      while (!t.is_cancelled()) std::this_thread::yield();
      seen.store(true, std::memory_order_seq_cst);  // seq_cst: pairs with the checking load(s)
    });
  }                                                   // ~jthread requests stop and joins
  EXPECT_TRUE(seen.load(std::memory_order_seq_cst));  // seq_cst: pairs with the writers' RMW/store
}

TEST(Cancellation, ToStdStopToken) {
  ts::cancellation_source src;
  std::stop_token st = src.token().get_stop_token();
  EXPECT_TRUE(st.stop_possible());
  EXPECT_FALSE(st.stop_requested());
  int ran = 0;
  std::stop_callback cb(st, [&] { ++ran; });
  src.cancel();
  EXPECT_TRUE(st.stop_requested());
  EXPECT_EQ(ran, 1);
  // Asked for after the cancel: already requested.
  EXPECT_TRUE(src.token().get_stop_token().stop_requested());
  EXPECT_FALSE(ts::cancellation_token::none().get_stop_token().stop_possible());
}

// The header: the std::stop_token's stop is requested after the state's own
// callbacks ran, also for a token first asked for while cancel() runs them
// (from another thread, or from a callback itself). Deterministic: the
// callback holds the cancel until the main thread has its token.
TEST(Cancellation, AStopTokenMadeWhileCancelRunsTheCallbacksIsStoppedAfterThem) {
  ts::cancellation_source src;
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  std::stop_token from_inside;
  auto reg = src.token().register_callback([&] {
    from_inside = src.token().get_stop_token();
    entered.store(true, std::memory_order_release);  // pairs with the main thread's acquire loop
    while (!release.load(std::memory_order_acquire)) std::this_thread::yield();  // pairs with the store below
    finished.store(true, std::memory_order_release);  // pairs with the stop_callback's acquire load
  });
  std::thread canceller([&] { EXPECT_TRUE(src.cancel()); });
  while (!entered.load(std::memory_order_acquire)) std::this_thread::yield();  // pairs with the callback's store
  std::stop_token st = src.token().get_stop_token();
  EXPECT_FALSE(st.stop_requested()) << "stopped while the state's callback still runs";
  EXPECT_FALSE(from_inside.stop_requested());
  std::atomic<bool> saw_finished{false};
  std::stop_callback after(st, [&] {
    // relaxed: read after canceller.join(), which orders it
    saw_finished.store(finished.load(std::memory_order_acquire), std::memory_order_relaxed);
  });
  release.store(true, std::memory_order_release);  // pairs with the callback's acquire loop
  canceller.join();
  EXPECT_TRUE(st.stop_requested());
  EXPECT_TRUE(from_inside.stop_requested());
  EXPECT_TRUE(saw_finished.load(std::memory_order_relaxed))  // ordered by the join
      << "the std::stop_callback ran before the state's callback finished";
}

TEST(Cancellation, ToStdStopTokenRacingWithCancelNeverLosesTheStop) {
  const std::size_t rounds = ts::test::scaled(20'000);
  std::optional<ts::cancellation_source> src{std::in_place};
  std::stop_token st;
  round_runner::run(
      rounds, [&](std::size_t) { st = src->token().get_stop_token(); }, [&](std::size_t) { src->cancel(); },
      [&](std::size_t) {
        ASSERT_TRUE(st.stop_requested());
        src.emplace();
      });
}

#endif  // THREAD_SYSTEM_HAS_STOP_TOKEN

TEST(Cancellation, ThrowIfCancelledAndCheckCancelled) {
  ts::cancellation_source src;
  ts::cancellation_token tok = src.token();
  EXPECT_NO_THROW(tok.throw_if_cancelled());
  EXPECT_TRUE(tok.check_cancelled().has_value());
  src.cancel();
  try {
    tok.throw_if_cancelled();
    FAIL() << "expected error_exception";
  } catch (const ts::error_exception& e) {
    EXPECT_EQ(e.code(), ts::error_code::cancelled);
  }
  auto r = tok.check_cancelled();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ts::error_code::cancelled);
}

TEST(Cancellation, NoneTokenIsNeverCancelled) {
  ts::cancellation_token none = ts::cancellation_token::none();
  EXPECT_FALSE(none.can_be_cancelled());
  EXPECT_FALSE(none.cancel());
  EXPECT_FALSE(none.is_cancelled());
  int ran = 0;
  auto reg = none.register_callback([&] { ++ran; });
  EXPECT_FALSE(reg.active());
  EXPECT_EQ(ran, 0);
}

TEST(Cancellation, DefaultTokenHasNoStateLikeStdStopToken) {
  static_assert(std::is_nothrow_default_constructible_v<ts::cancellation_token>);
  ts::cancellation_token token;
  EXPECT_FALSE(token.can_be_cancelled());
  EXPECT_FALSE(token.cancel());
  EXPECT_FALSE(token.is_cancelled());
  EXPECT_TRUE(token.check_cancelled());
  EXPECT_EQ(token, ts::cancellation_token::none());
  int ran = 0;
  auto reg = token.register_callback([&] { ++ran; });
  EXPECT_FALSE(reg.active());
  EXPECT_EQ(ran, 0);
  // create() gives a token with a state; two of them are distinct.
  const ts::cancellation_token a = ts::cancellation_token::create();
  const ts::cancellation_token b = ts::cancellation_token::create();
  EXPECT_TRUE(a.can_be_cancelled());
  EXPECT_NE(a, b);
}

TEST(Cancellation, SeedStyleTokenCancelsAndRunsDetachedCallbacks) {
  ts::cancellation_token token = ts::cancellation_token::create();  // seed: a token with a state of its own
  std::atomic<int> ran{0};
  // seq_cst: pairs with the checking load(s)
  token.register_callback([&] { ran.fetch_add(1, std::memory_order_seq_cst); }).detach();
  ts::cancellation_token copy = token;
  std::thread t([copy] { copy.cancel(); });
  t.join();
  EXPECT_TRUE(token.is_cancelled());
  EXPECT_EQ(ran.load(std::memory_order_seq_cst), 1);  // seq_cst: pairs with the writers' RMW/store
}

TEST(Cancellation, ManyThreadsRegisteringWhileOneCancels) {
  const std::size_t rounds = ts::test::scaled(2'000);
  for (std::size_t r = 0; r < rounds; ++r) {
    ts::cancellation_source src;
    std::atomic<int> ran{0};
    constexpr int per_thread = 8;
    std::vector<std::thread> threads;
    std::vector<std::vector<ts::cancellation_registration>> regs(3);
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i)
          // seq_cst: pairs with the checking load(s)
          regs[t].push_back(src.token().register_callback([&] { ran.fetch_add(1, std::memory_order_seq_cst); }));
      });
    }
    src.cancel();
    for (auto& th : threads) th.join();
    ASSERT_EQ(ran.load(std::memory_order_seq_cst), 3 * per_thread);  // seq_cst: pairs with the writers' RMW/store
  }
}

// When unregister() returns after waiting for a running callback, the
// callback's function object - and what it captured by value - has been
// destroyed: the captures may refer to objects the caller frees next. (The
// cancelling thread used to destroy it after waking the waiter.)
TEST(CancellationRegression, UnregisterReturnsAfterTheCallbacksCapturesAreDestroyed) {
  struct counted_capture {
    std::atomic<int>* alive;
    explicit counted_capture(std::atomic<int>* a) : alive(a) { alive->fetch_add(1, std::memory_order_relaxed); }
    counted_capture(counted_capture&& o) noexcept : alive(std::exchange(o.alive, nullptr)) {}
    counted_capture(const counted_capture&) = delete;
    counted_capture& operator=(const counted_capture&) = delete;
    counted_capture& operator=(counted_capture&&) = delete;
    ~counted_capture() {
      if (alive != nullptr) alive->fetch_sub(1, std::memory_order_relaxed);
    }
  };
  int late = 0;
  ts::test::round_budget budget(ts::test::scaled(5'000), 200);
  for (std::size_t i = 0; budget.next(i); ++i) {
    std::atomic<int> alive{0};
    std::atomic<bool> entered{false};
    ts::cancellation_source source;
    auto registration = source.token().register_callback([capture = counted_capture{&alive}, &entered]() noexcept {
      entered.store(true, std::memory_order_release);              // pairs with the acquire load below
      std::this_thread::sleep_for(std::chrono::microseconds(20));  // still running when unregister() comes
    });
    std::thread canceller([&source] { source.cancel(); });
    while (!entered.load(std::memory_order_acquire)) {
    }
    registration.unregister();  // waits for the running callback
    // acquire: unregister() synchronised with the callback's end; the
    // capture's destructor ran before that (relaxed counter, ordered by it).
    if (alive.load(std::memory_order_relaxed) != 0) ++late;
    canceller.join();
  }
  EXPECT_EQ(late, 0) << "rounds in which the callback's capture outlived unregister()";
}

// A moved-from source has no state: cancel() and is_cancelled() are false
// (they dereferenced a null state), its token can never be cancelled.
TEST(CancellationRegression, AMovedFromSourceIsSafeToUse) {
  ts::cancellation_source a;
  ts::cancellation_source b = std::move(a);
  EXPECT_FALSE(a.is_cancelled());              // NOLINT(bugprone-use-after-move): what this test is about
  EXPECT_FALSE(a.cancel());                    // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(a.token().can_be_cancelled());  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(b.is_cancelled());
  EXPECT_TRUE(b.cancel());
  EXPECT_TRUE(b.is_cancelled());
}
