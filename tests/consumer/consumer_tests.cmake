# The consumer tests: Thread System used from outside, as a user would.
# Included from the top-level CMakeLists.txt after the optional components,
# so the tests know which components were built. Label `packaging`.
#
#   consumer.install                    installs this build into scratch
#                                       prefixes (fixture for the next three)
#   consumer.find_package_components    find_package(thread_system CONFIG
#                                       REQUIRED COMPONENTS <all built>),
#                                       builds and runs tests/consumer
#   consumer.find_package_missing_component
#                                       a required component that is absent or
#                                       unknown fails the find, saying which
#   consumer.pkg_config                 c++ $(pkg-config --cflags --libs ...)
#   consumer.add_subdirectory           an outer project add_subdirectory()s
#                                       the source tree
# (the last two only with THREAD_SYSTEM_TEST_BUILD_SYSTEM, on by default)
get_property(consumer_components GLOBAL PROPERTY THREAD_SYSTEM_INSTALLED_COMPONENTS)
list(JOIN consumer_components "," consumer_components_csv)
set(consumer_work "${PROJECT_BINARY_DIR}/tests/consumer_work")
set(consumer_driver
  "${CMAKE_COMMAND}"
  -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
  -DBUILD_DIR=${PROJECT_BINARY_DIR}
  -DWORK_DIR=${consumer_work}
  -DLIBDIR=${CMAKE_INSTALL_LIBDIR}
  -DGENERATOR=${CMAKE_GENERATOR}
  -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
  -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
  -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
  "-DCXX_FLAGS=${CMAKE_CXX_FLAGS}"
  "-DLINKER_FLAGS=${CMAKE_EXE_LINKER_FLAGS}"
  "-DCOMPONENTS=${consumer_components_csv}")
set(consumer_script "${PROJECT_SOURCE_DIR}/tests/consumer/run_consumer_test.cmake")

add_test(NAME consumer.install COMMAND ${consumer_driver} -DMODE=install -P ${consumer_script})
set_tests_properties(consumer.install PROPERTIES FIXTURES_SETUP thread_system_installed)

add_test(NAME consumer.find_package_components
  COMMAND ${consumer_driver} -DMODE=find_package -P ${consumer_script})
add_test(NAME consumer.find_package_missing_component
  COMMAND ${consumer_driver} -DMODE=missing_component -P ${consumer_script})
set_tests_properties(consumer.find_package_components consumer.find_package_missing_component
  PROPERTIES FIXTURES_REQUIRED thread_system_installed)

# The two that build again (Thread System itself, or the consumer twice)
# test the build system, which sanitizers and chaos do not change: those
# presets switch them off.
option(THREAD_SYSTEM_TEST_BUILD_SYSTEM "Also test pkg-config and add_subdirectory use (each builds again)" ON)

set(consumer_tests consumer.install consumer.find_package_components consumer.find_package_missing_component)
if(THREAD_SYSTEM_TEST_BUILD_SYSTEM)
  find_program(THREAD_SYSTEM_PKG_CONFIG NAMES pkg-config pkgconf)
  if(THREAD_SYSTEM_PKG_CONFIG)
    add_test(NAME consumer.pkg_config
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/consumer/run_pkg_config_test.sh
        "${consumer_work}/prefix" "${CMAKE_INSTALL_LIBDIR}" "${consumer_work}/pkg_config"
        "${PROJECT_SOURCE_DIR}" "${CMAKE_CXX_COMPILER}" "${CMAKE_CXX_FLAGS}" "${CMAKE_EXE_LINKER_FLAGS}"
        ${consumer_components})
    set_tests_properties(consumer.pkg_config PROPERTIES FIXTURES_REQUIRED thread_system_installed)
    list(APPEND consumer_tests consumer.pkg_config)
  else()
    message(STATUS "pkg-config not found: consumer.pkg_config skipped (apt-get install pkgconf)")
  endif()
  add_test(NAME consumer.add_subdirectory COMMAND ${consumer_driver} -DMODE=add_subdirectory -P ${consumer_script})
  list(APPEND consumer_tests consumer.add_subdirectory)
endif()
set_tests_properties(${consumer_tests} PROPERTIES LABELS packaging TIMEOUT 600)
