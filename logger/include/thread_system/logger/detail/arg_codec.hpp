// arg_codec: the logger's deferred formatting. A log call whose arguments are
// all "deferrable" does not format on the caller's thread: it copies each
// argument in binary form into its thread's buffer, next to a pointer to a
// function instantiated for exactly those argument types
// (format_encoded<S...>), and the thread writing the records (the writer
// thread, or one in flush(): logger.hpp) decodes and formats.
//
// What is deferred (everything else is formatted on the caller's thread):
//   * arithmetic types (integers, floating point, bool, the char types),
//     enumerations, std::nullptr_t and non-character pointers: copied by value;
//   * strings: std::string, std::string_view, const char* / char* and char
//     arrays: the characters are copied (a C string up to its NUL, an array up
//     to its first NUL or its end), so the caller may change or free them at
//     once;
//   * a trivially copyable type T for which the user specialises
//     thread_system::log_by_value<T> as true: copied by value and formatted
//     when written (on the writer thread, or one in flush()) with
//     fmt::formatter<T>. Only do this for types whose
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
//
// Formatting on the writer: a format string is parsed once per call site and
// kept in the writer's format_cache (format_program): the literal text
// between fields, unescaped, and each field's fmt::formatter with its spec
// already parsed; a record then appends literals and calls the formatters
// (no parse, no type-erased argument list: ~25% less per record for a
// four-field message). This covers automatic field numbering ("{}",
// "{:spec}") over the argument types fmt formats natively (compiled_log_type:
// bool, char, the int and unsigned types from int up, float, double, long
// double, strings); anything else (positional "{0}" fields, other types, a
// program that cannot be allocated) is formatted with fmt::vformat_to as
// before. Both give the same text. The cache is keyed by the format's text
// and the argument types, never by a code address alone.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace thread_system {

/// Opt-in: specialise as std::true_type for a trivially copyable type whose formatted text depends only on its
/// value; the logger then copies it by value and formats it when written (see detail/arg_codec.hpp).
template <typename T>
struct log_by_value : std::false_type {};

namespace detail {

class format_cache;

/// The function the writer calls to format a deferred record: appends the
/// formatted message to `out`, using (and filling) the writer's `cache`.
/// Throws what {fmt} or a formatter throws.
using format_fn = void (*)(format_cache& cache, fmt::memory_buffer& out, fmt::string_view format,
                           const std::byte* args);

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
concept log_value = std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::nullptr_t> ||
                    (std::is_pointer_v<T> && !is_char_type_v<std::remove_cv_t<std::remove_pointer_t<T>>>) ||
                    (log_by_value<T>::value && std::is_trivially_copyable_v<T>);

/// The stored form of an argument type: decays arrays, drops references and cv.
template <typename A>
using log_stored_t = std::conditional_t<std::is_array_v<std::remove_reference_t<A>>, const char*,
                                        std::remove_cv_t<std::remove_reference_t<A>>>;

/// An argument the logger can copy and format later.
/// An array argument is deferred only as a string of plain `char` ({fmt}
/// formats arrays of other character types differently, e.g. as ranges).
template <typename A>
concept log_array_of_other_than_char =
    std::is_array_v<std::remove_reference_t<A>> &&
    !std::is_same_v<std::remove_cv_t<std::remove_extent_t<std::remove_reference_t<A>>>, char>;

/// An argument the logger can copy and format later.
template <typename A>
concept deferrable_log_arg = (log_c_string<log_stored_t<A>> || log_sized_string<log_stored_t<A>> ||
                              log_value<log_stored_t<A>>)&&!log_array_of_other_than_char<A>;

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

/// A char array as the caller-side formatting hands it to {fmt} (formatter
/// below): its characters up to the first NUL or its end, as the deferred
/// path copies them ({fmt} would read it as a C string, past the array's end
/// when it holds no NUL) - or, with the `p` presentation, its address, as
/// {fmt} formats an array with "{:p}" (a string_view refuses `p`).
struct char_array_arg {
  const char* address;
  std::string_view text;
};

/// An argument as the caller-side formatting hands it to {fmt}: a char array
/// as a char_array_arg; anything else as it is.
template <typename A>
decltype(auto) caller_format_view(const A& a) noexcept {
  if constexpr (std::is_array_v<A> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<A>>, char>) {
    return char_array_arg{static_cast<const char*>(a), log_string_view(a)};
  } else {
    return (a);  // const A&
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

/// A C string or char array as the encoder reads it: measured once, encoded
/// with a NUL after its characters.
struct c_string_arg {
  std::string_view text;
};

/// The argument as the encoder reads it: strings measured once (the size
/// and the copy must agree even if another thread changes a C string),
/// everything else by value.
template <typename A>
auto encode_view(const A& a) noexcept {
  using S = log_stored_t<A>;
  if constexpr (log_c_string<S>) {
    return c_string_arg{log_string_view(a)};
  } else if constexpr (log_sized_string<S>) {
    return std::string_view(a);
  } else {
    return static_cast<S>(a);
  }
}

/// Bytes a view takes in the encoding.
inline std::size_t encoded_size(const c_string_arg& a) noexcept { return sizeof(std::uint32_t) + a.text.size() + 1; }
inline std::size_t encoded_size(std::string_view s) noexcept { return sizeof(std::uint32_t) + s.size(); }
template <typename V>
std::size_t encoded_size(const V& /*value*/) noexcept {
  return sizeof(V);
}

/// Writes a string's length and characters at `out`; returns the end.
inline std::byte* encode_text(std::byte* out, std::string_view s) noexcept {
  const auto n = static_cast<std::uint32_t>(s.size());
  std::memcpy(out, &n, sizeof n);
  out += sizeof n;
  if (n != 0) std::memcpy(out, s.data(), n);
  return out + n;
}

/// Writes a view at `out` (which has encoded_size() bytes) and returns the end.
inline std::byte* encode_arg(std::byte* out, const c_string_arg& a) noexcept {
  out = encode_text(out, a.text);
  *out = std::byte{0};
  return out + 1;
}
inline std::byte* encode_arg(std::byte* out, std::string_view s) noexcept { return encode_text(out, s); }
template <typename V>
std::byte* encode_arg(std::byte* out, const V& value) noexcept {
  std::memcpy(out, &value, sizeof(V));
  return out + sizeof(V);
}

/// The decoded form of stored type S.
template <typename S>
using log_decoded_t =
    std::conditional_t<log_c_string<S>, const char*, std::conditional_t<log_sized_string<S>, std::string_view, S>>;

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
    // Through bytes: S need not be default-constructible.
    std::array<std::byte, sizeof(S)> raw;
    std::memcpy(raw.data(), in, sizeof(S));
    in += sizeof(S);
    return std::bit_cast<S>(raw);
  }
}

/// A decoded argument type the format cache formats with its own
/// fmt::formatter (the types {fmt} formats natively with the same formatter
/// that fmt::vformat_to uses), and its code in a program's signature.
template <typename T>
inline constexpr std::uint64_t compiled_type_code = std::is_same_v<T, bool>                 ? 1
                                                    : std::is_same_v<T, char>               ? 2
                                                    : std::is_same_v<T, int>                ? 3
                                                    : std::is_same_v<T, unsigned>           ? 4
                                                    : std::is_same_v<T, long>               ? 5
                                                    : std::is_same_v<T, unsigned long>      ? 6
                                                    : std::is_same_v<T, long long>          ? 7
                                                    : std::is_same_v<T, unsigned long long> ? 8
                                                    : std::is_same_v<T, float>              ? 9
                                                    : std::is_same_v<T, double>             ? 10
                                                    : std::is_same_v<T, long double>        ? 11
                                                    : std::is_same_v<T, std::string_view>   ? 12
                                                    : std::is_same_v<T, const char*>        ? 13
                                                                                            : 0;

template <typename T>
concept compiled_log_type = compiled_type_code<T> != 0;

/// The argument types of a program, 4 bits each (at most 15 arguments): a
/// program's layout depends on nothing else.
template <typename... T>
inline constexpr std::uint64_t program_signature = [] {
  std::uint64_t sig = 0;
  ((sig = (sig << 4) | compiled_type_code<T>), ...);
  return sig;
}();

/// A parsed format string for the decoded argument types T...: each field's
/// formatter (its spec parsed) and where the literal text before it ends in
/// the unescaped literals (kept by the cache entry). Trivially destructible:
/// the cache frees it as raw storage, with no code of the call site's.
template <typename... T>
struct format_program {
  static constexpr std::size_t arity = sizeof...(T);
  std::tuple<fmt::formatter<T>...> formatters;
  std::array<std::uint32_t, arity + 1> literal_end{};  // [k]: end of the literal before field k; [fields]: of all
  std::size_t fields = 0;
};

/// The writer's cache of parsed format strings (the holder of the writer's role only, like the
/// logger's message buffer). Direct-mapped on the format string's address;
/// an entry matches only the same text with the same argument types.
class format_cache {
 public:
  struct entry {
    std::uint64_t signature = 0;
    std::string text;                             // the format string, as parsed
    std::string literals;                         // its literal text, unescaped
    std::unique_ptr<std::max_align_t[]> program;  // a format_program<T...> (trivially destructible); null: vformat_to
    std::uint32_t misses = 0;                     // records of other call sites since this one's last
  };

  /// A slot held by another call site is taken over only after this many
  /// records of other sites in a row: of two hot sites that share a slot,
  /// one keeps it and the other is formatted by fmt::vformat_to, instead of
  /// both being parsed again on every record.
  static constexpr std::uint32_t takeover_misses = 8;

  entry& slot(const char* format) noexcept {
    const auto bits = reinterpret_cast<std::uintptr_t>(format);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
    return entries_[(bits ^ (bits >> 7) ^ (bits >> 13)) % entries_.size()];
  }

  static bool matches(const entry& e, std::uint64_t signature, fmt::string_view format) noexcept {
    return e.signature == signature && e.text.size() == format.size() &&
           std::memcmp(e.text.data(), format.data(), format.size()) == 0;
  }

 private:
  std::array<entry, 128> entries_;
};

/// Parses `format` for T... into `e`. A format or a spec outside what a
/// program covers is cached as not compiled (formatted with
/// fmt::vformat_to). Out of memory: false, and `e` is left empty (tried
/// again by a later record).
template <typename... T>
bool compile_format(format_cache::entry& e, fmt::string_view format) noexcept {
  using program = format_program<T...>;
  static_assert(std::is_trivially_destructible_v<program> && alignof(program) <= alignof(std::max_align_t));
  // Out of memory: nothing cached (signature 0 matches no call), tried again by a later record.
  const auto forget = [&e]() noexcept {
    e.signature = 0;
    e.text.clear();
    e.program.reset();
    return false;
  };
  e.signature = 0;
  e.program.reset();
  try {
    e.text.assign(format.data(), format.size());
    e.literals.clear();
    constexpr std::size_t words = (sizeof(program) + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
    e.program.reset(new std::max_align_t[words]);
  } catch (...) {
    return forget();
  }
  e.signature = program_signature<T...>;
  auto* p = ::new (static_cast<void*>(e.program.get())) program{};
  bool ok = true;
  try {
    const char* it = format.data();
    const char* const end = it + format.size();
    while (ok && it != end) {
      const char c = *it;
      if (c == '{' || c == '}') {
        if (it + 1 != end && it[1] == c) {  // "{{" or "}}": a literal brace
          e.literals += c;
          it += 2;
        } else if (c == '}' || p->fields == program::arity || it + 1 == end || (it[1] != '}' && it[1] != ':')) {
          ok = false;               // a lone '}', a positional or named field, or more fields than arguments
        } else if (it[1] == '}') {  // "{}": the formatter's default spec, nothing to parse
          p->literal_end[p->fields++] = static_cast<std::uint32_t>(e.literals.size());
          it += 2;
        } else {
          // The spec starts after ':'; the formatter's parse() returns where
          // it stopped, which must be the field's '}'. A '{' inside it is a
          // nested field (a dynamic width or precision: '{' cannot be a
          // fill), which needs the argument list: not covered.
          const char* spec = it + 2;
          fmt::format_parse_context ctx(fmt::string_view(spec, static_cast<std::size_t>(end - spec)));
          const char* stop = nullptr;
          [&]<std::size_t... K>(std::index_sequence<K...>) {
            ((K == p->fields ? (void)(stop = std::get<K>(p->formatters).parse(ctx)) : (void)0), ...);
          }(std::index_sequence_for<T...>{});
          ok = stop != nullptr && stop != end && *stop == '}' && std::find(spec, stop, '{') == stop;
          p->literal_end[p->fields++] = static_cast<std::uint32_t>(e.literals.size());
          if (ok) it = stop + 1;
        }
      } else {
        const char* stop = std::find_if(it, end, [](char x) { return x == '{' || x == '}'; });
        e.literals.append(it, stop);
        it = stop;
      }
    }
  } catch (const std::bad_alloc&) {  // no memory for the literals
    return forget();
  } catch (...) {  // a spec the formatter refuses: formatted by fmt::vformat_to
    ok = false;
  }
  if (ok) {
    p->literal_end[p->fields] = static_cast<std::uint32_t>(e.literals.size());
  } else {
    e.program.reset();  // cached as not covered
  }
  return true;
}

/// Formats decoded `values` with a compiled program.
template <typename... T>
void run_format_program(const format_cache::entry& e, fmt::memory_buffer& out, const std::tuple<T...>& values) {
  const auto& p = *std::launder(reinterpret_cast<const format_program<T...>*>(e.program.get()));  // NOLINT
  const char* lit = e.literals.data();
  std::uint32_t begin = 0;
  fmt::format_context ctx(fmt::appender(out), fmt::format_args{}, fmt::detail::locale_ref{});
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    const auto field = [&](auto k) {
      constexpr std::size_t index = decltype(k)::value;
      if (index >= p.fields) return;
      out.append(lit + begin, lit + p.literal_end[index]);
      begin = p.literal_end[index];
      // fmt's format() is const: the parsed formatter is used as it is.
      ctx.advance_to(std::get<index>(p.formatters).format(std::get<index>(values), ctx));
    };
    (field(std::integral_constant<std::size_t, K>{}), ...);
  }(std::index_sequence_for<T...>{});
  out.append(lit + begin, lit + p.literal_end[p.fields]);
}

/// Decodes arguments of stored types S... and formats them with `format`.
template <typename... S>
void format_encoded([[maybe_unused]] format_cache& cache, fmt::memory_buffer& out, fmt::string_view format,
                    [[maybe_unused]] const std::byte* args) {
  // Braced initialisation evaluates the decoders left to right.
  const std::tuple<log_decoded_t<S>...> values{decode_arg<S>(args)...};
  if constexpr (sizeof...(S) > 0 && sizeof...(S) <= 15 && (compiled_log_type<log_decoded_t<S>> && ...)) {
    constexpr std::uint64_t signature = program_signature<log_decoded_t<S>...>;
    format_cache::entry& e = cache.slot(format.data());
    bool ready = format_cache::matches(e, signature, format);
    if (ready) {
      e.misses = 0;
    } else if (e.signature == 0 || ++e.misses >= format_cache::takeover_misses) {
      e.misses = 0;
      ready = compile_format<log_decoded_t<S>...>(e, format);
    }
    if (ready && e.program != nullptr) {
      run_format_program(e, out, values);
      return;
    }
  }
  std::apply([&](const auto&... v) { fmt::vformat_to(fmt::appender(out), format, fmt::make_format_args(v...)); },
             values);
}

/// True when a format string may be formatted on the writer thread: no
/// nested replacement field (a dynamic width or precision such as "{:{}}",
/// checked only at run time) and no `p` presentation (a C string formatted
/// as a pointer would show the address of the logger's copy). A fill
/// character (any code point, '}' included, before '<', '>' or '^') is
/// skipped, as {fmt} reads it: "{:}>{}}" has a nested field.
constexpr bool format_is_deferrable(std::string_view text) noexcept {
  int depth = 0;
  bool in_spec = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{') {
      if (depth == 0 && i + 1 < text.size() && text[i + 1] == '{') {
        ++i;  // "{{" outside a field: a literal brace
        continue;
      }
      if (++depth > 1) return false;
      in_spec = false;
    } else if (c == '}') {
      if (depth == 0) {
        ++i;  // "}}": a literal brace
        continue;
      }
      if (in_spec && text[i - 1] == 'p') return false;
      --depth;
    } else if (c == ':' && depth == 1 && !in_spec) {
      in_spec = true;
      if (i + 1 < text.size()) {
        // The fill's length in bytes, from its lead byte as {fmt} counts it
        // (a stray continuation byte counts as one).
        constexpr std::array<std::uint8_t, 32> lengths{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                                       0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 3, 3, 4, 0};
        const auto lead = static_cast<unsigned char>(text[i + 1]);
        const std::size_t fill = std::max<std::size_t>(1, lengths[lead >> 3]);
        const std::size_t align = i + 1 + fill;
        if (align < text.size() && (text[align] == '<' || text[align] == '>' || text[align] == '^')) i = align;
      }
    }
  }
  return true;
}

}  // namespace detail
}  // namespace thread_system

/// Formats a char array argument of a call formatted on the caller's thread
/// (detail::char_array_arg): as a string, or as a pointer with the `p`
/// presentation - the text {fmt} gives the array itself.
template <>
struct fmt::formatter<thread_system::detail::char_array_arg> {
  constexpr auto parse(fmt::format_parse_context& ctx) -> fmt::format_parse_context::iterator {
    // The presentation is the last character of the spec, before the '}'
    // that closes it (nested fields such as "{:{}p}" skipped).
    auto end = ctx.begin();
    for (int depth = 0; end != ctx.end() && (*end != '}' || depth != 0); ++end) {
      if (*end == '{') ++depth;
      if (*end == '}') --depth;
    }
    as_pointer_ = end != ctx.begin() && *(end - 1) == 'p';
    return as_pointer_ ? pointer_.parse(ctx) : text_.parse(ctx);
  }
  auto format(const thread_system::detail::char_array_arg& a, fmt::format_context& ctx) const
      -> fmt::format_context::iterator {
    return as_pointer_ ? pointer_.format(static_cast<const void*>(a.address), ctx) : text_.format(a.text, ctx);
  }

 private:
  fmt::formatter<std::string_view> text_;
  fmt::formatter<const void*> pointer_;
  bool as_pointer_ = false;
};
