#!/usr/bin/env bash
# A/B of two commits: builds BASE and HEAD into separate build trees, runs
# their Google Benchmark binaries in interleaved rounds and prints, per
# benchmark, the median over rounds of the per-round ratio HEAD/BASE, oriented
# so that > 1 means HEAD is better, with the min-max of the per-round ratios.
#
# Usage: scripts/compare-commits.sh BASE [HEAD] [options]
#   BASE, HEAD       any commit-ish; HEAD defaults to the checkout's HEAD (a
#                    commit: uncommitted changes are not measured)
#   --rounds N       interleaved rounds (default 7). Round r runs every binary
#                    of both commits: BASE then HEAD when r is odd, HEAD then
#                    BASE when r is even, so neither side always goes first.
#   --filter REGEX   benchmark filter (Google Benchmark regex) for every binary;
#   --filter NAME=REGEX  for one binary (repeatable; wins over the global one)
#   --binaries LIST  comma-separated binaries: short names (core, queue(s),
#                    report, logger, typed, control, monitoring) or target
#                    names; default: every Google Benchmark binary that both
#                    commits have
#   --min-time S     --benchmark_min_time per benchmark, seconds (default 0.1)
#   --threshold R    flag every benchmark whose median ratio is below R (default 0.97)
#   --control-row A=B (repeatable) for every benchmark whose name contains A and
#                    whose name with A replaced by B was run too (B: a row to
#                    measure against, best one whose code did not change; e.g.
#                    adaptive_job_queue=job_queue),
#                    also print the ratio against that control: per round,
#                    (HEAD row / HEAD control) / (BASE row / BASE control), so a
#                    phase of the host that slows both rows of one run cancels
#                    out; median and min-max over rounds, as for the main ratio
#   --counter NAME   (repeatable) also compare the user counter NAME (e.g. p99_ns,
#                    p999_ns, ns_per_record) of every benchmark that reports it
#                    in both commits, one row per benchmark and counter, its
#                    metric column naming the counter: a counter whose name
#                    ends in _per_s or _per_second is a rate (HEAD/BASE), any
#                    other one a cost such as a latency (BASE/HEAD), so > 1 is
#                    HEAD better either way. A benchmark's main row (items/s
#                    or real time) is always printed.
#   --out FILE       also write the table as Markdown (for docs/PERFORMANCE.md)
#   --jobs N         build parallelism (default 2)
#   --build-root DIR scratch directory (default build/ab)
#
# What it does:
#   1. `git archive` of each commit into DIR/<sha>/src (once per commit),
#      configured into DIR/<sha>/build-aligned with the bench preset's settings
#      (Ninja, Release, tests off, benchmarks on; examples off, as they are
#      not measured), and every file's loops aligned to 64 bytes - the
#      library's too, where the report's build aligns only the benchmark
#      programs (below): figures of an A/B are of that build, its ratios
#      between the commits are what it reports. The same settings for both
#      commits, whatever their own CMakePresets.json says. Trees are reused:
#      a second comparison of the same commit rebuilds nothing, unless the
#      settings (these, the compiler, CXXFLAGS) changed: then it is
#      configured again.
#   2. Finds the benchmark executables of each tree (Ninja targets whose name
#      contains "benchmark"), builds those selected, keeps the ones that answer
#      --benchmark_list_tests (Google Benchmark binaries). Binaries with the
#      same target name are paired; a binary only one commit has is listed,
#      not compared.
#   3. Runs the rounds. Each run: one process, --benchmark_repetitions=1,
#      the JSON written with --benchmark_out (stdout may carry a binary's own
#      console output), under DIR/runs/<date>/<side>/<binary>/round-N.json.
#   4. scripts/compare-commits-stats.py reads the per-run entries (aggregates
#      ignored; several entries of one benchmark in one run, e.g. a binary's
#      own rounds, give their median) and prints the table: items_per_second
#      when the benchmark reports it (HEAD/BASE), else real time (BASE/HEAD).
#      Benchmarks that exist in only one commit, or that reported errors, are
#      listed under the table.
#
# Google Benchmark here is Debian bookworm's 1.7.1: --benchmark_min_time takes
# plain seconds ("0.1"); 1.8 and later want "0.1s". The script probes which
# one the binaries accept.
#
# The peer-report binary's memory and idle-CPU benchmarks (memory_per_worker/,
# idle_cpu/, queued_bytes/) want a process each, as scripts/report.py runs
# them: compare those with a --filter that selects one at a time.
#
# Environment: OMP_WAIT_POLICY defaults to passive and THREAD_SYSTEM_REPORT_MODE
# to quick (as scripts/report.py's shared runs). Builds run under `nice -n 10`
# (AB_BUILD_NICE to change); the benchmarks at the caller's priority.
# Compare on a quiet machine: anything else running adds noise to both sides.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

die() {
  echo "compare-commits: $*" >&2
  exit 1
}

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

base_ref="" head_ref=""
rounds=7 min_time=0.1 threshold=0.97 out="" jobs=2 build_root="build/ab" binaries_arg=""
filters=()
controls=()
counters=()
while (($#)); do
  case "$1" in
    -h | --help) usage 0 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --rounds=*) rounds=${1#*=}; shift ;;
    --filter) filters+=("${2?--filter needs a value}"); shift 2 ;;
    --filter=*) filters+=("${1#*=}"); shift ;;
    --binaries) binaries_arg=${2:?--binaries needs a value}; shift 2 ;;
    --binaries=*) binaries_arg=${1#*=}; shift ;;
    --min-time) min_time=${2:?--min-time needs a value}; shift 2 ;;
    --min-time=*) min_time=${1#*=}; shift ;;
    --threshold) threshold=${2:?--threshold needs a value}; shift 2 ;;
    --threshold=*) threshold=${1#*=}; shift ;;
    --control-row) controls+=("${2:?--control-row needs A=B}"); shift 2 ;;
    --control-row=*) controls+=("${1#*=}"); shift ;;
    --counter) counters+=("${2:?--counter needs a name}"); shift 2 ;;
    --counter=*) counters+=("${1#*=}"); shift ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
    --jobs=*) jobs=${1#*=}; shift ;;
    --build-root) build_root=${2:?--build-root needs a value}; shift 2 ;;
    --build-root=*) build_root=${1#*=}; shift ;;
    -*) echo "compare-commits: unknown option $1" >&2; usage 2 ;;
    *)
      if [[ -z $base_ref ]]; then base_ref=$1
      elif [[ -z $head_ref ]]; then head_ref=$1
      else echo "compare-commits: too many commits: $1" >&2; usage 2
      fi
      shift ;;
  esac
done
[[ -n $base_ref ]] || usage 2
head_ref=${head_ref:-HEAD}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive integer, not '$rounds'"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs wants a positive integer, not '$jobs'"
[[ $min_time =~ ^[0-9]*\.?[0-9]+$ ]] || die "--min-time wants seconds (e.g. 0.1), not '$min_time'"
[[ $threshold =~ ^[0-9]*\.?[0-9]+$ ]] || die "--threshold wants a number (e.g. 0.97), not '$threshold'"
for c in "${controls[@]}"; do
  [[ $c == ?*=?* ]] || die "--control-row wants A=B (two parts of benchmark names), not '$c'"
done
for c in "${counters[@]}"; do
  [[ $c =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "--counter wants a counter's name (e.g. p99_ns), not '$c'"
done
command -v cmake >/dev/null || die "cmake not found"
command -v ninja >/dev/null || die "ninja not found (apt-get install ninja-build)"

resolve() {
  git rev-parse --verify --quiet "$1^{commit}" || die "not a commit: $1"
}
base_sha=$(resolve "$base_ref")
head_sha=$(resolve "$head_ref")
[[ $base_sha != "$head_sha" ]] || echo "compare-commits: note: BASE and HEAD are the same commit ($base_sha): an A/A run" >&2
[[ $build_root = /* ]] || build_root="$root/$build_root"
mkdir -p "$build_root"
nice_build=(nice -n "${AB_BUILD_NICE:-10}")

export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export THREAD_SYSTEM_REPORT_MODE=${THREAD_SYSTEM_REPORT_MODE:-quick}

# --- 1. source trees and configuration ------------------------------------
# Both commits' code with every loop head on a 64-byte boundary, in every
# file: a tight loop that straddles two cache lines can run 10-20% slower,
# so without it a change anywhere in a binary could move an unchanged loop
# (a peer's, or the library's) and read as a gain or loss (docs/PERFORMANCE.md,
# *parallel_for (#20): the caller takes part*). benchmarks/CMakeLists.txt
# aligns the benchmark programs of every build (the report's) but not the
# library, which an A/B must hold still too. Trees configured before this
# setting are in DIR/<sha>/build and are not reused (the configured trees
# are in build-aligned).
align_loops="-falign-loops=64"
prepare() { # sha -> configured tree DIR/<sha>
  local sha=$1 tree="$build_root/$1"
  if [[ ! -f $tree/src/.ab-complete ]]; then
    rm -rf "$tree/src"
    mkdir -p "$tree/src"
    git archive --format=tar "$sha" | tar -x -C "$tree/src"
    touch "$tree/src/.ab-complete"
  fi
  # What the tree was configured with: a tree configured otherwise (another
  # compiler, other flags) is configured again, never reused silently.
  local settings
  settings="Release|$align_loops|tests=OFF|benchmarks=ON|examples=OFF|CXX=${CXX:-}|CXXFLAGS=${CXXFLAGS:-}|$(command -v "${CXX:-c++}" 2>/dev/null)"
  if [[ -f $tree/build-aligned/build.ninja && "$(cat "$tree/build-aligned/.ab-settings" 2>/dev/null)" != "$settings" ]]; then
    echo "== ${sha:0:12}: configured with other settings; configuring again" >&2
    rm -rf "$tree/build-aligned"
  fi
  if [[ ! -f $tree/build-aligned/build.ninja ]]; then
    echo "== configuring ${sha:0:12}" >&2
    "${nice_build[@]}" cmake -S "$tree/src" -B "$tree/build-aligned" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_CXX_FLAGS=$align_loops" \
      -DTHREAD_SYSTEM_BUILD_TESTS=OFF \
      -DTHREAD_SYSTEM_BUILD_BENCHMARKS=ON \
      -DTHREAD_SYSTEM_BUILD_EXAMPLES=OFF >"$tree/configure.log" 2>&1 ||
      die "configuring ${sha:0:12} failed: see $tree/configure.log"
    printf '%s' "$settings" >"$tree/build-aligned/.ab-settings"
  fi
}

# "target path" for every benchmark executable of a configured tree.
benchmark_targets() {
  ninja -C "$1" -t targets all |
    sed -n 's/^\([^:]*\): CXX_EXECUTABLE_LINKER__\(.*\)_[A-Za-z]*$/\2 \1/p' |
    awk '$1 ~ /benchmark/' | sort -u
}

short_name() { # target -> short name: thread_system_queue_benchmarks -> queue, thread_system_benchmarks -> core
  local s=${1#thread_system_}
  s=${s%benchmarks}
  s=${s%_}
  echo "${s:-core}"
}

prepare "$base_sha"
prepare "$head_sha"
base_tree="$build_root/$base_sha" head_tree="$build_root/$head_sha"

declare -A base_path=() head_path=()
while read -r t p; do base_path[$t]=$p; done < <(benchmark_targets "$base_tree/build-aligned")
while read -r t p; do head_path[$t]=$p; done < <(benchmark_targets "$head_tree/build-aligned")

# --- 2. which binaries ------------------------------------------------------
both=() only_base=() only_head=()
for t in $(printf '%s\n' "${!base_path[@]}" | sort); do
  if [[ -n ${head_path[$t]:-} ]]; then both+=("$t"); else only_base+=("$t"); fi
done
for t in $(printf '%s\n' "${!head_path[@]}" | sort); do
  [[ -n ${base_path[$t]:-} ]] || only_head+=("$t")
done

matches() { # target name -> 0 if NAME names it
  local t=$1 name=$2 s
  s=$(short_name "$t")
  [[ $name == "$t" || $name == "$s" || $name == "${s}s" ]]
}

selected=()
if [[ -n $binaries_arg ]]; then
  IFS=',' read -r -a wanted <<<"$binaries_arg"
  for name in "${wanted[@]}"; do
    found=""
    for t in "${both[@]}" "${only_base[@]}" "${only_head[@]}"; do
      if matches "$t" "$name"; then found=$t; break; fi
    done
    [[ -n $found ]] || die "no benchmark binary '$name' in either commit (have: $(for t in "${both[@]}"; do printf '%s ' "$(short_name "$t")"; done))"
    if [[ -n ${base_path[$found]:-} && -n ${head_path[$found]:-} ]]; then
      [[ " ${selected[*]} " == *" $found "* ]] || selected+=("$found")
    fi
  done
  # Binaries one commit lacks are reported only when asked for.
  keep_base=() keep_head=()
  for t in "${only_base[@]}"; do for name in "${wanted[@]}"; do matches "$t" "$name" && keep_base+=("$t") && break; done; done
  for t in "${only_head[@]}"; do for name in "${wanted[@]}"; do matches "$t" "$name" && keep_head+=("$t") && break; done; done
  only_base=("${keep_base[@]}") only_head=("${keep_head[@]}")
else
  selected=("${both[@]}")
fi

# Filters: NAME=REGEX for one binary when NAME names a benchmark binary, else
# a global REGEX (the last one given wins).
global_filter=""
declare -A filter_of=()
for f in "${filters[@]}"; do
  name=${f%%=*}
  target=""
  if [[ $f == *=* && $name =~ ^[A-Za-z0-9_]+$ ]]; then
    for t in "${both[@]}" "${only_base[@]}" "${only_head[@]}"; do
      if matches "$t" "$name"; then target=$t; break; fi
    done
  fi
  if [[ -z $target ]]; then
    global_filter=$f
  elif [[ " ${selected[*]} " == *" $target "* ]]; then
    filter_of[$target]=${f#*=}
  else
    echo "compare-commits: --filter $name=...: $target is not compared: filter ignored" >&2
  fi
done
filter_for() { # the binary's filter; "." (everything) when none was given
  local f=${filter_of[$1]:-$global_filter}
  echo "${f:-.}"
}

# --- build ------------------------------------------------------------------
build_failed=()
build() { # tree, targets...
  local tree=$1
  shift
  (($#)) || return 0
  local name=${tree##*/}
  echo "== building ${name:0:12}: $*" >&2
  "${nice_build[@]}" cmake --build "$tree/build-aligned" -j "$jobs" --target "$@" -- -k 0 >"$tree/build.log" 2>&1 ||
    echo "compare-commits: some targets of ${tree##*/} failed to build: see $tree/build.log" >&2
}
build "$base_tree" "${selected[@]}"
build "$head_tree" "${selected[@]}"

# Keep the binaries that both built and that are Google Benchmark binaries.
probe() { "$1" --benchmark_list_tests=true --benchmark_filter='^$' >/dev/null 2>&1; }
runnable=()
for t in "${selected[@]}"; do
  b="$base_tree/build-aligned/${base_path[$t]}" h="$head_tree/build-aligned/${head_path[$t]}"
  if [[ ! -x $b || ! -x $h ]]; then build_failed+=("$t"); continue; fi
  if ! probe "$b" || ! probe "$h"; then
    echo "compare-commits: $t is not a Google Benchmark binary: skipped" >&2
    continue
  fi
  runnable+=("$t")
done
((${#runnable[@]})) || die "nothing to compare (built: none of ${selected[*]:-the selected binaries})"

# --benchmark_min_time: "0.1s" (Google Benchmark >= 1.8) or "0.1" (1.7, Debian bookworm).
min_time_arg() {
  if "$1" --benchmark_list_tests=true --benchmark_filter='^$' "--benchmark_min_time=${min_time}s" >/dev/null 2>&1; then
    echo "--benchmark_min_time=${min_time}s"
  else
    echo "--benchmark_min_time=${min_time}"
  fi
}

# --- 3. interleaved rounds ----------------------------------------------------
run_dir="$build_root/runs/$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$run_dir"
declare -A exe=() mt=() count=()
for t in "${runnable[@]}"; do
  for side in base head; do
    if [[ $side == base ]]; then p="$base_tree/build-aligned/${base_path[$t]}"; else p="$head_tree/build-aligned/${head_path[$t]}"; fi
    exe[$side/$t]=$p
    mt[$side/$t]=$(min_time_arg "$p")
    n=$("$p" --benchmark_list_tests=true "--benchmark_filter=$(filter_for "$t")" 2>/dev/null | grep -c . || true)
    count[$side/$t]=$n
    mkdir -p "$run_dir/$side/$t"
  done
done
matched=()
for t in "${runnable[@]}"; do
  if ((count[base/$t] + count[head/$t] == 0)); then
    echo "compare-commits: no benchmark of $t matches '$(filter_for "$t")': skipped" >&2
  else
    matched+=("$t")
  fi
done
runnable=("${matched[@]}")
((${#runnable[@]})) || die "no benchmark matches the filter in any selected binary"

echo "== ${#runnable[@]} binaries, $rounds rounds; BASE ${base_sha:0:12}, HEAD ${head_sha:0:12}; raw JSON in $run_dir" >&2
started=$SECONDS
failed_rounds=() # "side binary round r" of each run that exited non-zero
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2 == 1)); then order=(base head); else order=(head base); fi
  for t in "${runnable[@]}"; do
    for side in "${order[@]}"; do
      ((count[$side/$t] > 0)) || continue
      json="$run_dir/$side/$t/round-$r.json"
      t0=$SECONDS
      if ! "${exe[$side/$t]}" "--benchmark_filter=$(filter_for "$t")" "${mt[$side/$t]}" \
        --benchmark_repetitions=1 "--benchmark_out=$json" --benchmark_out_format=json \
        >>"$run_dir/$side/$t/console.log" 2>&1; then
        echo "compare-commits: $side $t round $r exited with an error (see $run_dir/$side/$t/console.log)" >&2
        failed_rounds+=("$side $(short_name "$t") round $r")
      fi
      printf '[round %d/%d, %4ds] %-4s %s: %d benchmarks in %ds\n' "$r" "$rounds" $((SECONDS - started)) \
        "$side" "$(short_name "$t")" "${count[$side/$t]}" $((SECONDS - t0)) >&2
    done
  done
done

# --- 4. statistics ------------------------------------------------------------
subject() { # the commit's subject, at most 72 characters
  local s
  s=$(git log -1 --format=%s "$1")
  ((${#s} <= 72)) && echo "$s" || echo "${s:0:71}…"
}
args=(
  --run-dir "$run_dir"
  --base "$base_sha" --base-subject "$(subject "$base_sha")"
  --head "$head_sha" --head-subject "$(subject "$head_sha")"
  --rounds "$rounds" --min-time "$min_time" --threshold "$threshold"
)
for t in "${runnable[@]}"; do args+=(--binary "$t=$(short_name "$t")=$(filter_for "$t")"); done
for t in "${only_base[@]}"; do args+=(--only-base-binary "$t"); done
for t in "${only_head[@]}"; do args+=(--only-head-binary "$t"); done
for t in "${build_failed[@]}"; do args+=(--failed-binary "$t"); done
for c in "${controls[@]}"; do args+=(--control-row "$c"); done
for c in "${counters[@]}"; do args+=(--counter "$c"); done
for f in "${failed_rounds[@]}"; do args+=(--failed-round "$f"); done
[[ -z $out ]] || args+=(--out "$out")
exec python3 "$root/scripts/compare-commits-stats.py" "${args[@]}"
