# Install rules: the libraries and headers, the CMake package
# (find_package(thread_system CONFIG COMPONENTS ...)) and the pkg-config
# files. Everything is installed in install components - `core`, and one per
# optional component (`monitoring`, `logger`) - so `cmake --install
# --component` and CPack (packaging.cmake) can install or package each on
# its own.
include(CMakePackageConfigHelpers)

set(THREAD_SYSTEM_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/thread_system")
set(THREAD_SYSTEM_PKGCONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")

# The `prefix`-relative spelling of an install directory for a .pc file:
# "${prefix}/lib/x86_64-linux-gnu", or the directory itself when absolute.
function(thread_system_pc_dir out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

# Installs <name>.pc into <libdir>/pkgconfig in install component
# `component`. The file is written at install time so that `prefix=` names
# the prefix actually installed to (`cmake --install --prefix`, DESTDIR and
# CPack all work). REQUIRES: pkg-config packages this one needs; LIBS: its
# own -l flags.
function(thread_system_install_pkgconfig name component)
  cmake_parse_arguments(ARG "" "DESCRIPTION" "REQUIRES;LIBS" ${ARGN})
  thread_system_pc_dir(pc_libdir "${CMAKE_INSTALL_LIBDIR}")
  thread_system_pc_dir(pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
  list(JOIN ARG_REQUIRES ", " pc_requires)
  if(pc_requires)
    set(pc_requires "Requires: ${pc_requires}\n")
  endif()
  list(JOIN ARG_LIBS " " pc_libs)
  # Flags the installed headers need in every translation unit.
  set(pc_cflags "-I\${includedir}")
  if(THREAD_SYSTEM_CHAOS)
    string(APPEND pc_cflags " -DTHREAD_SYSTEM_CHAOS=1")
  endif()
  set(template "${PROJECT_SOURCE_DIR}/cmake/thread_system.pc.in")
  set(generated "${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc")
  install(CODE "
    set(PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    set(PC_LIBDIR [==[${pc_libdir}]==])
    set(PC_INCLUDEDIR [==[${pc_includedir}]==])
    set(PC_NAME [==[${name}]==])
    set(PC_DESCRIPTION [==[${ARG_DESCRIPTION}]==])
    set(PC_VERSION [==[${PROJECT_VERSION}]==])
    set(PC_REQUIRES [==[${pc_requires}]==])
    set(PC_CFLAGS [==[${pc_cflags}]==])
    set(PC_LIBS [==[${pc_libs}]==])
    configure_file([==[${template}]==] [==[${generated}]==] @ONLY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${THREAD_SYSTEM_PKGCONFIG_DIR}\"
         TYPE FILE FILES [==[${generated}]==])
    " COMPONENT ${component})
endfunction()

# The core library.
install(TARGETS thread_system
  EXPORT thread_system-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT core
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT core NAMELINK_COMPONENT core
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT core
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/thread_system DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT core)
install(EXPORT thread_system-targets
  FILE thread_system-targets.cmake
  NAMESPACE thread_system::
  DESTINATION ${THREAD_SYSTEM_CMAKE_DIR}
  COMPONENT core)

configure_package_config_file(cmake/thread_system-config.cmake.in
  "${PROJECT_BINARY_DIR}/thread_system-config.cmake"
  INSTALL_DESTINATION ${THREAD_SYSTEM_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/thread_system-config-version.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/thread_system-config.cmake"
  "${PROJECT_BINARY_DIR}/thread_system-config-version.cmake"
  DESTINATION ${THREAD_SYSTEM_CMAKE_DIR}
  COMPONENT core)

# The core's pkg-config file. -pthread in Libs, not Libs.private: the library
# is static by default, and a plain `pkg-config --libs` must link it.
thread_system_install_pkgconfig(thread_system core
  DESCRIPTION "${PROJECT_DESCRIPTION}"
  LIBS -L\${libdir} -lthread_system -pthread)

# Optional components (thread_system::monitoring, thread_system::logger):
# each its own export set, install component and pkg-config file
# (thread_system-<component>.pc), so the core package never depends on
# {fmt}. The package config includes a component's targets when they were
# installed. PKGCONFIG_REQUIRES: pkg-config packages the component needs
# besides thread_system itself.
function(thread_system_install_component target component)
  cmake_parse_arguments(ARG "" "DESCRIPTION" "PKGCONFIG_REQUIRES" ${ARGN})
  install(TARGETS ${target}
    EXPORT thread_system-${component}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${component}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${component} NAMELINK_COMPONENT ${component}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${component}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY include/thread_system DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT ${component})
  install(EXPORT thread_system-${component}-targets
    FILE thread_system-${component}-targets.cmake
    NAMESPACE thread_system::
    DESTINATION ${THREAD_SYSTEM_CMAKE_DIR}
    COMPONENT ${component})
  if(NOT ARG_DESCRIPTION)
    set(ARG_DESCRIPTION "Thread System ${component} component")
  endif()
  get_target_property(output_name ${target} OUTPUT_NAME)
  if(NOT output_name)
    set(output_name ${target})
  endif()
  thread_system_install_pkgconfig(thread_system-${component} ${component}
    DESCRIPTION "${ARG_DESCRIPTION}"
    REQUIRES "thread_system = ${PROJECT_VERSION}" ${ARG_PKGCONFIG_REQUIRES}
    LIBS -L\${libdir} -l${output_name})
  set_property(GLOBAL APPEND PROPERTY THREAD_SYSTEM_INSTALLED_COMPONENTS ${component})
endfunction()
