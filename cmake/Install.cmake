# Install: what `cmake --install` (and the Debian package, packaging/) puts where, as any Debian
# library and tool: the command in bin, the library with its SONAME in the (multiarch) libdir,
# the header, a pkg-config file and a CMake package (termsight::termsight), the programs the
# command runs (the demo trainers) in libexec/termsight, the man page and bash completion.
include(CMakePackageConfigHelpers)

set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME termsight)
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
  install(TARGETS termsight_torch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT torch)
  install(FILES ${PROJECT_BINARY_DIR}/collectors/libtermsight-torch.so.libtorch
    DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT torch)
endif()

# pkg-config: relocatable (${pcfiledir}), so a tree installed under another prefix still says
# where it is.
file(RELATIVE_PATH rel_prefix_from_pc ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig
  ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" rel_prefix_from_pc "${rel_prefix_from_pc}")
configure_file(${PROJECT_SOURCE_DIR}/packaging/termsight.pc.in
  ${PROJECT_BINARY_DIR}/termsight.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/termsight.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The man page and bash completion.
configure_file(${PROJECT_SOURCE_DIR}/packaging/termsight.1.in ${PROJECT_BINARY_DIR}/termsight.1
  @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/termsight.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/termsight.bash-completion
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME termsight)
# termsight export --prometheus as a systemd user service (lib/systemd/user, as Debian has them).
# Its ExecStart names the installed command, so the unit is made at install time, when the
# prefix is known (cmake --install --prefix, and cpack's /usr).
install(CODE "
  set(TERMSIGHT_EXPORT_BIN \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/termsight\")
  configure_file(\"${PROJECT_SOURCE_DIR}/packaging/termsight-export.service.in\"
    \"${PROJECT_BINARY_DIR}/termsight-export.service\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/termsight-export.service DESTINATION lib/systemd/user)

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

# The Debian packages (cpack -G DEB in the build folder): termsight_<version>_<arch>.deb with
# everything but the PyTorch hook, and termsight-torch_<version>_<arch>.deb with the hook (so
# that the profiler does not pull in PyTorch). Depends are computed from the binaries
# (dpkg-shlibdeps), never typed.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME termsight)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "live profiler for machine-learning training, watched from a terminal")
set(CPACK_PACKAGE_DESCRIPTION
  "termsight records operators, steps, data queues, CPU and memory of a training process (C, "
  "Python, PyTorch, unmodified programs under termsight run) and shows them live in a terminal "
  "(termsight top); termsight analyse writes the report folder.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "termsight developers")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# A shlibs file and the ldconfig trigger, as a Debian library package has.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# libtermsight.so.0, which the hook links, is the other package's: where dpkg-shlibdeps finds it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/collectors)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_TERMSIGHT_PACKAGE_NAME termsight)
set(CPACK_DEBIAN_TORCH_PACKAGE_NAME termsight-torch)
set(CPACK_DEBIAN_TORCH_PACKAGE_DEPENDS "termsight (= ${PROJECT_VERSION})")
set(CPACK_COMPONENTS_ALL termsight)
if(TARGET termsight_torch)
  list(APPEND CPACK_COMPONENTS_ALL torch)
endif()
include(CPack)
