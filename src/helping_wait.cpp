// The thread-local registration behind helping waits (sync/helping_wait.hpp):
// a pool's worker loop registers its help_source for its thread, and every
// wait on that thread helps through it.
#include "thread_system/sync/helping_wait.hpp"

#include <utility>

namespace thread_system::detail {
namespace {
thread_local help_source* tl_help_source = nullptr;
}  // namespace

help_source* set_help_source(help_source* source) noexcept { return std::exchange(tl_help_source, source); }

help_source* current_help_source() noexcept { return tl_help_source; }

}  // namespace thread_system::detail
