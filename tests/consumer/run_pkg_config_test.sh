#!/bin/sh
# consumer.pkg_config: compiles tests/consumer/main.cpp with nothing but the
# compiler and pkg-config against the scratch install prefix that
# consumer.install made, then runs it: once with the core (thread_system),
# once with the optional components (thread_system-<component>).
#
#   run_pkg_config_test.sh PREFIX LIBDIR WORK_DIR SOURCE_DIR CXX "CXXFLAGS" "LDFLAGS" [COMPONENT...]
#
# CXX, CXXFLAGS and LDFLAGS are the build's own (sanitizer builds must link
# the same runtime). C++20 is the consumer's choice, as with any compiler
# flag; the .pc files carry only what the headers and libraries need.
set -eu
prefix=$1 libdir=$2 work=$3 src=$4 cxx=$5 cxxflags=$6 ldflags=$7
shift 7

PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
mkdir -p "$work"

# The .pc files describe the scratch prefix, not where they were configured.
got=$(pkg-config --variable=prefix thread_system)
if [ "$got" != "$prefix" ]; then
  echo "thread_system.pc says prefix=$got, installed into $prefix" >&2
  exit 1
fi

build_and_run() {
  name=$1
  shift
  # The plain command a user would type (word splitting intended).
  # shellcheck disable=SC2086,SC2046
  set -x
  "$cxx" $cxxflags -std=c++20 "$@" -o "$work/$name" "$src/tests/consumer/main.cpp" \
    $(pkg-config --cflags --libs $packages) $ldflags
  "$work/$name"
  set +x
}

packages=thread_system
build_and_run core

if [ $# -gt 0 ]; then
  packages=
  defines=
  for component in "$@"; do
    packages="$packages thread_system-$component"
    defines="$defines -DCONSUMER_HAS_$(echo "$component" | tr '[:lower:]' '[:upper:]')=1"
  done
  pkg-config --print-requires $packages
  # shellcheck disable=SC2086
  build_and_run components $defines
fi
echo "consumer.pkg_config: passed"
