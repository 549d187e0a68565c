// arg_codec: the logger's deferred formatting. A log call whose arguments are
// all "deferrable" does not format on the caller's thread: it copies each
// argument in binary form into its thread's buffer, next to a pointer to a
// function instantiated for exactly those argument types
// (format_encoded<S...>), and the writer thread decodes and formats.
//
// What is deferred (everything else is formatted on the caller's thread):
//   * arithmetic types (integers, floating point, bool, the char types),
//     enumerations, std::nullptr_t and non-character pointers: copied by value;
//   * strings: std::string, std::string_view, const char* / char* and char
//     arrays: the characters are copied (a C string up to its NUL, an array up
//     to its first NUL or its end), so the caller may change or free them at
//     once;
//   * a trivially copyable type T for which the user specialises
//     thread_system::log_by_value<T> as true: copied by value and formatted on
//     the writer thread with fmt::formatter<T>. Only do this for types whose
//     formatting depends on the value alone (no pointers to data that may
//     change or die before the writer formats it).
// Formatting with the decoded value gives the same text as formatting the
// original: the decoded type is the argument's own type, except strings,
// which decode as std::string_view (std::string and string_view) or as a
// NUL-terminated const char* (C strings and arrays).
//
// Encoding: the arguments are packed back to back with no padding (memcpy in
// and out, so no alignment is assumed); a string is a 32-bit length followed
// by its bytes (and a NUL for C strings).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

namespace thread_system {

/// Opt-in: specialise as std::true_type for a trivially copyable type whose formatted text depends only on its
/// value; the logger then copies it by value and formats it on the writer thread (see detail/arg_codec.hpp).
template <typename T>
struct log_by_value : std::false_type {};

namespace detail {

/// The function the writer calls to format a deferred record: appends the
/// formatted message to `out`. Throws what {fmt} or a formatter throws.
using format_fn = void (*)(fmt::memory_buffer& out, fmt::string_view format, const std::byte* args);

template <typename T>
inline constexpr bool is_char_type_v = std::is_same_v<T, char> || std::is_same_v<T, signed char> ||
                                       std::is_same_v<T, unsigned char> || std::is_same_v<T, char8_t>;

/// C strings: formatted up to their NUL.
template <typename T>
concept log_c_string = std::is_same_v<T, const char*> || std::is_same_v<T, char*>;

/// Strings with a known length.
template <typename T>
concept log_sized_string = std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view>;

/// Copied by value and formatted as themselves.
template <typename T>
concept log_value =
    std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::nullptr_t> ||
    (std::is_pointer_v<T> && !is_char_type_v<std::remove_cv_t<std::remove_pointer_t<T>>>) ||
    (log_by_value<T>::value && std::is_trivially_copyable_v<T>);

/// The stored form of an argument type: decays arrays, drops references and cv.
template <typename A>
using log_stored_t = std::conditional_t<std::is_array_v<std::remove_reference_t<A>>, const char*,
                                        std::remove_cv_t<std::remove_reference_t<A>>>;

/// An argument the logger can copy and format later.
template <typename A>
concept deferrable_log_arg = (log_c_string<log_stored_t<A>> || log_sized_string<log_stored_t<A>> ||
                              log_value<log_stored_t<A>>)&&(!std::is_array_v<std::remove_reference_t<A>> ||
                                                            is_char_type_v<std::remove_extent_t<
                                                                std::remove_cv_t<std::remove_reference_t<A>>>>);

/// The characters of a string argument (arrays: up to the first NUL or the end).
template <typename A>
std::string_view log_string_view(const A& a) noexcept {
  using R = std::remove_cv_t<std::remove_reference_t<A>>;
  if constexpr (std::is_array_v<R>) {
    const char* p = reinterpret_cast<const char*>(a);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
    std::size_t n = 0;
    while (n < std::extent_v<R> && p[n] != '\0') ++n;
    return {p, n};
  } else if constexpr (log_c_string<R>) {
    return a != nullptr ? std::string_view(a) : std::string_view();
  } else {
    return std::string_view(a);
  }
}

/// False for a null C string ({fmt} refuses it; the call is then formatted on
/// the caller's thread, where the refusal is reported).
template <typename A>
bool encodable(const A& a) noexcept {
  if constexpr (log_c_string<log_stored_t<A>> && !std::is_array_v<std::remove_reference_t<A>>) {
    return a != nullptr;
  } else {
    return true;
  }
}

/// Bytes argument `a` takes in the encoding.
template <typename A>
std::size_t encoded_size(const A& a) noexcept {
  using S = log_stored_t<A>;
  if constexpr (log_c_string<S>) {
    return sizeof(std::uint32_t) + log_string_view(a).size() + 1;
  } else if constexpr (log_sized_string<S>) {
    return sizeof(std::uint32_t) + log_string_view(a).size();
  } else {
    return sizeof(S);
  }
}

/// Writes `a` at `out` and returns the end. `out` has encoded_size(a) bytes.
template <typename A>
std::byte* encode_arg(std::byte* out, const A& a) noexcept {
  using S = log_stored_t<A>;
  if constexpr (log_c_string<S> || log_sized_string<S>) {
    const std::string_view s = log_string_view(a);
    const auto n = static_cast<std::uint32_t>(s.size());
    std::memcpy(out, &n, sizeof n);
    out += sizeof n;
    if (n != 0) std::memcpy(out, s.data(), n);
    out += n;
    if constexpr (log_c_string<S>) *out++ = std::byte{0};
    return out;
  } else {
    const S value = a;
    std::memcpy(out, &value, sizeof(S));
    return out + sizeof(S);
  }
}

/// The decoded form of stored type S.
template <typename S>
using log_decoded_t = std::conditional_t<log_c_string<S>, const char*,
                                         std::conditional_t<log_sized_string<S>, std::string_view, S>>;

/// Reads one S at `in` and advances `in`.
template <typename S>
log_decoded_t<S> decode_arg(const std::byte*& in) noexcept {
  if constexpr (log_c_string<S> || log_sized_string<S>) {
    std::uint32_t n = 0;
    std::memcpy(&n, in, sizeof n);
    in += sizeof n;
    const char* text = reinterpret_cast<const char*>(in);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
    in += n;
    if constexpr (log_c_string<S>) {
      ++in;  // the NUL
      return text;
    } else {
      return std::string_view(text, n);
    }
  } else {
    S value;
    std::memcpy(&value, in, sizeof(S));
    in += sizeof(S);
    return value;
  }
}

/// Decodes arguments of stored types S... and formats them with `format`.
template <typename... S>
void format_encoded(fmt::memory_buffer& out, fmt::string_view format, [[maybe_unused]] const std::byte* args) {
  // Braced initialisation evaluates the decoders left to right.
  const std::tuple<log_decoded_t<S>...> values{decode_arg<S>(args)...};
  std::apply([&](const auto&... v) { fmt::vformat_to(fmt::appender(out), format, fmt::make_format_args(v...)); },
             values);
}

/// True when a format string has no nested replacement field (a dynamic
/// width or precision such as "{:{}}"): only such strings are formatted on
/// the writer thread, because a dynamic width is checked only at run time.
constexpr bool format_is_deferrable(std::string_view text) noexcept {
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{') {
      if (depth == 0 && i + 1 < text.size() && text[i + 1] == '{') {
        ++i;  // "{{" outside a field: a literal brace
        continue;
      }
      if (++depth > 1) return false;
    } else if (c == '}') {
      if (depth == 0) {
        ++i;  // "}}": a literal brace
        continue;
      }
      --depth;
    }
  }
  return true;
}

}  // namespace detail
}  // namespace thread_system
