# CPack: Debian packages built from the install rules, one per install
# component (install-rules.cmake):
#
#   libthread-system-dev             core library, headers, CMake package,
#                                    thread_system.pc
#   libthread-system-monitoring-dev  thread_system::monitoring,
#                                    thread_system-monitoring.pc
#   libthread-system-logger-dev      thread_system::logger,
#                                    thread_system-logger.pc (needs libfmt-dev)
#
# The libraries are static by default, so each package holds a library and
# its headers together (the -dev naming Debian uses for static-only
# libraries). Configure with CMAKE_INSTALL_PREFIX=/usr so that GNUInstallDirs
# picks Debian's multiarch library directory, then run
# `cpack -G DEB` in the build directory (scripts/check-packages.sh does all
# of it).
set(THREAD_SYSTEM_PACKAGE_CONTACT "Thread System maintainers" CACHE STRING
  "Maintainer field of the Debian packages")

set(CPACK_PACKAGE_NAME thread-system)
set(CPACK_PACKAGE_VENDOR "Thread System")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${THREAD_SYSTEM_PACKAGE_CONTACT}")
set(CPACK_RESOURCE_FILE_README "${PROJECT_SOURCE_DIR}/README.md")
# Install with DESTDIR into the staging tree, so that files written at
# install time (the .pc files) see the real prefix (/usr), not the staging
# directory.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")

get_property(thread_system_components GLOBAL PROPERTY THREAD_SYSTEM_INSTALLED_COMPONENTS)
set(CPACK_COMPONENTS_ALL core ${thread_system_components})

set(CPACK_COMPONENT_CORE_DISPLAY_NAME "Thread System")
set(CPACK_COMPONENT_MONITORING_DISPLAY_NAME "Thread System monitoring")
set(CPACK_COMPONENT_MONITORING_DEPENDS core)
set(CPACK_COMPONENT_LOGGER_DISPLAY_NAME "Thread System logger")
set(CPACK_COMPONENT_LOGGER_DEPENDS core)

# Debian.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_CORE_PACKAGE_NAME libthread-system-dev)
set(CPACK_DEBIAN_MONITORING_PACKAGE_NAME libthread-system-monitoring-dev)
set(CPACK_DEBIAN_LOGGER_PACKAGE_NAME libthread-system-logger-dev)
# First line: the package's summary; the rest: its extended description.
# CPackDeb takes the first line as the summary only while
# CPACK_PACKAGE_DESCRIPTION_SUMMARY is CPack's default ("<project> built
# using CMake"), otherwise it prepends that one summary to every package.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_DEBIAN_CORE_DESCRIPTION
  "Thread System: ${PROJECT_DESCRIPTION}
The core library (static), its headers, the CMake package
(find_package(thread_system CONFIG)) and the pkg-config file thread_system.pc.
Needs only C++20 and pthreads.")
set(CPACK_DEBIAN_MONITORING_DESCRIPTION
  "Thread System monitoring component
Pool metrics, latency histograms, health checks, JSON and Prometheus export:
the static library thread_system::monitoring (CMake component `monitoring`),
its headers and thread_system-monitoring.pc.")
set(CPACK_DEBIAN_LOGGER_DESCRIPTION
  "Thread System logger component
An asynchronous logger built on {fmt}: the static library
thread_system::logger (CMake component `logger`), its headers and
thread_system-logger.pc.")
# Component dependencies become exact-version Depends on the core package;
# the logger also needs {fmt}'s headers and library.
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_LOGGER_PACKAGE_DEPENDS "libfmt-dev")
if(BUILD_SHARED_LIBS)
  # Shared libraries: let dpkg-shlibdeps add the run-time Depends.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()

include(CPack)
