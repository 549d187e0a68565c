// Test-only parsers for the export formats: a strict JSON parser (RFC 8259)
// and a checker for the Prometheus text format 0.0.4. Both report the first
// problem as a message so a failing test says what is wrong.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace thread_system::monitoring::test {

// ---- JSON -------------------------------------------------------------------

// An object member. Declared before json_value is complete: a vector of an
// incomplete type is fine (C++17), a std::pair of one is not.
struct json_member;

struct json_value {
  enum class kind { null, boolean, number, string, array, object };
  kind type = kind::null;
  bool boolean = false;
  double number = 0.0;
  std::string text;
  std::vector<json_value> items;
  std::vector<json_member> members;

  [[nodiscard]] const json_value* get(std::string_view key) const;
  /// Follows a path of object keys; nullptr when any is missing.
  [[nodiscard]] const json_value* at(std::initializer_list<std::string_view> path) const {
    const json_value* v = this;
    for (std::string_view k : path) {
      if (v == nullptr || v->type != kind::object) return nullptr;
      v = v->get(k);
    }
    return v;
  }
};

struct json_member {
  std::string key;
  json_value value;
};

inline const json_value* json_value::get(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

class json_parser {
 public:
  explicit json_parser(std::string_view s) : s_(s) {}

  /// The document, or nullopt with error() set.
  std::optional<json_value> parse() {
    json_value v;
    skip_ws();
    if (!parse_value(v, 0)) return std::nullopt;
    skip_ws();
    if (pos_ != s_.size()) return fail("trailing characters");
    return v;
  }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  std::nullopt_t fail(std::string why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(pos_);
    return std::nullopt;
  }
  bool bad(std::string why) {
    (void)fail(std::move(why));
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return bad("bad literal");
    pos_ += word.size();
    return true;
  }

  bool parse_value(json_value& v, int depth) {
    if (depth > 64) return bad("nesting too deep");
    if (pos_ >= s_.size()) return bad("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return parse_object(v, depth);
    if (c == '[') return parse_array(v, depth);
    if (c == '"') {
      v.type = json_value::kind::string;
      return parse_string(v.text);
    }
    if (c == 't') {
      v.type = json_value::kind::boolean;
      v.boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      v.type = json_value::kind::boolean;
      return literal("false");
    }
    if (c == 'n') {
      v.type = json_value::kind::null;
      return literal("null");
    }
    return parse_number(v);
  }

  bool parse_object(json_value& v, int depth) {
    v.type = json_value::kind::object;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return bad("expected a key");
      std::string key;
      if (!parse_string(key)) return false;
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return bad("expected ':'");
      ++pos_;
      skip_ws();
      json_value member;
      if (!parse_value(member, depth + 1)) return false;
      for (const auto& [k, ignored] : v.members) {
        if (k == key) return bad("duplicate key " + key);
      }
      v.members.push_back(json_member{std::move(key), std::move(member)});
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return bad("expected ',' or '}'");
    }
  }

  bool parse_array(json_value& v, int depth) {
    v.type = json_value::kind::array;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      json_value item;
      if (!parse_value(item, depth + 1)) return false;
      v.items.push_back(std::move(item));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return bad("expected ',' or ']'");
    }
  }

  // The length of the well-formed UTF-8 sequence at s[i] per the Unicode
  // Standard, Table 3-7, or 0 when it is not well-formed.
  static std::size_t utf8_table_length(std::string_view s, std::size_t i) {
    struct row {
      unsigned char lead_lo, lead_hi, second_lo, second_hi;
      std::size_t length;
    };
    static constexpr row table[] = {
        {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3}, {0xE1, 0xEC, 0x80, 0xBF, 3},
        {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3}, {0xF0, 0xF0, 0x90, 0xBF, 4},
        {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4},
    };
    const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    for (const row& r : table) {
      if (at(i) < r.lead_lo || at(i) > r.lead_hi) continue;
      if (i + r.length > s.size()) return 0;
      if (at(i + 1) < r.second_lo || at(i + 1) > r.second_hi) return 0;
      for (std::size_t k = 2; k < r.length; ++k) {
        if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
      }
      return r.length;
    }
    return 0;
  }

  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool hex4(std::uint32_t& out) {
    if (pos_ + 4 > s_.size()) return bad("short \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      out <<= 4;
      if (h >= '0' && h <= '9') {
        out |= static_cast<std::uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        out |= static_cast<std::uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        out |= static_cast<std::uint32_t>(h - 'A' + 10);
      } else {
        return bad("bad hex digit");
      }
    }
    return true;
  }

  bool parse_string(std::string& out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return bad("raw control character in string");
      if (c == '\\') {
        if (++pos_ >= s_.size()) return bad("dangling backslash");
        const char e = s_[pos_++];
        switch (e) {
          case '"':
          case '\\':
          case '/':
            out.push_back(e);
            break;
          case 'b':
            out.push_back('\b');
            break;
          case 'f':
            out.push_back('\f');
            break;
          case 'n':
            out.push_back('\n');
            break;
          case 'r':
            out.push_back('\r');
            break;
          case 't':
            out.push_back('\t');
            break;
          case 'u': {
            std::uint32_t cp = 0;
            if (!hex4(cp)) return false;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              std::uint32_t low = 0;
              if (s_.substr(pos_, 2) != "\\u") return bad("lone high surrogate");
              pos_ += 2;
              if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return bad("bad low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              return bad("lone low surrogate");
            }
            put_utf8(out, cp);
            break;
          }
          default:
            return bad("bad escape");
        }
        continue;
      }
      if (c >= 0x80) {
        // Validate the UTF-8 sequence by the Unicode Standard's table of
        // well-formed byte sequences (Table 3-7: the allowed range of each
        // byte after the lead byte), not by decoding: an oracle independent
        // of the exporter's decoder (monitoring/src/utf8.hpp).
        const std::size_t n = utf8_table_length(s_, pos_);
        if (n == 0) return bad("invalid UTF-8 sequence");
        out.append(s_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      out.push_back(static_cast<char>(c));
      ++pos_;
    }
    return bad("unterminated string");
  }

  bool parse_number(json_value& v) {
    const std::size_t start = pos_;
    const auto digit = [this] { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; };
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    if (!digit()) return bad("expected a value");
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (digit()) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digit()) return bad("digit expected after '.'");
      while (digit()) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digit()) return bad("digit expected in exponent");
      while (digit()) ++pos_;
    }
    v.type = json_value::kind::number;
    v.number = std::strtod(std::string(s_.substr(start, pos_ - start)).c_str(), nullptr);
    return true;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::string error_;
};

// ---- Prometheus text format 0.0.4 ------------------------------------------------

struct prom_sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0.0;
};

struct prom_document {
  std::map<std::string, std::string> types;  // family -> type
  std::vector<prom_sample> samples;

  [[nodiscard]] std::optional<double> value(std::string_view name,
                                            const std::map<std::string, std::string>& labels) const {
    for (const auto& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nullopt;
  }
};

class prometheus_checker {
 public:
  /// The parsed document, or nullopt with error() set.
  std::optional<prom_document> check(std::string_view text) {
    prom_document doc;
    std::set<std::string> finished_families;
    std::string current_family;
    std::set<std::string> helped;
    std::set<std::pair<std::string, std::map<std::string, std::string>>> series;
    std::size_t line_no = 0;
    std::size_t pos = 0;
    if (!text.empty() && text.back() != '\n') return fail(0, "text must end with a newline");
    while (pos < text.size()) {
      const std::size_t eol = text.find('\n', pos);
      const std::string_view line = text.substr(pos, eol - pos);
      pos = eol + 1;
      ++line_no;
      if (line.empty()) continue;
      if (line[0] == '#') {
        const bool is_help = line.starts_with("# HELP ");
        const bool is_type = line.starts_with("# TYPE ");
        if (!is_help && !is_type) continue;  // a comment
        std::string_view rest = line.substr(7);
        const std::size_t sp = rest.find(' ');
        const std::string name(rest.substr(0, sp));
        if (!valid_metric_name(name)) return fail(line_no, "bad metric name in HELP/TYPE: " + name);
        if (sp == std::string_view::npos) return fail(line_no, "HELP/TYPE without text");
        const std::string_view arg = rest.substr(sp + 1);
        if (!switch_family(name, current_family, finished_families)) {
          return fail(line_no, "family " + name + " appears in two places");
        }
        if (is_type) {
          if (doc.types.count(name) != 0) return fail(line_no, "second TYPE for " + name);
          if (arg != "counter" && arg != "gauge" && arg != "histogram" && arg != "summary" && arg != "untyped") {
            return fail(line_no, "unknown type " + std::string(arg));
          }
          for (const auto& s : doc.samples) {
            if (family_of(s.name, doc) == name) return fail(line_no, "TYPE after samples of " + name);
          }
          doc.types[name] = std::string(arg);
        } else {
          if (!helped.insert(name).second) return fail(line_no, "second HELP for " + name);
        }
        continue;
      }
      prom_sample s;
      std::string why;
      if (!parse_sample(line, s, why)) return fail(line_no, why);
      const std::string family = family_of(s.name, doc);
      if (family.empty()) return fail(line_no, "sample " + s.name + " has no TYPE");
      if (!switch_family(family, current_family, finished_families)) {
        return fail(line_no, "family " + family + " appears in two places");
      }
      if (doc.types[family] == "counter" && !family.ends_with("_total")) {
        return fail(line_no, "counter " + family + " does not end in _total");
      }
      // Label names the format reserves (promtool check metrics rejects both).
      if (s.labels.count("quantile") != 0 && doc.types[family] != "summary") {
        return fail(line_no, family + ": a quantile label outside a summary");
      }
      if (s.labels.count("le") != 0 && doc.types[family] != "histogram") {
        return fail(line_no, family + ": an le label outside a histogram");
      }
      // One series per name and label set: a server keeps one of two (the
      // other value is lost); promtool does not check it.
      if (!series.emplace(s.name, s.labels).second) {
        return fail(line_no, "series " + s.name + " written twice with the same labels");
      }
      doc.samples.push_back(std::move(s));
    }
    if (!check_histograms(doc)) return std::nullopt;
    return doc;
  }
  [[nodiscard]] const std::string& error() const { return error_; }

  static bool valid_metric_name(std::string_view n) {
    if (n.empty()) return false;
    for (std::size_t i = 0; i < n.size(); ++i) {
      const char c = n[i];
      const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
      if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
  }
  static bool valid_label_name(std::string_view n) {
    if (n.empty()) return false;
    for (std::size_t i = 0; i < n.size(); ++i) {
      const char c = n[i];
      const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
  }

 private:
  std::nullopt_t fail(std::size_t line, std::string why) {
    error_ = "line " + std::to_string(line) + ": " + why;
    return std::nullopt;
  }

  bool set_error(std::string why) {
    error_ = std::move(why);
    return false;
  }

  static bool switch_family(const std::string& family, std::string& current, std::set<std::string>& finished) {
    if (family == current) return true;
    if (finished.count(family) != 0) return false;
    if (!current.empty()) finished.insert(current);
    current = family;
    return true;
  }

  static std::string family_of(const std::string& name, const prom_document& doc) {
    if (doc.types.count(name) != 0) return name;
    for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (name.size() > suffix.size() && name.ends_with(suffix)) {
        const std::string base = name.substr(0, name.size() - suffix.size());
        const auto it = doc.types.find(base);
        if (it == doc.types.end()) continue;
        if (it->second == "histogram" || (it->second == "summary" && suffix != "_bucket")) return base;
      }
    }
    return {};
  }

  static bool parse_value(std::string_view t, double& out) {
    if (t == "NaN") {
      out = std::nan("");
      return true;
    }
    if (t == "+Inf" || t == "Inf") {
      out = INFINITY;
      return true;
    }
    if (t == "-Inf") {
      out = -INFINITY;
      return true;
    }
    if (t.empty()) return false;
    const std::string s(t);
    char* end = nullptr;
    errno = 0;
    out = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || errno != 0) return false;
    // strtod accepts "inf", "nan", hex floats: the format does not.
    return std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
    });
  }

  static bool parse_sample(std::string_view line, prom_sample& s, std::string& why) {
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = std::string(line.substr(0, i));
    if (!valid_metric_name(s.name)) {
      why = "bad metric name '" + s.name + "'";
      return false;
    }
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        std::size_t eq = line.find('=', i);
        if (eq == std::string_view::npos) {
          why = "label without '='";
          return false;
        }
        const std::string lname(line.substr(i, eq - i));
        if (!valid_label_name(lname)) {
          why = "bad label name '" + lname + "'";
          return false;
        }
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') {
          why = "label value not quoted";
          return false;
        }
        ++i;
        std::string lvalue;
        bool closed = false;
        while (i < line.size()) {
          const char c = line[i++];
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\') {
            if (i >= line.size()) break;
            const char e = line[i++];
            if (e == '\\') {
              lvalue.push_back('\\');
            } else if (e == '"') {
              lvalue.push_back('"');
            } else if (e == 'n') {
              lvalue.push_back('\n');
            } else {
              why = "bad escape in label value";
              return false;
            }
            continue;
          }
          lvalue.push_back(c);
        }
        if (!closed) {
          why = "unterminated label value";
          return false;
        }
        if (!s.labels.emplace(lname, lvalue).second) {
          why = "duplicate label " + lname;
          return false;
        }
        if (i < line.size() && line[i] == ',') {
          ++i;
        } else if (i >= line.size() || line[i] != '}') {
          why = "expected ',' or '}' after a label";
          return false;
        }
      }
    }
    if (i >= line.size() || line[i] != ' ') {
      why = "missing value";
      return false;
    }
    std::string_view rest = line.substr(i + 1);
    const std::size_t sp = rest.find(' ');
    if (!parse_value(rest.substr(0, sp), s.value)) {
      why = "bad value '" + std::string(rest.substr(0, sp)) + "'";
      return false;
    }
    if (sp != std::string_view::npos) {
      // An optional integer timestamp (ms).
      const std::string_view ts = rest.substr(sp + 1);
      if (ts.empty() || !std::all_of(ts.begin(), ts.end(), [](char c) { return (c >= '0' && c <= '9') || c == '-'; })) {
        why = "bad timestamp";
        return false;
      }
    }
    return true;
  }

  bool check_histograms(const prom_document& doc) {
    for (const auto& [family, type] : doc.types) {
      if (type != "histogram") continue;
      // Group by the labels other than `le`.
      std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
      std::map<std::map<std::string, std::string>, double> counts;
      for (const auto& s : doc.samples) {
        if (s.name == family + "_bucket") {
          auto labels = s.labels;
          const auto le = labels.find("le");
          if (le == labels.end()) return set_error(family + "_bucket without le");
          double bound = 0;
          if (!parse_value(le->second, bound)) return set_error("bad le " + le->second);
          labels.erase(le);
          buckets[labels].emplace_back(bound, s.value);
        } else if (s.name == family + "_count") {
          counts[s.labels] = s.value;
        }
      }
      for (const auto& [labels, list] : buckets) {
        for (std::size_t k = 1; k < list.size(); ++k) {
          if (!(list[k].first > list[k - 1].first)) return set_error(family + ": le not ascending");
          if (list[k].second < list[k - 1].second) return set_error(family + ": buckets decrease");
        }
        if (list.empty() || !std::isinf(list.back().first)) return set_error(family + ": no +Inf");
        const auto c = counts.find(labels);
        if (c == counts.end()) return set_error(family + ": no _count");
        if (c->second != list.back().second) return set_error(family + ": +Inf != _count");
      }
    }
    return true;
  }

  std::string error_;
};

}  // namespace thread_system::monitoring::test
