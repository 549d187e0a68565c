// Prints the Prometheus exposition of one scenario of
// exposition_scenarios.hpp, for `promtool check metrics`
// (monitoring/tests/promtool_check.sh, ctest monitoring.promtool.*).
//
//   thread_system_monitoring_exposition busy|typed|several
#include <cstdio>
#include <exception>
#include <string>

#include "exposition_scenarios.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s busy|typed|several\n", argv[0]);
    return 2;
  }
  try {
    const std::string text = thread_system::monitoring::test::exposition(argv[1]);
    if (text.empty()) {
      std::fprintf(stderr, "unknown scenario '%s' (busy, typed, several)\n", argv[1]);
      return 2;
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scenario '%s' failed: %s\n", argv[1], e.what());
    return 1;
  }
}
