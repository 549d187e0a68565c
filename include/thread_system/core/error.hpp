// Error model of Thread System.
//
// Every refusal in the library is reported as a value, never as undefined
// behaviour or a silent drop: functions that can fail return `result<T>`,
// which holds either a `T` or an `error` (a code plus a human-readable
// message). `result<void>` carries only success or an error.
//
// Where a value-based error cannot be returned (a constructor, a future whose
// job was cancelled) the same `error` travels inside an `error_exception`.
//
// Thread-safety: these are plain value types; a `result` may be moved between
// threads like any other value. None of them is internally synchronised.
#pragma once

#include <cassert>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "thread_system/core/concepts.hpp"

namespace thread_system {

/// Machine-readable reason for a failure. Stable: values are never reused.
enum class error_code : int {
  ok = 0,
  pool_stopped = 1,         ///< The pool (or queue) is stopped/closed; nothing new is accepted.
  queue_full = 2,           ///< A bounded queue is at capacity.
  invalid_argument = 3,     ///< Null job, zero workers, malformed option...
  cancelled = 4,            ///< The job was discarded before it started.
  job_failed = 5,           ///< A job reported failure (seed-style `do_work()` error).
  timeout = 6,              ///< A timed operation expired.
  not_found = 7,            ///< A lookup found nothing.
  not_supported = 8,        ///< The platform cannot honour the request.
  already_started = 9,      ///< `start()` on a running pool/thread.
  resource_exhausted = 10,  ///< The system refused a thread or memory.
  no_worker = 11,           ///< No worker of a typed pool serves the job's type.
};

/// Short stable name of a code ("pool_stopped", ...).
[[nodiscard]] constexpr std::string_view to_string(error_code code) noexcept {
  switch (code) {
    case error_code::ok:
      return "ok";
    case error_code::pool_stopped:
      return "pool_stopped";
    case error_code::queue_full:
      return "queue_full";
    case error_code::invalid_argument:
      return "invalid_argument";
    case error_code::cancelled:
      return "cancelled";
    case error_code::job_failed:
      return "job_failed";
    case error_code::timeout:
      return "timeout";
    case error_code::not_found:
      return "not_found";
    case error_code::not_supported:
      return "not_supported";
    case error_code::already_started:
      return "already_started";
    case error_code::resource_exhausted:
      return "resource_exhausted";
    case error_code::no_worker:
      return "no_worker";
  }
  return "unknown";
}

/// A failure: what went wrong (`code`) and why, for a human (`message`).
class error {
 public:
  error() = default;
  /// A failure with the given code and human-readable explanation.
  error(error_code code, std::string message) : code_(code), message_(std::move(message)) {}

  /// The machine-readable reason.
  [[nodiscard]] error_code code() const noexcept { return code_; }
  /// The human-readable explanation (may be empty).
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// "code: message", for logs.
  [[nodiscard]] std::string to_string() const {
    std::string s{thread_system::to_string(code_)};
    if (!message_.empty()) {
      s += ": ";
      s += message_;
    }
    return s;
  }

  /// Errors compare equal when their codes are equal; messages are ignored.
  friend bool operator==(const error& a, const error& b) noexcept { return a.code_ == b.code_; }

 private:
  error_code code_ = error_code::ok;
  std::string message_;
};

/// An `error` thrown where no `result` can be returned (constructors, the
/// `get()` of a future whose job was cancelled).
class error_exception : public std::exception {
 public:
  /// Wraps `err`; what() returns `err.to_string()` - or the code's name
  /// alone when no memory is left for that text (an out-of-memory refusal
  /// must not turn into std::bad_alloc while it is being thrown).
  explicit error_exception(error&& err) noexcept {
    try {
      auto s = std::make_shared<shared_error>();  // before `err` is touched
      s->err = std::move(err);                    // a move allocates nothing
      shared_ = with_what(std::move(s));
    } catch (const std::bad_alloc&) {
      // make_shared threw, so `err` was not moved from: it is kept here
      // whole (a move allocates nothing).
      alone_ = std::move(err);  // NOLINT(bugprone-use-after-move)
    }
  }
  /// Copies `err`; out of memory for the copy, keeps its code alone (as
  /// above: the exception is still an error_exception with that code).
  explicit error_exception(const error& err) noexcept {
    try {
      auto s = std::make_shared<shared_error>();
      s->err = err;  // may throw std::bad_alloc: then s is freed
      shared_ = with_what(std::move(s));
    } catch (const std::bad_alloc&) {
      alone_ = code_only(err);
    }
  }
  /// Copies share the wrapped error and its text (as std::runtime_error
  /// shares its text), so a copy allocates nothing and never throws:
  /// std::make_exception_ptr, which copies its argument (and in libstdc++
  /// would hand back the std::bad_alloc of a failed copy instead), always
  /// holds this error. (Only an exception made without memory copies its
  /// error, and keeps its code alone if that copy finds none either.)
  error_exception(const error_exception& other) noexcept
      : std::exception(other), shared_(other.shared_), alone_(copy_alone(other)) {}
  /// As the copy constructor.
  error_exception& operator=(const error_exception& other) noexcept {
    if (this != &other) {
      std::exception::operator=(other);
      shared_ = other.shared_;
      alone_ = copy_alone(other);
    }
    return *this;
  }
  ~error_exception() override = default;

  /// "code: message" of the wrapped error.
  [[nodiscard]] const char* what() const noexcept override {
    if (shared_ != nullptr && !shared_->what.empty()) return shared_->what.c_str();
    return thread_system::to_string(code()).data();
  }
  /// The wrapped error.
  [[nodiscard]] const error& get_error() const noexcept { return shared_ != nullptr ? shared_->err : alone_; }
  /// The code of the wrapped error.
  [[nodiscard]] error_code code() const noexcept { return get_error().code(); }

 private:
  struct shared_error {
    error err;
    std::string what;  // err.to_string(), or empty when there was no memory for it
  };

  // An error with `err`'s code and no message: an empty string allocates nothing.
  static error code_only(const error& err) noexcept { return error{err.code(), std::string()}; }

  // `s` with its what() text (left empty, and what() falls back to the
  // code's name, when there is no memory for it).
  static std::shared_ptr<const shared_error> with_what(std::shared_ptr<shared_error> s) noexcept {
    try {
      s->what = s->err.to_string();
    } catch (const std::bad_alloc&) {
    }
    return s;
  }

  // The error of an exception made without memory, copied (its code alone
  // if that copy finds none either); an empty error when it is shared.
  static error copy_alone(const error_exception& other) noexcept {
    if (other.shared_ != nullptr) return error{};
    try {
      return other.alone_;
    } catch (const std::bad_alloc&) {
      return code_only(other.alone_);
    }
  }

  std::shared_ptr<const shared_error> shared_;  // immutable once made; shared by copies (null: out of memory)
  error alone_;                                 // the error when shared_ is null
};

/// Wraps an error so that it converts to any `result<T>` (like std::unexpected).
struct unexpected_error {
  /// The error the converted `result` will hold.
  error value;
};

/// Builds an error result: `return make_error(error_code::queue_full, "...");`
[[nodiscard]] inline unexpected_error make_error(error_code code, std::string message) {
  return unexpected_error{error{code, std::move(message)}};
}

/// make_error() for paths that must not throw, even out of memory: calls
/// `message()` (which returns something a std::string is built from) and,
/// if that throws, returns an error that carries only its code (an empty
/// message allocates nothing).
template <typename MessageFn>
[[nodiscard]] unexpected_error make_error_nothrow(error_code code, MessageFn&& message) noexcept {
  try {
    return unexpected_error{error{code, std::string(message())}};
  } catch (...) {
    return unexpected_error{error{code, std::string()}};
  }
}

/// make_error() with a message that is a C string (a literal): never throws
/// (make_error_nothrow()), so a refusal built from a literal comes back, with
/// its code, even when nothing can be allocated.
[[nodiscard]] inline unexpected_error make_error(error_code code, const char* message) noexcept {
  return make_error_nothrow(code, [message] { return message; });
}

/// Either a `T` or an `error`. Accessing the wrong alternative is a
/// precondition violation: `value()` throws `error_exception`, `operator*`
/// and `error()` throw `std::bad_variant_access` (never undefined behaviour).
/// Always one of the two: an assignment whose copy or move of the new
/// content throws leaves the old content (std::expected's guarantee; the
/// error's move never throws).
template <typename T>
class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T>, "result<T&> is not supported");

 public:
  /// The type of the success alternative.
  using value_type = T;

  /// Copies `other`'s value or error.
  result(const result& other) = default;
  /// Moves `other`'s value or error.
  result(result&& other) noexcept(std::is_nothrow_move_constructible_v<T>) = default;
  /// Takes a copy of `other`'s content; if that copy throws, this result is unchanged.
  result& operator=(const result& other) {
    if (this != &other) assign(other.storage_);
    return *this;
  }
  /// Takes `other`'s content; if the move throws, this result is unchanged.
  result& operator=(result&& other) noexcept(
      std::is_nothrow_move_constructible_v<T>&& std::is_nothrow_move_assignable_v<T>) {
    if (this != &other) assign(std::move(other.storage_));
    return *this;
  }
  ~result() = default;

  /// Holds a value constructed from `v`.
  template <typename U = T>
    requires std::constructible_from<T, U&&> && not_same_as<U, result> && not_same_as<U, unexpected_error>
  // NOLINTNEXTLINE(bugprone-forwarding-reference-overload): the constraint excludes result itself
  result(U&& v) : storage_(std::in_place_index<0>, std::forward<U>(v)) {}  // NOLINT(google-explicit-constructor)
  /// Holds the wrapped error (what make_error() returns).
  result(unexpected_error e) : storage_(std::in_place_index<1>, std::move(e.value)) {}  // NOLINT
  /// Holds `e`.
  result(thread_system::error e) : storage_(std::in_place_index<1>, std::move(e)) {}  // NOLINT

  /// True if this holds a value, false if it holds an error.
  [[nodiscard]] bool has_value() const noexcept { return storage_.index() == 0; }
  /// Same as has_value().
  explicit operator bool() const noexcept { return has_value(); }

  /// The value; throws `error_exception` holding the error if there is none.
  T& value() & {
    if (!has_value()) throw error_exception(std::get<1>(storage_));
    return std::get<0>(storage_);
  }
  /// The value; throws `error_exception` holding the error if there is none.
  const T& value() const& {
    if (!has_value()) throw error_exception(std::get<1>(storage_));
    return std::get<0>(storage_);
  }
  /// The value, moved out; throws `error_exception` holding the error if there is none.
  T&& value() && {
    if (!has_value()) throw error_exception(std::get<1>(storage_));
    return std::get<0>(std::move(storage_));
  }
  /// The value; throws `std::bad_variant_access` if this holds an error.
  T& operator*() & { return std::get<0>(storage_); }
  /// The value; throws `std::bad_variant_access` if this holds an error.
  const T& operator*() const& { return std::get<0>(storage_); }
  /// Points to the value; throws `std::bad_variant_access` if this holds an error.
  T* operator->() { return &std::get<0>(storage_); }
  /// Points to the value; throws `std::bad_variant_access` if this holds an error.
  const T* operator->() const { return &std::get<0>(storage_); }

  /// The error; throws `std::bad_variant_access` if this holds a value.
  [[nodiscard]] const thread_system::error& get_error() const& { return std::get<1>(storage_); }
  /// Same as get_error().
  [[nodiscard]] const thread_system::error& error() const& { return get_error(); }
  /// The error, to be moved from (`unexpected_error{std::move(r).error()}`
  /// passes it on without copying its message, so without allocating);
  /// throws `std::bad_variant_access` if this holds a value.
  [[nodiscard]] thread_system::error&& error() && { return std::get<1>(std::move(storage_)); }

  /// A copy of the value, or `fallback` converted to `T` if this holds an error.
  template <typename U>
  [[nodiscard]] T value_or(U&& fallback) const& {
    return has_value() ? std::get<0>(storage_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  // Assigns a variant of this type (copied or moved), never leaving storage_
  // valueless: the same alternative uses its own assignment; an error over a
  // value is copied aside first; a value over an error keeps the error aside
  // (a move: nothrow) and puts it back if constructing the value throws.
  template <typename V>
  void assign(V&& source) {
    if (source.index() == storage_.index()) {
      storage_ = std::forward<V>(source);
    } else if (source.index() == 1) {
      thread_system::error e = std::get<1>(std::forward<V>(source));  // a copy may throw: nothing changed yet
      storage_.template emplace<1>(std::move(e));
    } else {
      thread_system::error saved = std::move(std::get<1>(storage_));
      try {
        storage_.template emplace<0>(std::get<0>(std::forward<V>(source)));
      } catch (...) {
        storage_.template emplace<1>(std::move(saved));
        throw;
      }
    }
  }

  std::variant<T, thread_system::error> storage_;
};

/// Success or an error. A success holds nothing (one flag): returning one
/// constructs no error, and destroying one frees nothing.
template <>
class [[nodiscard]] result<void> {
 public:
  /// No success value: `void`.
  using value_type = void;

  /// A success.
  result() = default;
  /// Holds the wrapped error (what make_error() returns).
  result(unexpected_error e) : error_(std::move(e.value)) {}  // NOLINT
  /// Holds `e`.
  result(thread_system::error e) : error_(std::move(e)) {}  // NOLINT

  /// True on success, false if this holds an error.
  [[nodiscard]] bool has_value() const noexcept { return !error_.has_value(); }
  /// Same as has_value().
  explicit operator bool() const noexcept { return has_value(); }
  /// Throws `error_exception` if this holds an error.
  void value() const {
    if (error_) throw error_exception(*error_);
  }
  /// The error. Precondition: `!has_value()` (asserted; a success returns
  /// an empty error with code `ok`).
  [[nodiscard]] const thread_system::error& get_error() const& noexcept {
    assert(error_.has_value());
    static const thread_system::error none;
    return error_ ? *error_ : none;
  }
  /// Same as get_error().
  [[nodiscard]] const thread_system::error& error() const& noexcept { return get_error(); }
  /// The error, to be moved from (passed on without copying its message).
  /// Precondition: `!has_value()` (asserted, as get_error()).
  [[nodiscard]] thread_system::error&& error() && noexcept {
    assert(error_.has_value());
    if (!error_) error_.emplace();  // a success: an empty error with code `ok`, as get_error()
    return std::move(*error_);
  }

 private:
  std::optional<thread_system::error> error_;
};

namespace detail {

template <typename T>
inline constexpr bool is_result_v = false;
template <typename T>
inline constexpr bool is_result_v<result<T>> = true;

/// The types with which a job's callable says it failed by returning: a
/// `result<T>` (any T), an `unexpected_error` (what make_error() returns)
/// or an `error`.
template <typename R>
concept error_carrying =
    is_result_v<std::remove_cvref_t<R>> || std::same_as<std::remove_cvref_t<R>, unexpected_error> ||
    std::same_as<std::remove_cvref_t<R>, error>;

/// `e` moved (a move allocates nothing), or copied; a copy that finds no
/// memory for the message keeps the code alone. Never throws.
template <typename E>
[[nodiscard]] error error_nothrow(E&& e) noexcept {
  if constexpr (std::is_rvalue_reference_v<E&&> && !std::is_const_v<std::remove_reference_t<E>>) {
    return error(std::forward<E>(e));  // an rvalue here: moved
  } else {
    try {
      return error(e);
    } catch (...) {
      return error{e.code(), std::string()};
    }
  }
}

/// What a job's returned value says, as `result<void>`: the error in a
/// `result<T>` that holds one, in an `unexpected_error`, or an `error`
/// whose code is not `ok`; success for anything else (the value is
/// discarded). An rvalue's message is moved, not copied; a copy that finds
/// no memory keeps the code alone (never std::bad_alloc).
template <typename R>
[[nodiscard]] result<void> returned_outcome(R&& returned) {
  using U = std::remove_cvref_t<R>;
  if constexpr (is_result_v<U>) {
    if (returned.has_value()) return {};
    return error_nothrow(std::forward<R>(returned).error());
  } else if constexpr (std::is_same_v<U, unexpected_error>) {
    return error_nothrow(std::forward<R>(returned).value);
  } else if constexpr (std::is_same_v<U, error>) {
    if (returned.code() == error_code::ok) return {};
    return error_nothrow(std::forward<R>(returned));
  } else {
    (void)returned;
    return {};
  }
}

/// The error every entry point reports when memory runs out. Its message
/// is short enough to be stored without allocating.
[[nodiscard]] inline unexpected_error out_of_memory_error() noexcept {
  return unexpected_error{error{error_code::resource_exhausted, std::string("out of memory")}};
}

/// The error `e` carries, for an entry point that catches an
/// error_exception and returns it as a result: never throws (out of memory
/// for a copy of its message, the error keeps its code alone; copying it
/// inside the catch clause let that std::bad_alloc escape the entry point).
[[nodiscard]] inline unexpected_error error_of(const error_exception& e) noexcept {
  return make_error_nothrow(e.code(), [&e]() -> const std::string& { return e.get_error().message(); });
}

/// Calls `f` (which returns a result) and turns a std::bad_alloc it throws
/// into `resource_exhausted`: the one way every result-returning entry
/// point reports an allocation failure.
template <typename F>
[[nodiscard]] auto refuse_if_out_of_memory(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return out_of_memory_error();
  }
}

/// Calls `f` and turns a std::bad_alloc it throws into
/// error_exception{resource_exhausted}: the same for entry points that
/// report refusals by throwing (constructors, submit()).
template <typename F>
decltype(auto) throw_if_out_of_memory(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw error_exception(out_of_memory_error().value);
  }
}

}  // namespace detail

/// Seed-compatible spelling of `result<void>`.
using result_void = result<void>;

}  // namespace thread_system
