// Nodes that carry jobs through the work-stealing deques, and the pool that
// recycles them so that spawning from inside a worker does not allocate in
// steady state.
//
// Each worker keeps a private free list (no synchronisation). A node freed by
// a thief lands in the thief's list; lists that grow past a threshold hand a
// batch to the shared spill list (one mutex acquisition per batch), and a
// worker whose list is empty takes a batch from there before allocating a new
// chunk. Memory is bounded by the peak number of jobs in flight.
//
// Out of memory: allocate() throws std::bad_alloc; try_allocate() and
// reserve() report failure instead, and the cache stays usable (a worker
// that cannot get a node falls back to a path that needs none).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "thread_system/core/job_function.hpp"

namespace thread_system::detail {

struct job_node {
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
      // The list never holds more than this (release() spills above 4
      // batches; refill() adds at most a chunk), so it never reallocates.
      free_.reserve(4 * batch_size + chunk_size);
    }

    job_node* allocate() {
      if (free_.empty()) pool_->refill(free_);
      job_node* n = free_.back();
      free_.pop_back();
      return n;
    }
    /// A node, or nullptr when none is cached and none can be allocated.
    job_node* try_allocate() noexcept { return reserve(1) ? allocate() : nullptr; }
    /// Makes `n` nodes available without allocation; false (nothing lost)
    /// when memory ran out first. At most a chunk's worth is kept.
    bool reserve(std::size_t n) noexcept {
      while (free_.size() < n) {
        try {
          pool_->refill(free_);
        } catch (...) {
          return false;
        }
      }
      return true;
    }
    /// Nodes available now without allocation.
    [[nodiscard]] std::size_t available() const noexcept { return free_.size(); }
    void release(job_node* n) {
      free_.push_back(n);
      if (free_.size() >= 4 * batch_size) pool_->spill(free_);
    }

   private:
    job_node_pool* pool_;
    std::vector<job_node*> free_;
  };

 private:
  // Moves `batch_size` nodes from the shared list (or a new chunk) into `out`.
  // Throws std::bad_alloc (leaving everything as it was) when a new chunk
  // cannot be allocated.
  void refill(std::vector<job_node*>& out) {
    std::lock_guard lock(mutex_);
    if (!spilled_.empty()) {
      const std::size_t n = spilled_.size() < batch_size ? spilled_.size() : batch_size;
      out.insert(out.end(), spilled_.end() - static_cast<std::ptrdiff_t>(n), spilled_.end());
      spilled_.resize(spilled_.size() - n);
      return;
    }
    // Every allocation first, then the changes: a failure leaves the pool
    // as it was. The spill list can hold at most every node: size it with
    // each chunk so that spilling never allocates.
    auto chunk_owner = std::make_unique<job_node[]>(chunk_size);
    chunks_.reserve(chunks_.size() + 1);
    spilled_.reserve((chunks_.size() + 1) * chunk_size);
    chunks_.push_back(std::move(chunk_owner));
    job_node* chunk = chunks_.back().get();
    for (std::size_t i = 0; i < chunk_size; ++i) out.push_back(&chunk[i]);
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
  std::vector<std::unique_ptr<job_node[]>> chunks_;  // guarded by mutex_; owns every node
  std::vector<job_node*> spilled_;                   // guarded by mutex_
};

}  // namespace thread_system::detail
