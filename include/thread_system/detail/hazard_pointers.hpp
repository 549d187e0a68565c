// hazard_domain: safe memory reclamation with hazard pointers
// (M. M. Michael, "Hazard Pointers: Safe Memory Reclamation for Lock-Free
// Objects", IEEE Transactions on Parallel and Distributed Systems 15(6),
// 2004).
//
// A thread that is about to dereference a shared node publishes its address
// in one of its hazard slots and then re-reads the location it got the
// address from; if the location still holds it, the node was reachable after
// the hazard became visible, so any thread that retires the node afterwards
// will see the hazard. Retired nodes wait in a list until a scan finds no
// hazard slot holding them; only then are they handed to the owner's
// reclaim function (which may reuse or free them).
//
// Structure and limits:
//   * A domain owns a list of records, each with `slots_per_record` hazard
//     slots and a list of retired pointers. A record is held by one thread
//     for the duration of one operation (an RAII `hazard_holder`), then
//     released for any thread to take. Records are allocated on first need
//     (when every existing record is held) and freed only when the domain is
//     destroyed: the number of records is the largest number of operations
//     that were ever in progress at once, which is bounded by the number of
//     threads using the domain. Each thread remembers the record it used last
//     and tries it first, so in steady state acquiring a record is one
//     uncontended exchange and allocates nothing.
//   * A record's retired list is scanned when it reaches
//     `2 * slots_per_record * records + 32` entries, so at most that many
//     nodes per record wait for reclamation; collect() scans every record
//     that is free at the time (all of them when the domain is quiescent).
//   * Memory: only taking a new record allocates (it may throw
//     std::bad_alloc, in the holder's constructor, before the operation has
//     touched anything). An operation that must not fail takes its holder
//     with `hazard_holder::never_fails`: out of memory, it waits for a record
//     to be released (reserve_record() makes sure one exists). Retiring and scanning never throw: an operation
//     that has unlinked a node can always finish. A full retired list grows
//     when it can and is otherwise emptied by a scan that needs no memory.
//   * Reclaimed pointers go to the reclaim function given at construction,
//     called on the thread that scans. It must not use the domain.
//   * Memory orders: publishing a hazard, re-reading the source, the
//     unlinking of a node by its owner and the scan's reads of the slots are
//     all seq_cst (the StoreLoad pattern of the paper: either the scan sees
//     the hazard or the re-read sees the node unlinked). No standalone
//     fences, so ThreadSanitizer models it exactly.
//
// Thread-safety: every member may be called concurrently, except that the
// destructor requires that no holder is alive. The destructor hands every
// pointer still retired to the reclaim function.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <thread>
#include <vector>

namespace thread_system::detail {

class hazard_domain {
 public:
  /// Hazard slots per record (per operation in progress). Two are enough for
  /// the Michael & Scott queue: the head and its successor.
  static constexpr std::size_t slots_per_record = 2;

  using reclaim_function = void (*)(void* context, void* pointer) noexcept;

  hazard_domain(reclaim_function reclaim, void* context) noexcept
      : reclaim_(reclaim),
        context_(context),
        // relaxed: a unique number only; no data hangs on it.
        id_(next_domain_id().fetch_add(1, std::memory_order_relaxed) + 1) {}

  hazard_domain(const hazard_domain&) = delete;
  hazard_domain& operator=(const hazard_domain&) = delete;

  ~hazard_domain() {
    // No holder is alive, so no hazard is set: everything retired can go.
    // relaxed: the caller guarantees quiescence (its own synchronisation with
    // the threads that used the domain orders their writes before this).
    record* current = records_.load(std::memory_order_relaxed);
    while (current != nullptr) {
      for (void* pointer : current->retired) reclaim_(context_, pointer);
      record* next = current->next;
      delete current;
      current = next;
    }
  }

  /// Scans every record no operation holds right now and reclaims what no
  /// hazard protects. With no operation in progress, this empties every
  /// retired list.
  void collect() noexcept {
    // acquire: pairs with the release CAS that published each record.
    for (record* current = records_.load(std::memory_order_acquire); current != nullptr; current = current->next) {
      if (!try_take(*current)) continue;
      scan(*current);
      release(*current);
    }
  }

  /// Pointers retired and not yet reclaimed, over all records. Approximate
  /// while operations run; exact when the domain is quiescent.
  [[nodiscard]] std::size_t retired_count() const noexcept {
    std::size_t total = 0;
    // acquire: pairs with the release CAS that published each record.
    for (record* current = records_.load(std::memory_order_acquire); current != nullptr; current = current->next) {
      total += current->retired_size.load(std::memory_order_relaxed);  // statistics only
    }
    return total;
  }

  /// True when some operation (a hazard_holder, or collect()) holds a record
  /// right now. seq_cst loads, paired with the seq_cst exchange that takes
  /// a record: if a caller's seq_cst store precedes this call, then every
  /// operation either shows up here or took its record after that store, so
  /// its later seq_cst loads see the store (the adaptive queue builds on it).
  [[nodiscard]] bool any_record_held() const noexcept {
    // seq_cst: pairs with the seq_cst CAS that published each record.
    for (record* current = records_.load(std::memory_order_seq_cst); current != nullptr; current = current->next) {
      if (current->in_use.load(std::memory_order_seq_cst)) return true;  // pairs with try_take()
    }
    return false;
  }
  /// Publishes one free record ahead of need, so that an operation that
  /// must not fail (a hazard_holder built with `hazard_holder::never_fails`)
  /// always has a record to wait for. Throws std::bad_alloc.
  void reserve_record() { release(acquire_record()); }

  /// Owner-written counters per record (see hazard_holder::tally()).
  static constexpr std::size_t tally_count = 4;

  /// The sum of counter `index` over every record: what all operations
  /// tallied so far; approximate while operations run. Acquire loads
  /// (pairing with tally()'s release stores): a sum read after another
  /// sees, of each record, at least what the tallies read first imply.
  [[nodiscard]] std::uint64_t tally_sum(std::size_t index) const noexcept {
    std::uint64_t total = 0;
    // acquire: pairs with the release CAS that published each record.
    for (record* current = records_.load(std::memory_order_acquire); current != nullptr; current = current->next) {
      total += current->tallies[index].load(std::memory_order_acquire);
    }
    return total;
  }

  /// Waits until every operation that held a record when this was called
  /// has released it (operations that start later are not waited for).
  /// What they did before releasing happens-before the return. The caller
  /// must not hold a record of this domain.
  void wait_for_holders() const noexcept {
    // acquire: pairs with the release CAS that published each record.
    for (record* current = records_.load(std::memory_order_acquire); current != nullptr; current = current->next) {
      // seq_cst: pairs with the exchange that takes a record (an operation
      // that took its record before this call shows up here).
      if (!current->in_use.load(std::memory_order_seq_cst)) continue;
      // acquire (both loads): pair with release().
      const std::uint64_t seen = current->releases.load(std::memory_order_acquire);
      while (current->releases.load(std::memory_order_acquire) == seen &&
             current->in_use.load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
    }
  }

  /// Records allocated so far (never shrinks until destruction).
  [[nodiscard]] std::size_t record_count() const noexcept {
    return record_count_.load(std::memory_order_relaxed);  // statistics only
  }

 private:
  friend class hazard_holder;

  struct record {
    // The slots other threads scan, on their own cache line so that scans do
    // not bounce the owner's retired-list bookkeeping.
    alignas(64) std::atomic<const void*> hazards[slots_per_record] = {};
    std::atomic<bool> in_use{true};
    std::atomic<std::size_t> retired_size{0};
    // Counters written only by the holder (tally()), read by anyone
    // (tally_sum()): statistics an operation keeps without a shared
    // read-modify-write.
    std::atomic<std::uint64_t> tallies[tally_count] = {};
    std::atomic<std::uint64_t> releases{0};  // times a holder released the record (wait_for_holders())
    record* next = nullptr;                  // immutable once the record is published
    std::vector<void*> retired;              // owned by the holder of the record
    std::vector<const void*> found;          // scratch for scan(), owned likewise
  };

  static std::atomic<std::uint64_t>& next_domain_id() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return counter;
  }

  // The record this thread used last, tagged with the id of its domain: ids
  // are never reused, so a matching id means the domain (being inside one of
  // its members) and hence the record are alive.
  struct last_record {
    std::uint64_t domain_id = 0;
    record* cached = nullptr;
  };
  static last_record& thread_last_record() noexcept {
    static thread_local last_record last;
    return last;
  }

  static bool try_take(record& r) noexcept {
    // relaxed pre-check avoids writing a line another thread holds; the
    // exchange's acquire part pairs with release() of the previous holder,
    // so its retired list and scratch are ours to use; seq_cst because
    // any_record_held() relies on it (see there).
    return !r.in_use.load(std::memory_order_relaxed) && !r.in_use.exchange(true, std::memory_order_seq_cst);
  }

  static void release(record& r) noexcept {
    // release: the holder's writes (its tallies) happen-before a
    // wait_for_holders() that sees the new count; only the holder writes it.
    r.releases.store(r.releases.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    r.in_use.store(false, std::memory_order_release);  // pairs with the acquire in try_take()
  }

  record& acquire_record() {
    last_record& last = thread_last_record();
    if (last.domain_id == id_ && try_take(*last.cached)) return *last.cached;
    // acquire: pairs with the release CAS that published each record.
    for (record* current = records_.load(std::memory_order_acquire); current != nullptr; current = current->next) {
      if (try_take(*current)) {
        last = {id_, current};
        return *current;
      }
    }
    // in_use starts true: it is ours. Owned here until published, so a
    // reserve() that runs out of memory frees it again.
    auto owned = std::make_unique<record>();
    owned->retired.reserve(64);
    record* fresh = owned.release();
    // relaxed: a guess for the CAS below.
    record* head = records_.load(std::memory_order_relaxed);
    do {
      fresh->next = head;
      // release part: publishes the record's initial state to scanners and
      // takers (pairs with their acquire loads of records_); seq_cst because
      // taking a fresh record is also what any_record_held() must see.
    } while (!records_.compare_exchange_weak(head, fresh, std::memory_order_seq_cst, std::memory_order_relaxed));
    record_count_.fetch_add(1, std::memory_order_relaxed);  // statistics and scan threshold only
    last = {id_, fresh};
    return *fresh;
  }

  // Never throws: the caller has already unlinked the node (a pop has taken
  // its job), so a retire that failed would lose what the operation took.
  // The list has room reserved ahead (64 entries from the start); when it
  // is full and cannot grow, scan() makes room without allocating.
  // acquire_record() that never throws: out of memory, it waits for a
  // record another operation releases. Records are never freed before the
  // domain, and reserve_record() made at least one, so this ends once the
  // operations holding them finish (each holds one for one operation only).
  record& acquire_record_or_wait() noexcept {
    for (;;) {
      try {
        return acquire_record();
      } catch (const std::bad_alloc&) {
      }
      std::this_thread::yield();
    }
  }

  void retire(record& r, void* pointer) noexcept {
    if (r.retired.size() == r.retired.capacity()) make_room(r);
    r.retired.push_back(pointer);                                       // capacity checked above: no allocation
    r.retired_size.store(r.retired.size(), std::memory_order_relaxed);  // statistics only
    // relaxed: a threshold; a stale count only changes when we scan.
    const std::size_t threshold = 2 * slots_per_record * record_count_.load(std::memory_order_relaxed) + 32;
    if (r.retired.size() >= threshold) scan(r);
  }

  // Room for one more retired pointer in a full list: twice the capacity,
  // or, out of memory, a scan that reclaims what no hazard holds. A scan
  // keeps at most one pointer per hazard slot, each held by an operation in
  // progress that will end, so this loop ends once those operations move
  // on; it never waits for memory.
  void make_room(record& r) noexcept {
    try {
      r.retired.reserve(2 * r.retired.capacity() + 1);
      return;
    } catch (const std::bad_alloc&) {
    }
    for (;;) {
      scan(r);
      if (r.retired.size() < r.retired.capacity()) return;
      std::this_thread::yield();
    }
  }

  // True when some hazard slot of some record holds `pointer`. seq_cst
  // loads, as in scan().
  bool hazard_holds(const void* pointer) const noexcept {
    // acquire: pairs with the release CAS that published each record.
    for (record* current = records_.load(std::memory_order_acquire); current != nullptr; current = current->next) {
      for (const auto& slot : current->hazards) {
        if (slot.load(std::memory_order_seq_cst) == pointer) return true;  // as in scan()
      }
    }
    return false;
  }

  // Reclaims every pointer of r's retired list that no hazard slot holds.
  // Never throws and never needs memory: the hazards are gathered into a
  // sorted scratch list when it can grow, and otherwise looked up slot by
  // slot for each pointer (slower, same answer).
  void scan(record& r) noexcept {
    if (r.retired.empty()) return;
    r.found.clear();
    bool gathered = true;
    try {
      // acquire: pairs with the release CAS that published each record.
      for (record* current = records_.load(std::memory_order_acquire); current != nullptr; current = current->next) {
        for (auto& slot : current->hazards) {
          // seq_cst: pairs with the seq_cst store in hazard_holder::protect();
          // this load comes after the retiring thread's seq_cst unlink, so if
          // it misses a hazard, the protector's re-read sees the unlink.
          if (const void* hazard = slot.load(std::memory_order_seq_cst); hazard != nullptr) r.found.push_back(hazard);
        }
      }
    } catch (const std::bad_alloc&) {
      gathered = false;
    }
    if (gathered) std::sort(r.found.begin(), r.found.end());
    std::size_t kept = 0;
    for (void* pointer : r.retired) {
      const bool held = gathered ? std::binary_search(r.found.begin(), r.found.end(), static_cast<const void*>(pointer))
                                 : hazard_holds(pointer);
      if (held) {
        r.retired[kept++] = pointer;
      } else {
        reclaim_(context_, pointer);
      }
    }
    r.retired.resize(kept);                                 // shrinking: no allocation
    r.retired_size.store(kept, std::memory_order_relaxed);  // statistics only
  }

  reclaim_function reclaim_;
  void* context_;
  std::uint64_t id_;
  std::atomic<record*> records_{nullptr};
  std::atomic<std::size_t> record_count_{0};
};

/// One operation's hold on a hazard record: acquire on construction, clear
/// the slots and release on destruction. Not shared between threads.
class hazard_holder {
 public:
  explicit hazard_holder(hazard_domain& domain) : domain_(domain), record_(domain.acquire_record()) {}
  /// Tag for the constructor that never fails.
  struct never_fails_t {};
  static constexpr never_fails_t never_fails{};
  /// Never throws: out of memory, waits until another operation releases a
  /// record. Only for operations that must not fail (closing a queue), on a
  /// domain that has run reserve_record(), by a thread that holds no other
  /// record of the domain (out of memory with every record held, it would
  /// wait for itself; lockfree_queue never nests its operations, and runs
  /// no code of its user while it holds a record except the destructors of
  /// jobs a caller left in the output it passes to a pop).
  hazard_holder(hazard_domain& domain, never_fails_t) noexcept
      : domain_(domain), record_(domain.acquire_record_or_wait()) {}
  hazard_holder(const hazard_holder&) = delete;
  hazard_holder& operator=(const hazard_holder&) = delete;
  ~hazard_holder() {
    for (std::size_t slot = 0; slot < hazard_domain::slots_per_record; ++slot) clear(slot);
    hazard_domain::release(record_);
  }

  /// Loads `source` and protects the value in `slot`: on return the pointee
  /// (if not null) cannot be reclaimed until the slot is cleared or reused,
  /// and it was still in `source` after the hazard became visible.
  template <typename T>
  T* protect(std::size_t slot, const std::atomic<T*>& source) noexcept {
    T* pointer = source.load(std::memory_order_relaxed);  // a guess validated below
    for (;;) {
      // seq_cst store then seq_cst re-read: pairs with the seq_cst unlink and
      // the seq_cst slot loads in scan() (the StoreLoad pattern of the paper).
      record_.hazards[slot].store(pointer, std::memory_order_seq_cst);
      T* again = source.load(std::memory_order_seq_cst);
      if (again == pointer) return pointer;
      pointer = again;
    }
  }

  /// Publishes `pointer` in `slot` without validation; the caller validates
  /// (re-reads the source with seq_cst) before dereferencing.
  void set(std::size_t slot, const void* pointer) noexcept {
    record_.hazards[slot].store(pointer, std::memory_order_seq_cst);  // same pairing as protect()
  }

  /// Drops the protection of `slot`.
  void clear(std::size_t slot) noexcept {
    // release: our last accesses to the node happen-before a scan that sees
    // the slot empty (pairs with the seq_cst loads in scan()).
    record_.hazards[slot].store(nullptr, std::memory_order_release);
  }

  /// Adds `amount` to this record's counter `index` (read by
  /// hazard_domain::tally_sum()). Only the holder writes it, so a load and
  /// a store suffice: no read-modify-write; the exchange/release that hands
  /// the record between threads orders successive holders.
  void tally(std::size_t index, std::uint64_t amount) noexcept {
    std::atomic<std::uint64_t>& counter = record_.tallies[index];
    // release: pairs with the acquire loads of tally_sum() (see there).
    counter.store(counter.load(std::memory_order_relaxed) + amount, std::memory_order_release);
  }

  /// Hands `pointer`, already unlinked (no thread can newly reach it), to
  /// the domain; it is reclaimed once no hazard slot holds it.
  /// Never throws (see hazard_domain::retire()).
  void retire(void* pointer) noexcept { domain_.retire(record_, pointer); }

 private:
  hazard_domain& domain_;
  hazard_domain::record& record_;
};

}  // namespace thread_system::detail
