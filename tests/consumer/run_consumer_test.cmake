# The consumer tests' driver (cmake -P), one MODE per test:
#
#   install            installs the already-built BUILD_DIR into WORK_DIR/prefix
#                      (everything) and WORK_DIR/prefix-core (install
#                      component `core` only); the other modes use these.
#   find_package       configures, builds and runs tests/consumer against
#                      WORK_DIR/prefix, requiring COMPONENTS (comma-separated).
#   missing_component  find_package(... REQUIRED COMPONENTS ...) must fail,
#                      naming the component and why: `monitoring` against
#                      the core-only prefix, `no_such_component` against the
#                      full one.
#   add_subdirectory   configures, builds and runs tests/consumer/subdirectory,
#                      which add_subdirectory()s SOURCE_DIR.
#
# GENERATOR, MAKE_PROGRAM, CXX_COMPILER, BUILD_TYPE, CXX_FLAGS and LINKER_FLAGS are the build's own,
# so sanitizer builds link.
set(prefix "${WORK_DIR}/prefix")
set(prefix_core "${WORK_DIR}/prefix-core")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
endfunction()

# Configures `source` into `build` with the build's compiler and flags;
# extra cache entries in ARGN. Sets `rc` and `output` in the caller, and
# `flat`: the output with every run of white space as one space (CMake wraps
# long messages).
macro(configure source build)
  file(REMOVE_RECURSE "${build}")
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${source}" -B "${build}" -G "${GENERATOR}"
                          "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
                          "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}" ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE output)
  string(REGEX REPLACE "[ \t\r\n]+" " " flat "${output}")
endmacro()

# A package search that sees only the prefix it is given: no system or
# user package locations, so an installed system package cannot answer.
set(isolated "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF -DCMAKE_FIND_USE_SYSTEM_ENVIRONMENT_PATH=OFF
             -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${prefix}" "${prefix_core}")
  run("installing into ${prefix}" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
  run("installing component core into ${prefix_core}"
      "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix_core}" --component core)
  if(EXISTS "${prefix_core}/${LIBDIR}/cmake/thread_system/thread_system-monitoring-targets.cmake")
    message(FATAL_ERROR "--component core installed the monitoring component too")
  endif()

elseif(MODE STREQUAL "find_package")
  set(build "${WORK_DIR}/find_package")
  # System locations stay searchable: the logger component finds {fmt} there.
  configure("${SOURCE_DIR}/tests/consumer" "${build}" "-DCMAKE_PREFIX_PATH=${prefix}"
            "-DCONSUMER_COMPONENTS=${COMPONENTS}")
  message("${output}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring the consumer (COMPONENTS ${COMPONENTS}) against ${prefix} failed (${rc})")
  endif()
  string(FIND "${output}" " from ${prefix}/" found_at)
  if(found_at EQUAL -1)
    message(FATAL_ERROR "the consumer found thread_system somewhere else than ${prefix}")
  endif()
  run("building the consumer" "${CMAKE_COMMAND}" --build "${build}")
  run("the consumer program" "${build}/consumer")

elseif(MODE STREQUAL "missing_component")
  configure("${SOURCE_DIR}/tests/consumer" "${WORK_DIR}/missing_monitoring" "-DCMAKE_PREFIX_PATH=${prefix_core}"
            "-DCONSUMER_COMPONENTS=monitoring" ${isolated})
  if(rc EQUAL 0)
    message(FATAL_ERROR "COMPONENTS monitoring was accepted from a prefix without it:\n${output}")
  endif()
  if(NOT flat MATCHES "component 'monitoring' is not installed")
    message(FATAL_ERROR "the failure does not say which component is missing:\n${output}")
  endif()
  configure("${SOURCE_DIR}/tests/consumer" "${WORK_DIR}/missing_unknown" "-DCMAKE_PREFIX_PATH=${prefix}"
            "-DCONSUMER_COMPONENTS=monitoring,no_such_component" ${isolated})
  if(rc EQUAL 0)
    message(FATAL_ERROR "an unknown component was accepted:\n${output}")
  endif()
  if(NOT flat MATCHES "component 'no_such_component' is unknown")
    message(FATAL_ERROR "the failure does not name the unknown component:\n${output}")
  endif()
  # The same prefix without the bad component is accepted: the failures
  # above are the components' doing, not the isolation's.
  configure("${SOURCE_DIR}/tests/consumer" "${WORK_DIR}/missing_control" "-DCMAKE_PREFIX_PATH=${prefix}"
            "-DCONSUMER_COMPONENTS=monitoring" ${isolated})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "COMPONENTS monitoring against the full prefix failed:\n${output}")
  endif()

elseif(MODE STREQUAL "add_subdirectory")
  set(build "${WORK_DIR}/add_subdirectory")
  configure("${SOURCE_DIR}/tests/consumer/subdirectory" "${build}" "-DTHREAD_SYSTEM_SOURCE_DIR=${SOURCE_DIR}"
            -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON)
  message("${output}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring the outer project failed (${rc})")
  endif()
  run("building the outer project" "${CMAKE_COMMAND}" --build "${build}")
  run("the outer project's program" "${build}/consumer")

else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
