// this_job: what a running job may ask about itself, from inside it.
//
//   pool.enqueue(token, [] {
//     while (!this_job::is_cancelled()) do_a_slice();
//   });
//
// Outside a job, and inside a job submitted without a token, token() is a
// token that is never cancelled and is_cancelled() is false. While a job
// submitted with a token runs (enqueue(token, f), submit(token, f, ...)),
// they see that token. A helping wait inside a job (future::get(),
// task_group::wait()) runs other jobs with their own tokens and restores the
// waiting job's token afterwards. Thread-safety: each thread sees only the
// job it is running.
#pragma once

#include <utility>

#include "thread_system/sync/cancellation.hpp"

namespace thread_system {

/// The job that is running on this thread, as seen from inside it.
namespace this_job {
namespace detail {
inline thread_local const cancellation_token* current_token = nullptr;

/// Makes `token` (null: none) the running job's token on this thread for
/// the scope's lifetime, then puts back the one it replaced: every place
/// that runs a job (a token job, a coroutine's resumption, a job run
/// without a token inside another) sets the token this way.
class token_scope {
 public:
  explicit token_scope(const cancellation_token* token) noexcept : outer_(std::exchange(current_token, token)) {}
  ~token_scope() { current_token = outer_; }
  token_scope(const token_scope&) = delete;
  token_scope& operator=(const token_scope&) = delete;

 private:
  const cancellation_token* outer_;
};
}  // namespace detail
/// The cancellation token the running job was submitted with (a token that
/// is never cancelled when it has none, or outside a job).
[[nodiscard]] inline cancellation_token token() {
  const cancellation_token* t = detail::current_token;
  return t != nullptr ? *t : cancellation_token::none();
}
/// True when the running job's token has been cancelled: a long job polls
/// this and returns early.
[[nodiscard]] inline bool is_cancelled() noexcept {
  const cancellation_token* t = detail::current_token;
  return t != nullptr && t->is_cancelled();
}
}  // namespace this_job

}  // namespace thread_system
