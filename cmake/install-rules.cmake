include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(THREAD_SYSTEM_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/thread_system")

install(TARGETS thread_system
  EXPORT thread_system-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/thread_system DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT thread_system-targets
  FILE thread_system-targets.cmake
  NAMESPACE thread_system::
  DESTINATION ${THREAD_SYSTEM_CMAKE_DIR})

configure_package_config_file(cmake/thread_system-config.cmake.in
  "${PROJECT_BINARY_DIR}/thread_system-config.cmake"
  INSTALL_DESTINATION ${THREAD_SYSTEM_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/thread_system-config-version.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/thread_system-config.cmake"
  "${PROJECT_BINARY_DIR}/thread_system-config-version.cmake"
  DESTINATION ${THREAD_SYSTEM_CMAKE_DIR})

# Optional components (thread_system::monitoring, thread_system::logger):
# each its own export set, so the core package never depends on {fmt}. The
# package config includes a component's targets when they were installed.
function(thread_system_install_component target component)
  install(TARGETS ${target}
    EXPORT thread_system-${component}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY include/thread_system DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT thread_system-${component}-targets
    FILE thread_system-${component}-targets.cmake
    NAMESPACE thread_system::
    DESTINATION ${THREAD_SYSTEM_CMAKE_DIR})
endfunction()
