# Install: what `cmake --install` (and the Debian package, packaging/) puts where, as any Debian
# library and tool: the command in bin, the library with its SONAME in the (multiarch) libdir,
# the header, a pkg-config file and a CMake package (termsight::termsight), the programs the
# command runs (the demo trainers) in libexec/termsight, the man page and bash completion.
include(CMakePackageConfigHelpers)

install(TARGETS termsight_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS termsight EXPORT termsightTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/termsight/termsight.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/termsight)

# The trainers find the library from libexec/termsight by a relative RPATH, so an install under
# any prefix runs without LD_LIBRARY_PATH.
file(RELATIVE_PATH rel_lib_from_libexec ${CMAKE_INSTALL_FULL_LIBEXECDIR}/termsight
  ${CMAKE_INSTALL_FULL_LIBDIR})
set_target_properties(demo_train mlp_train PROPERTIES
  INSTALL_RPATH "\$ORIGIN/${rel_lib_from_libexec}")
install(TARGETS demo_train mlp_train RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/termsight)

# termsight.torch's native hook, where it was built, beside the library with the note of the
# libtorch it was built against.
if(TARGET termsight_torch)
  install(TARGETS termsight_torch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_BINARY_DIR}/collectors/libtermsight-torch.so.libtorch
    DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# pkg-config: relocatable (${pcfiledir}), so a tree installed under another prefix still says
# where it is.
file(RELATIVE_PATH rel_prefix_from_pc ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig
  ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" rel_prefix_from_pc "${rel_prefix_from_pc}")
configure_file(${PROJECT_SOURCE_DIR}/packaging/termsight.pc.in
  ${PROJECT_BINARY_DIR}/termsight.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/termsight.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The CMake package: find_package(termsight) gives termsight::termsight.
install(EXPORT termsightTargets NAMESPACE termsight::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/termsight)
configure_package_config_file(${PROJECT_SOURCE_DIR}/packaging/termsightConfig.cmake.in
  ${PROJECT_BINARY_DIR}/termsightConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/termsight)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/termsightConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/termsightConfig.cmake
  ${PROJECT_BINARY_DIR}/termsightConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/termsight)
