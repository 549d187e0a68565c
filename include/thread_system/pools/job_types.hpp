// job_types: the default job types of a typed pool, highest priority first.
//
// A typed pool orders types by priority. With no explicit order, a type's
// priority is its underlying value, lowest first - so for an enum that is the
// order of declaration when the values are not given explicitly. Your own
// enum works the same way (see typed_thread_pool.hpp):
//
//   enum class my_types { urgent, normal, bulk };
//   thread_system::typed_thread_pool_t<my_types> pool{"mine"};
//
// A `to_string(T)` found by argument-dependent lookup names the type in
// statistics and errors; otherwise it is "type <n>".
#pragma once

#include <cstdint>
#include <string_view>

namespace thread_system {

enum class job_types : std::uint8_t {
  RealTime,    ///< Latency-critical work; served first.
  Batch,       ///< Throughput work.
  Background,  ///< Work that may wait.
};

[[nodiscard]] constexpr std::string_view to_string(job_types t) noexcept {
  switch (t) {
    case job_types::RealTime:
      return "RealTime";
    case job_types::Batch:
      return "Batch";
    case job_types::Background:
      return "Background";
  }
  return "unknown";
}

}  // namespace thread_system
