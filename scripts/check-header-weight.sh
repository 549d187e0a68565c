#!/usr/bin/env bash
# Keeps the pool headers light (docs/PERFORMANCE.md, "Header weight").
#
# Fails when pools/thread_pool.hpp or pools/typed_thread_pool.hpp, compiled
# alone with g++ and libstdc++, includes a header that only some of its users
# need: the rest of <functional> (unordered_map, searchers), <algorithm>,
# <chrono>'s calendar and streams (<sstream>), the timer queue and its thread
# wrapper, or any queue implementation (the pools reach their injector
# through scheduler/injector.hpp). Prints each header's preprocessed lines,
# and oneTBB's <tbb/task_group.h> for comparison when it is installed.
#
#   scripts/check-header-weight.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cxx="${CXX_FOR_HEADER_CHECK:-g++}"
forbidden=(
  '/functional$' '/algorithm$' '/unordered_map$' '/sstream$' '/chrono$'
  'thread_system/scheduler/timer_queue\.hpp$' 'thread_system/detail/os_thread\.hpp$'
  'thread_system/queues/(job_queue|two_lock_job_queue|job_segments|bounded_queue|lockfree_queue|sharded_queue|adaptive_job_queue)\.hpp$'
  'thread_system/detail/hazard_pointers\.hpp$'
)
pattern="$(
  IFS='|'
  echo "${forbidden[*]}"
)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
for header in thread_system/pools/thread_pool.hpp thread_system/pools/typed_thread_pool.hpp; do
  echo "#include <${header}>" >"$tmp/tu.cpp"
  # -H lists every header opened, one per line, on stderr.
  "$cxx" -std=c++20 -fsyntax-only -H -Iinclude "$tmp/tu.cpp" 2>"$tmp/includes.txt"
  lines="$("$cxx" -std=c++20 -E -Iinclude "$tmp/tu.cpp" | wc -l)"
  echo "${header}: ${lines} preprocessed lines"
  if found="$(grep -E '^\.+ ' "$tmp/includes.txt" | sed -E 's/^\.+ //' | grep -E "$pattern" | sort -u)"; then
    echo "  includes what it must not (see the top of this script):"
    echo "$found" | sed 's/^/    /'
    status=1
  fi
done
if echo '#include <tbb/task_group.h>' | "$cxx" -std=c++20 -E -x c++ - >"$tmp/tbb.txt" 2>/dev/null; then
  echo "tbb/task_group.h (for comparison): $(wc -l <"$tmp/tbb.txt") preprocessed lines"
fi
if [ "$status" -eq 0 ]; then echo "header weight: no unwanted include"; fi
exit "$status"
