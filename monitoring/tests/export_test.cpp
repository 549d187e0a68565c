// JSON and Prometheus export: escaping, structure (checked by the strict
// parsers in format_checkers.hpp), and values that match the report.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "format_checkers.hpp"
#include "support/test_support.hpp"
#include "thread_system/monitoring/monitoring.hpp"

namespace thread_system::monitoring {
namespace {

using test::json_parser;
using test::json_value;
using test::prometheus_checker;

// A report with everything filled in, from a scripted collector.
monitor_report scripted_report(std::string pool_name, std::string worker_name, bool with_types) {
  std::uint64_t fake_now = 1'000'000'000;
  monitor_options o;
  o.clock = [&fake_now] { return fake_now; };
  pool_monitor mon(
      [&](pool_metrics& m) {
        m.pool_name = pool_name;
        m.accepted = 1000;
        m.executed = 990;
        m.failed = 12;
        m.cancelled = 3;
        m.queue_depth = 7;
        m.worker_count = 2;
        m.workers.resize(2);
        for (std::size_t i = 0; i < 2; ++i) {
          worker_metrics& w = m.workers[i];
          w.index = i;
          w.name = i == 0 ? worker_name : "w-1";
          w.processed = 495;
          w.busy_time = std::chrono::milliseconds(300);
          w.idle_time = std::chrono::milliseconds(700);
          w.utilisation = 0.3;
          w.busy_since_known = true;
          w.has_latency = true;
          w.wait = {};
          w.run = {};
          latency_histogram h;
          for (std::uint64_t v = 1; v <= 1000; ++v) h.record(v * 1000);
          w.wait = h.snapshot();
          w.run = h.snapshot();
        }
        m.has_latency = true;
        m.wait = {};
        m.run = {};
        for (const auto& w : m.workers) {
          m.wait.merge(w.wait);
          m.run.merge(w.run);
        }
        m.job_types.clear();
        if (with_types) {
          job_type_metrics t;
          t.type_name = "real\"time";
          t.accepted = 10;
          t.executed = 9;
          t.waiting = 1;
          t.has_latency = true;
          latency_histogram h;
          h.record(500);
          h.record(5'000'000);
          t.wait = h.snapshot();
          m.job_types.push_back(t);
        }
      },
      o);
  (void)mon.sample();
  fake_now += 1'000'000'000;
  return mon.sample();
}

// ---- JSON ---------------------------------------------------------------------

TEST(JsonExport, StringEscapingRoundTrips) {
  const std::string inputs[] = {
      "plain",
      "quote\" backslash\\ slash/",
      std::string("controls \b\f\n\r\t \x01 \x1f and nul ") + '\0' + " end",
      "utf-8: \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
  };
  for (const std::string& in : inputs) {
    std::string out;
    append_json_string(out, in);
    json_parser p(out);
    const auto v = p.parse();
    ASSERT_TRUE(v) << p.error() << " in " << out;
    ASSERT_EQ(v->type, json_value::kind::string);
    EXPECT_EQ(v->text, in);
  }
}

TEST(JsonExport, InvalidUtf8BecomesReplacementCharacters) {
  const std::string bad =
      std::string("a\xff") + "b\xc3" + "c\xed\xa0\x80" + "d\xc0\xaf";  // lone, truncated, surrogate, overlong
  std::string out;
  append_json_string(out, bad);
  json_parser p(out);
  const auto v = p.parse();
  ASSERT_TRUE(v) << p.error() << " in " << out;
  EXPECT_EQ(v->text.find('\xff'), std::string::npos);
  EXPECT_NE(v->text.find("\xef\xbf\xbd"), std::string::npos);
  EXPECT_EQ(v->text.front(), 'a');
  EXPECT_EQ(v->text.back(), '\xbd');
}

TEST(JsonExport, WriterPlacesCommasAndMapsNonFiniteToNull) {
  std::string out;
  json_writer w(out);
  w.begin_object();
  w.key("a").value(1);
  w.key("b").begin_array().value(1.5).value(std::numeric_limits<double>::quiet_NaN()).value(-INFINITY).end_array();
  w.key("c").begin_object().end_object();
  w.key("d").value(true);
  w.key("e").value(std::uint64_t{18'446'744'073'709'551'615u});
  w.end_object();
  EXPECT_EQ(out, R"({"a":1,"b":[1.5,null,null],"c":{},"d":true,"e":18446744073709551615})");
  json_parser p(out);
  EXPECT_TRUE(p.parse()) << p.error();
}

TEST(JsonExport, ValidatorRejectsBrokenDocuments) {
  for (const char* broken : {"{", R"({"a":1,})", R"([1 2])", R"({"a":01})", "\"raw\ncontrol\"", R"({"a":1}x)",
                             R"("\x")", "nul", R"({"a":1,"a":2})", R"([1.])"}) {
    json_parser p(broken);
    EXPECT_FALSE(p.parse()) << broken;
  }
}

TEST(JsonExport, ReportParsesAndCarriesTheValues) {
  const monitor_report r = scripted_report("pool \"one\"\n", "worker\\0", true);
  const std::string text = to_json(r);
  json_parser p(text);
  const auto doc = p.parse();
  ASSERT_TRUE(doc) << p.error() << "\n" << text;
  EXPECT_EQ(doc->get("pool")->text, "pool \"one\"\n");
  EXPECT_EQ(doc->at({"counters", "accepted"})->number, 1000);
  EXPECT_EQ(doc->at({"counters", "failed"})->number, 12);
  EXPECT_EQ(doc->at({"queue", "depth"})->number, 7);
  EXPECT_EQ(doc->at({"queue", "peak"})->number, 7);
  EXPECT_DOUBLE_EQ(doc->at({"rates", "window_seconds"})->number, 1.0);
  EXPECT_EQ(doc->at({"latency", "wait", "count"})->number, 2000);
  EXPECT_EQ(doc->at({"latency", "run", "p99_ns"})->number, static_cast<double>(r.run.p99_ns));
  EXPECT_EQ(doc->at({"health", "status"})->text, to_string(r.health.status));
  const json_value* workers = doc->get("workers");
  ASSERT_NE(workers, nullptr);
  ASSERT_EQ(workers->items.size(), 2u);
  EXPECT_EQ(workers->items[0].get("name")->text, "worker\\0");
  EXPECT_EQ(workers->items[1].get("processed")->number, 495);
  const json_value* types = doc->get("job_types");
  ASSERT_EQ(types->items.size(), 1u);
  EXPECT_EQ(types->items[0].get("type")->text, "real\"time");
  EXPECT_EQ(types->items[0].at({"wait", "count"})->number, 2);

  std::ostringstream os;
  write_json(os, r);
  EXPECT_EQ(os.str(), text);

  const std::string several = to_json(std::vector<monitor_report>{r, r});
  json_parser p2(several);
  const auto doc2 = p2.parse();
  ASSERT_TRUE(doc2) << p2.error();
  EXPECT_EQ(doc2->get("pools")->items.size(), 2u);

  const std::string health_text = to_json(r.health);
  json_parser p3(health_text);
  EXPECT_TRUE(p3.parse()) << p3.error();
}

// ---- Prometheus -------------------------------------------------------------------

TEST(PrometheusExport, LabelValuesAreEscaped) {
  std::string out;
  append_prometheus_label_value(out, "a\\b\"c\nd");
  EXPECT_EQ(out, "a\\\\b\\\"c\\nd");
  EXPECT_EQ(format_prometheus_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_prometheus_value(INFINITY), "+Inf");
  EXPECT_EQ(format_prometheus_value(-INFINITY), "-Inf");
  EXPECT_EQ(format_prometheus_value(0.25), "0.25");
}

// An invalid byte in a label value becomes U+FFFD, as in the JSON export
// (it was written raw: the text failed `promtool check metrics`).
TEST(PrometheusExport, InvalidUtf8InALabelValueBecomesReplacementCharacters) {
  std::string out;
  append_prometheus_label_value(out, std::string("bad\xff\xfe") + "name \xc3\xa9");  // two bad bytes, then e-acute
  EXPECT_EQ(out, "bad\xef\xbf\xbd\xef\xbf\xbdname \xc3\xa9");
}

TEST(PrometheusExport, CheckerRejectsBrokenText) {
  const char* broken[] = {
      "x 1\n",                                                                           // no TYPE
      "# TYPE x gauge\nx{a=\"1\" 1\n",                                                   // unterminated labels
      "# TYPE x gauge\nx{1a=\"1\"} 1\n",                                                 // bad label name
      "# TYPE x gauge\nx one\n",                                                         // bad value
      "# TYPE x_total counter\n# TYPE y gauge\ny 1\nx_total 1\n",                        // family split
      "# TYPE c counter\nc 1\n",                                                         // counter without _total
      "# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"+Inf\"} 4\nh_count 4\n",  // decreasing
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 4\nh_count 5\n",  // +Inf != count
      "# TYPE x gauge\nx{a=\"\\t\"} 1\n",                                                // bad escape
      "# TYPE x gauge\nx 1",                                                             // no final newline
      "# TYPE q_seconds gauge\nq_seconds{quantile=\"0.5\"} 1\n",                         // quantile, not summary
      "# TYPE l_seconds gauge\nl_seconds{le=\"1\"} 1\n",                                 // le, not histogram
  };
  for (const char* text : broken) {
    prometheus_checker c;
    EXPECT_FALSE(c.check(text)) << text;
  }
  prometheus_checker ok;
  EXPECT_TRUE(ok.check("# HELP x a gauge\n# TYPE x gauge\nx{a=\"q\\\"\\\\\\n\"} -1.5e-3\nx NaN\n")) << ok.error();
}

TEST(PrometheusExport, ReportIsValidTextWithMatchingValues) {
  const monitor_report r = scripted_report("pool \"one\"\n\\", "worker,=}", true);
  const std::string text = to_prometheus(r);
  prometheus_checker c;
  const auto doc = c.check(text);
  ASSERT_TRUE(doc) << c.error() << "\n" << text;

  const std::map<std::string, std::string> pool{{"pool", "pool \"one\"\n\\"}};
  EXPECT_EQ(doc->types.at("thread_system_pool_jobs_accepted_total"), "counter");
  EXPECT_EQ(doc->value("thread_system_pool_jobs_accepted_total", pool), 1000.0);
  EXPECT_EQ(doc->value("thread_system_pool_jobs_failed_total", pool), 12.0);
  EXPECT_EQ(doc->value("thread_system_pool_queue_depth", pool), 7.0);
  EXPECT_EQ(doc->value("thread_system_pool_health_status", pool), static_cast<double>(r.health.status));
  EXPECT_EQ(doc->types.at("thread_system_pool_job_wait_seconds"), "histogram");
  EXPECT_EQ(doc->value("thread_system_pool_job_wait_seconds_count", pool), 2000.0);
  // 2 x (1..1000 us): 1..255 ns none, <= 1023 ns two (1 us = 1000 ns), <= 4095 ns eight.
  auto le = [&](const char* bound) {
    auto l = pool;
    l["le"] = bound;
    return doc->value("thread_system_pool_job_wait_seconds_bucket", l);
  };
  EXPECT_EQ(le("0.000000255"), 0.0);
  EXPECT_EQ(le("0.000000511"), 0.0);
  EXPECT_EQ(le("0.000001023"), 2.0);
  EXPECT_EQ(le("0.000002047"), 4.0);
  EXPECT_EQ(le("0.000004095"), 8.0);
  // 2^19 - 1 ns = 524.287 us: 524 of each 1..1000 us run; 2^20 - 1 ns: all.
  EXPECT_EQ(le("0.000524287"), 1048.0);
  EXPECT_EQ(le("0.001048575"), 2000.0);
  EXPECT_EQ(le("+Inf"), 2000.0);
  EXPECT_DOUBLE_EQ(*doc->value("thread_system_pool_job_wait_seconds_sum", pool), 2 * 500500e-6);
  // Percentiles come from the buckets on the server; no gauge carries a
  // `quantile` label (Prometheus reserves it for summaries).
  for (const auto& [family, type] : doc->types) {
    EXPECT_EQ(family.find("quantile"), std::string::npos) << family;
  }

  const std::map<std::string, std::string> worker{{"pool", "pool \"one\"\n\\"}, {"worker", "worker,=}"}};
  EXPECT_EQ(doc->value("thread_system_worker_jobs_processed_total", worker), 495.0);
  EXPECT_DOUBLE_EQ(*doc->value("thread_system_worker_busy_seconds_total", worker), 0.3);

  const std::map<std::string, std::string> type{{"pool", "pool \"one\"\n\\"}, {"type", "real\"time"}};
  EXPECT_EQ(doc->value("thread_system_job_type_accepted_total", type), 10.0);
  EXPECT_EQ(doc->value("thread_system_job_type_wait_seconds_count", type), 2.0);

  std::ostringstream os;
  write_prometheus(os, r);
  EXPECT_EQ(os.str(), text);
}

TEST(PrometheusExport, SeveralPoolsShareEachFamilyOnce) {
  const std::vector<monitor_report> reports{scripted_report("a", "a-0", false), scripted_report("b", "b-0", true)};
  const std::string text = to_prometheus(reports);
  prometheus_checker c;
  const auto doc = c.check(text);
  ASSERT_TRUE(doc) << c.error() << "\n" << text;
  EXPECT_EQ(doc->value("thread_system_pool_jobs_executed_total", {{"pool", "a"}}), 990.0);
  EXPECT_EQ(doc->value("thread_system_pool_jobs_executed_total", {{"pool", "b"}}), 990.0);
  std::size_t type_lines = 0;
  for (std::size_t pos = 0; (pos = text.find("# TYPE thread_system_pool_queue_depth ", pos)) != std::string::npos;
       ++pos) {
    ++type_lines;
  }
  EXPECT_EQ(type_lines, 1u);
}

// Pools with one name (every default pool is "thread_pool"), and workers of
// one pool with one name, are each written as a series of their own: the
// later ones labelled name#2, name#3. (Each series was written twice with
// the same labels: one value lost at the server.)
TEST(PrometheusExport, PoolsAndWorkersWithTheSameNameAreDistinctSeries) {
  monitor_report one = scripted_report("p", "w", false);
  monitor_report two = scripted_report("p", "w", true);
  two.metrics.workers.push_back(two.metrics.workers.front());  // a second worker called "w"
  two.metrics.workers.back().processed = 7;
  const std::string text = to_prometheus(std::vector<monitor_report>{one, two, one});
  prometheus_checker c;
  const auto doc = c.check(text);
  ASSERT_TRUE(doc) << c.error() << "\n" << text;
  EXPECT_TRUE(doc->value("thread_system_pool_jobs_executed_total", {{"pool", "p"}}).has_value());
  EXPECT_TRUE(doc->value("thread_system_pool_jobs_executed_total", {{"pool", "p#2"}}).has_value());
  EXPECT_TRUE(doc->value("thread_system_pool_jobs_executed_total", {{"pool", "p#3"}}).has_value());
  EXPECT_EQ(doc->value("thread_system_worker_jobs_processed_total", {{"pool", "p#2"}, {"worker", "w#2"}}), 7.0);
  prometheus_writer w;
  EXPECT_EQ(w.distinct_pool_label("x"), "x");
  EXPECT_EQ(w.distinct_pool_label("x#2"), "x#2");
  EXPECT_EQ(w.distinct_pool_label("x"), "x#3");  // x#2 is taken
}

// Names that differ only in bytes that are not UTF-8 are written alike
// (U+FFFD), so they are the same name: the later one is labelled #2. (They
// were compared raw, both written as "db\uFFFD": duplicate series that fail
// a scrape.)
TEST(PrometheusExport, NamesThatDifferOnlyInInvalidBytesAreDistinctSeries) {
  monitor_report one = scripted_report("db\xff", "w\xc0", false);
  monitor_report two = scripted_report("db\xfe", "w\xc0", true);
  two.metrics.workers.push_back(two.metrics.workers.front());
  two.metrics.workers.back().name = "w\xc1";
  two.metrics.workers.back().processed = 7;
  const std::string text = to_prometheus(std::vector<monitor_report>{one, two});
  prometheus_checker c;
  const auto doc = c.check(text);
  ASSERT_TRUE(doc) << c.error() << "\n" << text;
  EXPECT_TRUE(doc->value("thread_system_pool_jobs_executed_total", {{"pool", "db\xEF\xBF\xBD"}}).has_value());
  EXPECT_TRUE(doc->value("thread_system_pool_jobs_executed_total", {{"pool", "db\xEF\xBF\xBD#2"}}).has_value());
  EXPECT_EQ(doc->value("thread_system_worker_jobs_processed_total",
                       {{"pool", "db\xEF\xBF\xBD#2"}, {"worker", "w\xEF\xBF\xBD#2"}}),
            7.0);
}

TEST(PrometheusExport, LiveHistogramBucketsAreExactCumulativeCounts) {
  latency_histogram h;
  std::vector<std::uint64_t> values;
  for (std::uint64_t v = 1; v < (std::uint64_t{1} << 37); v = v * 3 + 1) values.push_back(v);
  for (auto v : values) h.record(v);
  prometheus_writer w;
  w.histogram("h_seconds", "test", {}, h.snapshot());
  prometheus_checker c;
  const auto doc = c.check(w.str());
  ASSERT_TRUE(doc) << c.error();
  for (std::uint64_t bound : prometheus_writer::histogram_bounds_ns()) {
    const auto expected =
        static_cast<double>(std::count_if(values.begin(), values.end(), [&](auto v) { return v <= bound; }));
    bool found = false;
    for (const auto& s : doc->samples) {
      if (s.name != "h_seconds_bucket" || s.labels.at("le") == "+Inf") continue;
      if (std::llround(std::stod(s.labels.at("le")) * 1e9) == static_cast<long long>(bound)) {
        EXPECT_EQ(s.value, expected) << "le " << bound << " ns";
        found = true;
      }
    }
    EXPECT_TRUE(found) << bound;
  }
}

}  // namespace
}  // namespace thread_system::monitoring
