// job_function: the move-only, type-erased callable every pool stores.
//
// A callable whose size is at most `job_function::inline_capacity` bytes (48),
// whose alignment is at most 8 and whose move constructor is noexcept is
// stored *inline*: wrapping it and running it performs no heap allocation,
// nor does queueing it through a pool's default (mutex) injector. (The
// lock-free and adaptive injectors box a callable of more than 16 bytes:
// one allocation per job, queues/lockfree_queue.hpp; the bounded one above
// 24, queues/bounded_queue.hpp.) Larger callables are stored on the heap
// (one allocation).
//
// Optional hooks a callable may provide (detected at compile time):
//   * `void cancel() noexcept` - called instead of running when a pool
//     discards the job (stop_mode::cancel_pending). `submit()` uses it to
//     complete the job's future with a `cancelled` error.
//   * `job_outcome run_and_report()` - runs the job and says whether it
//     failed *after already reporting the failure itself* (e.g. into a future).
//     Plain callables report failure by throwing, or by returning an error
//     (a `result<T>` holding one, an `unexpected_error` from make_error(),
//     an `error` whose code is not `ok`): run() throws that error as
//     error_exception, and the pool catches it as it catches a throw. Any
//     other returned value is discarded.
//
// Metadata: besides the callable a job_function carries one word that pools
// use on the way through their queues - the enqueue time of a job sampled for
// the wait-time histogram (`enqueue_stamp`, 0 when not sampled) and a small
// tag (a typed pool's job-type rank). It moves with the callable.
//
// Thread-safety: none; a job_function is owned by one thread at a time and is
// handed between threads through a queue, which provides the ordering.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "thread_system/core/concepts.hpp"
#include "thread_system/core/error.hpp"
#include "thread_system/detail/config.hpp"
#include "thread_system/detail/functional.hpp"

namespace thread_system {

/// What running a job produced, as seen by the worker that ran it.
enum class job_outcome : unsigned char {
  succeeded,
  failed_reported,  ///< The job failed and already delivered its error (to a future).
  cancelled,        ///< The job saw its cancellation token set before it started and did not run.
};

namespace detail {
template <typename F>
concept has_cancel_hook = requires(F& f) {
  { f.cancel() } noexcept;
};
template <typename F>
concept has_cancel_reason_hook = requires(F& f, const char* why) {
  { f.cancel_because(why) } noexcept;
};
template <typename F>
concept has_report_hook = requires(F& f) {
  { f.run_and_report() } -> std::same_as<job_outcome>;
};
/// Calls a job's callable. A returned error (detail::error_carrying: a
/// `result<T>` holding one, an `unexpected_error`, an `error` with a code)
/// is thrown as error_exception, so the pool counts the job failed and
/// passes it on, as it does an exception the callable throws; any other
/// returned value is discarded.
template <typename F, typename... Args>
void invoke_job(F& f, Args&&... args) {
  if constexpr (error_carrying<std::invoke_result_t<F&, Args...>>) {
    if (result<void> r = returned_outcome(detail::invoke(f, std::forward<Args>(args)...)); !r) {
      throw error_exception(std::move(r).error());
    }
  } else {
    static_cast<void>(detail::invoke(f, std::forward<Args>(args)...));
  }
}
// What a job_function can hold: something it can call, or a job with a
// report hook.
template <typename D>
concept job_callable = std::is_invocable_v<D&> || has_report_hook<D>;
}  // namespace detail

// storage_ is raw storage, written only when a callable is placed in it:
// zeroing it in every constructor would cost every job.
// NOLINTBEGIN(cppcoreguidelines-pro-type-member-init)

/// Move-only, type-erased callable that pools store and run; small callables are held without allocation.
class job_function {
 public:
  /// Bytes available for a callable stored without allocation.
  static constexpr std::size_t inline_capacity = 48;
  /// Largest alignment of a callable stored without heap allocation.
  static constexpr std::size_t inline_alignment = 8;

  /// True when a callable of type F is stored without heap allocation.
  // NOLINTBEGIN(misc-redundant-expression): a comparison true for one F is not for every F
  template <typename F>
  static constexpr bool stored_inline =
      sizeof(F) <= inline_capacity && alignof(F) <= inline_alignment && std::is_nothrow_move_constructible_v<F>;
  // NOLINTEND(misc-redundant-expression)

  /// An empty job_function.
  job_function() noexcept = default;
  /// An empty job_function.
  job_function(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor)

  /// Wraps `f`. A null function pointer or an empty std::function gives an
  /// empty job_function (which pools refuse with `invalid_argument`).
  template <typename F, typename D = std::decay_t<F>>
    requires not_same_as<F, job_function> && detail::job_callable<D> && std::constructible_from<D, F&&>
  // NOLINTNEXTLINE(bugprone-forwarding-reference-overload): the constraint excludes job_function itself
  job_function(F&& f) {  // NOLINT(google-explicit-constructor)
    wrap<false, D>(std::forward<F>(f));
  }

  /// Wraps `f` as the constructor above does, except that with no memory
  /// for a callable stored on the heap it stays empty and leaves `f`
  /// untouched (the allocation comes before the callable is built from
  /// `f`). Anything building the callable throws propagates, the memory
  /// freed: a std::bad_alloc from there is the callable's own, not this
  /// constructor's "no memory".
  template <typename F, typename D = std::decay_t<F>>
    requires not_same_as<F, job_function> && detail::job_callable<D> && std::constructible_from<D, F&&>
  job_function(std::nothrow_t /*unused*/, F&& f) {
    wrap<true, D>(std::forward<F>(f));
  }

  /// Takes `other`'s callable and metadata; `other` becomes empty.
  job_function(job_function&& other) noexcept { take(other); }

  /// Takes `other`'s callable and metadata, then destroys the callable held
  /// before; `other` becomes empty. `other` may live inside the held callable
  /// (a job holding its continuation: `job = std::move(job.get_if<C>()->next)`).
  THREAD_SYSTEM_ALWAYS_INLINE job_function& operator=(job_function&& other) noexcept {
    if (this != &other) {
      if (vtable_ != nullptr && vtable_->destroy != nullptr) [[unlikely]] {
        // A held callable with a destructor, which may own `other`: moved
        // aside, destroyed at the end of this scope, after `other` was read.
        job_function held(std::move(*this));
        take(other);
      } else {
        take(other);  // nothing to destroy: empty, or trivially destructible
      }
    }
    return *this;
  }

  /// Not copyable.
  job_function(const job_function&) = delete;
  /// Not copyable.
  job_function& operator=(const job_function&) = delete;

  /// Destroys the held callable, if any.
  ~job_function() { reset(); }

  /// True when a callable is held.
  explicit operator bool() const noexcept { return vtable_ != nullptr; }
  /// True when no callable is held (as std::function's): so the library's
  /// empty-callable checks (nullable_callable, core/concepts.hpp) see an
  /// empty job_function given to a callback_job, a timer, enqueue() or
  /// submit(). A template on the exact type: a plain friend taking
  /// `const job_function&` made every callable that converts to a
  /// job_function (a std::bind of a member returning one, say) comparable
  /// with nullptr through that conversion, and the check then built a
  /// job_function from it, which checked it again, without end.
  template <std::same_as<job_function> J>
  friend bool operator==(const J& f, std::nullptr_t) noexcept {
    return !f;
  }

  /// True when the held callable is of type F (the type it was wrapped as).
  template <detail::job_callable F>
  [[nodiscard]] bool holds() const noexcept {
    return vtable_ == &vtable_for<F>;
  }

  /// The held callable when it is of type F, else nullptr (like
  /// std::function::target).
  template <detail::job_callable F>
  [[nodiscard]] F* get_if() noexcept {
    return holds<F>() ? target<F>(storage_) : nullptr;
  }

  /// Runs the callable. Exceptions propagate. An empty job_function throws
  /// error_exception{invalid_argument} (as std::function throws
  /// bad_function_call): a mistake, not a crash.
  job_outcome run() {
    if (vtable_ == nullptr) [[unlikely]]
      throw_empty_run();
    return vtable_->invoke(storage_);
  }
  /// Runs the callable and discards the outcome, as run().
  void operator()() { (void)run(); }

  /// Tells the callable it will never run (its `cancel()` hook, if any). The
  /// callable is still held; destroy it with `reset()` or the destructor.
  void cancel() noexcept {
    if (vtable_ != nullptr && vtable_->cancel != nullptr) vtable_->cancel(storage_);
  }
  /// cancel(), passing the reason to a callable with a
  /// `void cancel_because(const char*) noexcept` hook (a submit() job puts
  /// it into the future's `cancelled` error).
  void cancel(const char* why) noexcept {
    if (vtable_ == nullptr) return;
    if (vtable_->cancel_because != nullptr) {
      vtable_->cancel_because(storage_, why);
    } else if (vtable_->cancel != nullptr) {
      vtable_->cancel(storage_);
    }
  }

  /// Destroys the held callable, if any, and clears the metadata.
  void reset() noexcept {
    meta_ = 0;
    if (vtable_ != nullptr) {
      if (vtable_->destroy != nullptr) vtable_->destroy(storage_);
      vtable_ = nullptr;
    }
  }

  // ---- metadata (set by pools; see the header comment) --------------------

  /// Largest enqueue stamp that can be stored (56 bits of nanoseconds).
  static constexpr std::uint64_t max_stamp = (std::uint64_t{1} << 56) - 1;

  /// When the job was queued (pool clock, nanoseconds), or 0 when the job
  /// was not sampled.
  [[nodiscard]] std::uint64_t enqueue_stamp() const noexcept { return meta_ & max_stamp; }
  /// Stores `ns` (clamped to max_stamp).
  void set_enqueue_stamp(std::uint64_t ns) noexcept {
    meta_ = (meta_ & ~max_stamp) | (ns < max_stamp ? ns : max_stamp);
  }
  /// A small number a pool attaches to the job (a typed pool: the type's rank + 1).
  [[nodiscard]] std::uint8_t tag() const noexcept { return static_cast<std::uint8_t>(meta_ >> 56); }
  /// Sets the tag (tag()) to `t`; the enqueue stamp is kept.
  void set_tag(std::uint8_t t) noexcept { meta_ = (meta_ & max_stamp) | (std::uint64_t{t} << 56); }

  // ---- packed form (for queues that store jobs compactly) -----------------
  //
  // A packed job is `packed_words()` 8-byte words at an 8-aligned address:
  // the operations pointer, the metadata word, then only as many words of
  // the callable's storage as it uses (a callable of up to 8 bytes or a
  // heap-stored one: 1 word, so 24 bytes in all instead of 64). Packing and
  // unpacking relocate the callable (its move constructor, or a byte copy
  // when it is trivially copyable) exactly like a move of the job_function.

  /// Words in the largest packed job.
  static constexpr std::size_t max_packed_words = 2 + inline_capacity / 8;

  /// Words this job needs packed. Precondition: non-empty.
  [[nodiscard]] std::size_t packed_words() const noexcept { return 2 + vtable_->payload_words; }

  /// Words of the packed job at `source` (written by pack_into()).
  [[nodiscard]] static std::size_t packed_words_at(const void* source) noexcept {
    const vtable_t* vt = nullptr;
    std::memcpy(&vt, source, sizeof(vt));  // NOLINT(bugprone-sizeof-expression): the pointer itself is copied
    return 2 + vt->payload_words;
  }

  /// Moves the job into `destination` (packed_words() words, 8-aligned);
  /// this job becomes empty. Precondition: non-empty.
  THREAD_SYSTEM_ALWAYS_INLINE void pack_into(void* destination) noexcept {
    auto* out = static_cast<unsigned char*>(destination);
    std::memcpy(out, &vtable_, sizeof(vtable_));  // NOLINT(bugprone-sizeof-expression): the pointer itself
    std::memcpy(out + 8, &meta_, sizeof(meta_));
    if (vtable_->relocate == nullptr) {
      copy_words(out + 16, storage_, vtable_->payload_words);
    } else {
      vtable_->relocate(out + 16, storage_);
    }
    vtable_ = nullptr;
    meta_ = 0;
  }

  /// Moves the packed job at `source` into this job, which must be empty;
  /// the words at `source` hold nothing afterwards.
  THREAD_SYSTEM_ALWAYS_INLINE void unpack_from(void* source) noexcept {
    auto* in = static_cast<unsigned char*>(source);
    std::memcpy(&vtable_, in, sizeof(vtable_));  // NOLINT(bugprone-sizeof-expression): the pointer itself
    std::memcpy(&meta_, in + 8, sizeof(meta_));
    if (vtable_->relocate == nullptr) {
      copy_words(storage_, in + 16, vtable_->payload_words);
    } else {
      vtable_->relocate(storage_, in + 16);
    }
  }

 private:
  [[noreturn]] THREAD_SYSTEM_NOINLINE static void throw_empty_run() {
    throw error_exception(make_error(error_code::invalid_argument, "job_function: run() of an empty job").value);
  }
  // The constructors' body: stores f inline or on the heap and sets the
  // vtable; an empty callable leaves the job empty. With `no_throw`, no
  // memory for the heap copy leaves it empty too (D(f) not evaluated).
  template <bool no_throw, typename D, typename F>
  void wrap(F&& f) {
    if (detail::is_empty_callable(f)) return;
    if constexpr (stored_inline<D>) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
    } else {
      D* heap = nullptr;
      if constexpr (no_throw) {
        heap = new (std::nothrow) D(std::forward<F>(f));
        if (heap == nullptr) return;
      } else {
        heap = new D(std::forward<F>(f));
      }
      std::memcpy(storage_, &heap, sizeof(heap));
    }
    vtable_ = &vtable_for<D>;
  }

  struct vtable_t {
    job_outcome (*invoke)(void* storage);
    void (*cancel)(void* storage) noexcept;
    void (*cancel_because)(void* storage, const char* why) noexcept;
    // nullptr: the bytes may be copied (trivially relocatable or heap pointer).
    void (*relocate)(void* dst, void* src) noexcept;
    // nullptr: nothing to do.
    void (*destroy)(void* storage) noexcept;
    // 8-byte words of storage the callable uses (1..inline_capacity / 8).
    std::uint32_t payload_words;
  };

  template <typename D>
  static D* target(void* storage) noexcept {
    if constexpr (stored_inline<D>) {
      return std::launder(static_cast<D*>(storage));
    } else {
      D* heap = nullptr;
      std::memcpy(&heap, storage, sizeof(heap));
      return heap;
    }
  }

  template <typename D>
  static job_outcome invoke_impl(void* storage) {
    D& f = *target<D>(storage);
    if constexpr (detail::has_report_hook<D>) {
      return f.run_and_report();
    } else {
      detail::invoke_job(f);
      return job_outcome::succeeded;
    }
  }

  template <typename D>
  static constexpr vtable_t make_vtable() noexcept {
    vtable_t vt{};
    vt.invoke = &invoke_impl<D>;
    if constexpr (stored_inline<D>) {
      vt.payload_words = static_cast<std::uint32_t>((sizeof(D) + 7) / 8);
    } else {
      vt.payload_words = 1;  // the heap pointer
    }
    if constexpr (detail::has_cancel_hook<D>) {
      vt.cancel = [](void* s) noexcept { target<D>(s)->cancel(); };
    }
    if constexpr (detail::has_cancel_reason_hook<D>) {
      vt.cancel_because = [](void* s, const char* why) noexcept { target<D>(s)->cancel_because(why); };
    }
    if constexpr (stored_inline<D>) {
      if constexpr (!std::is_trivially_copyable_v<D>) {
        vt.relocate = [](void* dst, void* src) noexcept {
          D* from = target<D>(src);
          ::new (dst) D(std::move(*from));
          from->~D();
        };
      }
      if constexpr (!std::is_trivially_destructible_v<D>) {
        vt.destroy = [](void* s) noexcept { target<D>(s)->~D(); };
      }
    } else {
      vt.destroy = [](void* s) noexcept { delete target<D>(s); };
    }
    return vt;
  }

  template <typename D>
  static constexpr vtable_t vtable_for = make_vtable<D>();

  // Word-by-word copy (at most 6 words): cheaper than a memcpy call of a
  // size unknown at compile time.
  THREAD_SYSTEM_ALWAYS_INLINE static void copy_words(unsigned char* to, const unsigned char* from,
                                                     std::uint32_t words) noexcept {
    // In 32 bits on purpose: GCC 12 reads a 64-bit index as possibly huge and
    // warns (stringop-overflow) about the copy.
    // NOLINTNEXTLINE(bugprone-implicit-widening-of-multiplication-result): at most 6 words
    for (std::uint32_t i = 0; i < words; ++i) std::memcpy(to + 8 * i, from + 8 * i, 8);
  }

  // Takes `other`'s callable and metadata (this one's are overwritten, not
  // destroyed: the caller has dealt with them); `other` becomes empty.
  THREAD_SYSTEM_ALWAYS_INLINE void take(job_function& other) noexcept {
    vtable_ = other.vtable_;
    meta_ = other.meta_;
    other.meta_ = 0;
    if (vtable_ != nullptr) {
      relocate_from(other);
      other.vtable_ = nullptr;
    }
  }

  THREAD_SYSTEM_ALWAYS_INLINE void relocate_from(job_function& other) noexcept {
    if (vtable_->relocate == nullptr) {
      // The whole buffer, a fixed size (a few vector moves): bytes past the
      // callable are indeterminate and copied as such, which GCC may flag
      // where it inlines this into a moved-from temporary.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
      std::memcpy(storage_, other.storage_, inline_capacity);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
    } else {
      vtable_->relocate(storage_, other.storage_);
    }
  }

  alignas(inline_alignment) unsigned char storage_[inline_capacity];
  const vtable_t* vtable_ = nullptr;
  std::uint64_t meta_ = 0;  // tag in the top 8 bits, enqueue stamp below
};
// NOLINTEND(cppcoreguidelines-pro-type-member-init)

static_assert(sizeof(job_function) == 64, "a job_function should fill exactly one cache line");

}  // namespace thread_system
