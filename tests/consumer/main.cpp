// Built against the installed package; exits non-zero if anything is off.
#include <thread_system/thread_system.hpp>

#include <atomic>
#include <cstdio>

int main() {
  thread_system::thread_pool pool{2};
  std::atomic<int> sum{0};
  for (int i = 1; i <= 100; ++i) {
    if (!pool.enqueue([&sum, i] { sum.fetch_add(i); })) return 1;
  }
  auto answer = pool.submit([](int x) { return x * 2; }, 21);
  pool.wait_idle();
  const int got = answer.get();
  std::printf("consumer: sum=%d answer=%d\n", sum.load(), got);
  return (sum.load() == 5050 && got == 42) ? 0 : 1;
}
