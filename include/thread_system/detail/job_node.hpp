// Nodes that carry jobs through the work-stealing deques, and the pool that
// recycles them so that spawning from inside a worker does not allocate in
// steady state.
//
// Each worker keeps a private free list (no synchronisation). A node freed by
// a thief lands in the thief's list; lists that grow past a threshold hand a
// batch to the shared spill list (one mutex acquisition per batch), and a
// worker whose list is short takes a batch from there, or fresh nodes from
// the current chunk, before a new chunk is allocated. Memory is bounded by
// the peak number of jobs in flight.
//
// Memory: a chunk is raw storage for `chunk_size` nodes; a node is
// constructed (its storage first written) only when a refill hands it out.
// A worker's first refill hands out what it asked for, rounded up to
// `refill_step` (its first injector batch asks for 15); later ones a batch.
// So an idle or lightly used pool touches only the nodes it used, and one
// chunk serves 16 workers. The pool reserves storage for each worker's first
// refill when it prepares the worker (on the thread that creates the pool),
// so a worker thread need not allocate, nor get a malloc arena, to start.
//
// Out of memory: allocate() throws std::bad_alloc; try_allocate() and
// reserve() report failure instead, and the cache stays usable (a worker
// that cannot get a node falls back to a path that needs none).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "thread_system/core/job_function.hpp"
#include "thread_system/detail/config.hpp"

namespace thread_system::detail {

// One cache line per node: nodes of one chunk are handed to different
// workers, and two workers' nodes must not share a line.
struct alignas(64) job_node {
  job_function fn;
};

class job_node_pool {
 public:
  static constexpr std::size_t chunk_size = 256;
  static constexpr std::size_t batch_size = 128;

  /// A worker's private free list (owner thread only).
  class cache {
   public:
    explicit cache(job_node_pool* pool = nullptr) : pool_(pool) {}
    void attach(job_node_pool* pool) {
      pool_ = pool;
      // Room for a first refill (refill_step nodes: a worker's first
      // injector batch), taken on the thread that prepares the worker. The
      // list grows to its bound (5 batches) only in a worker that uses more
      // nodes at once, on that worker's thread: an idle or lightly used
      // worker keeps 128 bytes here instead of 5 KiB.
      free_.reserve(refill_step);
    }

    job_node* allocate() {
      if (free_.empty()) refill(1);
      job_node* n = free_.back();
      free_.pop_back();
      return n;
    }
    /// A node, or nullptr when none is cached and none can be allocated.
    job_node* try_allocate() noexcept { return reserve(1) ? allocate() : nullptr; }
    /// Makes `n` nodes available without allocation; false (nothing lost)
    /// when memory ran out first.
    bool reserve(std::size_t n) noexcept {
      while (free_.size() < n) {
        try {
          refill(n - free_.size());
        } catch (...) {
          return false;
        }
      }
      return true;
    }
    /// Nodes available now without allocation.
    [[nodiscard]] std::size_t available() const noexcept { return free_.size(); }
    /// Takes `n` back; never allocates on failure and never loses a node: a
    /// full list that cannot grow hands `n` to the shared list instead.
    /// The common case is inline and as short as a plain push: one job ends
    /// with one release, on every worker's hot path.
    void release(job_node* n) noexcept {
      if (free_.size() == free_.capacity()) [[unlikely]] {
        release_to_full_list(n);
        return;
      }
      free_.push_back(n);  // room checked above: does not allocate
      if (free_.size() >= 4 * batch_size) [[unlikely]]
        pool_->spill(free_);
    }

   private:
    // The first refill asks for what is needed (a worker that runs little
    // touches few nodes); later ones for a whole batch, so that a worker
    // that spawns or steals a lot takes the pool's mutex once per batch.
    THREAD_SYSTEM_NOINLINE void refill(std::size_t needed) {
      const std::size_t want = refilled_ ? batch_size : needed;
      // Room first (may throw std::bad_alloc, changing nothing), so that
      // the pool's refill never reallocates the list under its mutex.
      // (Past the bound too: reserve(n) for a worker's batch of more than
      // list_bound jobs asks for that many; the pool's refill must still
      // find the room, or a push_back failing there would leave nodes in
      // the list that the chunk does not count as handed out.)
      const std::size_t room = free_.size() + round_up(want);
      if (free_.capacity() < room) free_.reserve(refilled_ && room < list_bound ? list_bound : room);
      pool_->refill(free_, want);
      refilled_ = true;
    }
    // The list's largest size: release() spills above 4 batches and a
    // refill adds at most one.
    static constexpr std::size_t list_bound = 5 * batch_size;
    // A release into a full list: grow it to its bound, or, when memory ran
    // out, hand the node to the shared list.
    THREAD_SYSTEM_NOINLINE void release_to_full_list(job_node* n) noexcept {
      try {
        free_.reserve(list_bound);
      } catch (...) {
        pool_->spill_one(n);
        return;
      }
      free_.push_back(n);  // the list is below its bound: room was made above
      if (free_.size() >= 4 * batch_size) pool_->spill(free_);
    }

    job_node_pool* pool_;
    std::vector<job_node*> free_;
    bool refilled_ = false;
  };

 public:
  job_node_pool() = default;
  /// Not copyable.
  job_node_pool(const job_node_pool&) = delete;
  /// Not copyable.
  job_node_pool& operator=(const job_node_pool&) = delete;
  ~job_node_pool() {
    // Every node handed out was constructed; each lies in exactly one chunk,
    // below that chunk's fresh mark.
    for (chunk& c : chunks_) {
      for (std::size_t i = 0; i < c.constructed; ++i) c.nodes()[i].~job_node();
    }
  }

  /// A refill hands out a multiple of this many nodes (a worker's first
  /// injector batch, 16 jobs, asks for 15), at most batch_size.
  static constexpr std::size_t refill_step = 16;
  /// What a refill of `want` nodes hands out.
  [[nodiscard]] static constexpr std::size_t round_up(std::size_t want) noexcept {
    want = (want + refill_step - 1) / refill_step * refill_step;
    if (want == 0) want = refill_step;
    return want > batch_size ? batch_size : want;
  }

  /// Takes back a node from a thread that has no cache (one lock, never
  /// allocates: the shared list has room for every node).
  void give_back(job_node* n) noexcept { spill_one(n); }

  /// Allocates raw storage (nothing is touched) for `refill_step` more
  /// nodes than reserved so far, on the calling thread: a new worker's first
  /// batch then needs no allocation on its own thread (nor a malloc arena).
  /// Throws std::bad_alloc, leaving the pool as it was.
  void reserve_for_worker() {
    std::lock_guard lock(mutex_);
    while (chunks_.size() * chunk_size < reserved_ + refill_step) add_chunk();
    reserved_ += refill_step;
  }

 private:
  // Raw, suitably aligned storage for one node (trivial: allocating an
  // array of these writes nothing).
  struct alignas(job_node) node_storage {
    std::byte bytes[sizeof(job_node)];
  };
  struct chunk {
    std::unique_ptr<node_storage[]> storage;  // room for chunk_size nodes
    std::size_t constructed = 0;              // nodes [0, constructed) are constructed
    job_node* nodes() const noexcept { return std::launder(reinterpret_cast<job_node*>(storage.get())); }
  };

  // Adds an empty chunk (caller holds mutex_). Every allocation first, then
  // the changes: a failure leaves the pool as it was. The spill list can
  // hold at most every node: it is sized with each chunk so that spilling
  // never allocates.
  void add_chunk() {
    chunk c{std::unique_ptr<node_storage[]>(new node_storage[chunk_size]), 0};  // default-initialised: untouched
    chunks_.reserve(chunks_.size() + 1);
    spilled_.reserve((chunks_.size() + 1) * chunk_size);
    chunks_.push_back(std::move(c));
  }

  // Adds up to `want` nodes (rounded up to refill_step, at most a batch) to
  // `out`: spilled ones, or else fresh ones of the first chunk that has
  // some, or else of a new chunk. Throws std::bad_alloc (leaving everything
  // as it was) when a new chunk cannot be allocated.
  void refill(std::vector<job_node*>& out, std::size_t want) {
    want = round_up(want);
    std::lock_guard lock(mutex_);
    if (!spilled_.empty()) {
      const std::size_t n = spilled_.size() < want ? spilled_.size() : want;
      out.insert(out.end(), spilled_.end() - static_cast<std::ptrdiff_t>(n), spilled_.end());
      spilled_.resize(spilled_.size() - n);
      return;
    }
    while (fresh_ < chunks_.size() && chunks_[fresh_].constructed == chunk_size) ++fresh_;
    if (fresh_ == chunks_.size()) add_chunk();
    chunk& c = chunks_[fresh_];
    const std::size_t n = chunk_size - c.constructed < want ? chunk_size - c.constructed : want;
    job_node* first = c.nodes() + c.constructed;
    for (std::size_t i = 0; i < n; ++i) {
      ::new (static_cast<void*>(first + i)) job_node{};  // job_function's default constructor does not throw
      out.push_back(first + i);                          // room made by cache::refill(): does not allocate
    }
    c.constructed += n;
  }

  // One node to the shared list (a cache whose list is full and cannot grow).
  // The shared list has room for every node: never allocates.
  void spill_one(job_node* n) noexcept {
    std::lock_guard lock(mutex_);
    spilled_.push_back(n);
  }

  // Returns all but `batch_size` nodes of `list` to the shared list.
  void spill(std::vector<job_node*>& list) {
    std::lock_guard lock(mutex_);
    while (list.size() > batch_size) {
      spilled_.push_back(list.back());
      list.pop_back();
    }
  }

  std::mutex mutex_;
  std::vector<chunk> chunks_;       // guarded by mutex_; owns every node
  std::vector<job_node*> spilled_;  // guarded by mutex_
  std::size_t fresh_ = 0;           // guarded by mutex_: the first chunk with unconstructed nodes
  std::size_t reserved_ = 0;        // guarded by mutex_: nodes promised by reserve_for_worker()
};

}  // namespace thread_system::detail
