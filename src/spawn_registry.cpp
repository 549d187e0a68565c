// The pools spawned tasks report their failures to (coro/spawn.hpp): a pool
// is registered on its first spawn() under a key never reused, and leaves
// when it is destroyed, after every report pinning it has finished. A task
// that fails after its pool is gone finds no entry (spawn_pin is empty)
// instead of a destroyed pool.
//
// One process-wide mutex guards the table and every pin count: it is taken
// on a pool's first spawn(), on a spawned task's failure outside its pool,
// and when a registered pool is destroyed - never on a job's path.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include "thread_system/coro/spawn.hpp"
#include "thread_system/pools/pool_front.hpp"

namespace thread_system::detail {

namespace {

struct entry {
  std::uint64_t key;
  pool_front* pool;
  std::size_t pins;  // spawn_pins alive on this pool
  bool leaving;      // its destructor waits: no new pin
};

struct registry {
  std::mutex mutex;
  std::condition_variable unpinned;  // a leaving pool's last pin went
  std::vector<entry> live;           // guarded by mutex
  std::uint64_t next_key = 1;        // guarded by mutex; 0 means "not registered"
};

// Built on first use in static storage and never destroyed: a pool
// destroyed during static destruction still finds it. (No allocation: a
// mutex, a condition variable and an empty vector.)
registry& the_registry() noexcept {
  alignas(registry) static unsigned char storage[sizeof(registry)];
  static registry* const r = ::new (static_cast<void*>(storage)) registry();
  return *r;
}

// The pins this thread holds, innermost first (each pin links the one
// before it): a pool destroyed on this thread does not wait for them.
thread_local spawn_pin* t_pins = nullptr;

entry* find(registry& r, std::uint64_t key) noexcept {
  const auto it = std::find_if(r.live.begin(), r.live.end(), [key](const entry& e) { return e.key == key; });
  return it == r.live.end() ? nullptr : &*it;
}

}  // namespace

// The pins of the calling thread (see spawn_pin).
struct spawn_pins_of_this_thread {
  // Releases this thread's pins on `key`; returns how many there were.
  static std::size_t release(std::uint64_t key) noexcept;
};

result<std::uint64_t> pool_front::spawn_key() noexcept {
  // acquire: pairs with the release store below, made under the mutex after
  // the entry was added.
  if (const std::uint64_t k = spawn_key_.load(std::memory_order_acquire); k != 0) return k;
  registry& r = the_registry();
  const std::lock_guard lock(r.mutex);
  // relaxed: every store is made under this mutex.
  if (const std::uint64_t k = spawn_key_.load(std::memory_order_relaxed); k != 0) return k;
  try {
    r.live.push_back(entry{r.next_key, this, 0, false});
  } catch (const std::bad_alloc&) {
    return make_error(error_code::resource_exhausted, "no memory to spawn the task");
  }
  const std::uint64_t k = r.next_key++;
  spawn_key_.store(k, std::memory_order_release);
  return k;
}

void pool_front::retire_spawn_key() noexcept {
  // relaxed: a spawn() racing with the pool's destructor is a use after
  // free by the caller; this thread made or saw every registration.
  const std::uint64_t k = spawn_key_.load(std::memory_order_relaxed);
  if (k == 0) return;
  registry& r = the_registry();
  std::unique_lock lock(r.mutex);
  entry* e = find(r, k);
  if (e == nullptr) return;  // already retired
  e->leaving = true;
  // This thread's own pins on the pool are not waited for: this destructor
  // runs inside a call made under them. They are released here instead.
  const std::size_t own = spawn_pins_of_this_thread::release(k);
  e->pins -= own;
  r.unpinned.wait(lock, [&] { return find(r, k)->pins == 0; });
  r.live.erase(r.live.begin() + (find(r, k) - r.live.data()));
}

// Caller holds the registry's mutex. Pins of this thread only: no other
// thread reads them.
std::size_t spawn_pins_of_this_thread::release(std::uint64_t key) noexcept {
  std::size_t n = 0;
  for (spawn_pin* p = t_pins; p != nullptr; p = p->outer_) {
    if (p->pinned_ && p->key_ == key) {
      p->pinned_ = false;
      ++n;
    }
  }
  return n;
}

spawn_pin::spawn_pin(std::uint64_t key) noexcept : key_(key), outer_(t_pins) {
  t_pins = this;
  registry& r = the_registry();
  const std::lock_guard lock(r.mutex);
  entry* e = find(r, key);
  if (e == nullptr || e->leaving) return;
  ++e->pins;
  pinned_ = true;
}

spawn_pin::~spawn_pin() {
  t_pins = outer_;  // pins end in reverse order of their making (scoped)
  // Never pinned, or released by its pool's destructor - on this thread,
  // so this read needs no lock.
  if (!pinned_) return;
  registry& r = the_registry();
  const std::lock_guard lock(r.mutex);
  entry* e = find(r, key_);  // still there: its pool waits for this pin
  if (--e->pins == 0 && e->leaving) r.unpinned.notify_all();
}

}  // namespace thread_system::detail
