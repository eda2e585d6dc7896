# `make package`: one Debian package, fastclock_<version>_<arch>.deb, built by
# CPack from the install rules (scripts/make-deb.sh configures a tree for
# /usr and the multiarch libdir first).  It carries the components library,
# shim, cli and debian; not java (the JNI library and the jar: see the README).

# What Debian wants in every package: copyright and changelog, gzip -9n'ed.
string(TIMESTAMP FASTCLOCK_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)  # honours SOURCE_DATE_EPOCH
set(FASTCLOCK_DEB_MAINTAINER "fastclock maintainers <maintainers@users.noreply.a-seed-990fa354.example>"
  CACHE STRING "Maintainer field of the .deb")
set(_fc_doc ${CMAKE_BINARY_DIR}/debian-doc)
configure_file(${CMAKE_SOURCE_DIR}/cmake/debian/changelog.in ${_fc_doc}/changelog @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/cmake/debian/copyright ${_fc_doc}/copyright COPYONLY)
if(FASTCLOCK_GZIP)
  add_custom_command(OUTPUT ${_fc_doc}/changelog.gz
    COMMAND ${FASTCLOCK_GZIP} -9n -c ${_fc_doc}/changelog > ${_fc_doc}/changelog.gz
    DEPENDS ${_fc_doc}/changelog)
  add_custom_target(fastclock_debian_doc ALL DEPENDS ${_fc_doc}/changelog.gz)
  install(FILES ${_fc_doc}/changelog.gz ${_fc_doc}/copyright
    DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT debian)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fastclock)
set(CPACK_PACKAGE_VENDOR "fastclock")
set(CPACK_PACKAGE_CONTACT "${FASTCLOCK_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${FASTCLOCK_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "kernel's clocks at the cost of one counter read")
# CPack indents each line by one space and turns the empty line into " .".
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "libfastclock reads the CPU's invariant time-stamp counter and converts it
with a line re-calibrated continuously against the kernel, so it stays on
the kernel's CLOCK_MONOTONIC and CLOCK_REALTIME timelines; when the counter
cannot be trusted it says why and reads the kernel instead.

This package holds the shared and static library, its headers, pkg-config
and CMake files, the LD_PRELOAD shim libfastclock-preload.so, and the
fastclock command (doctor, bench, run) with its man pages and bash
completion.")
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)            # fastclock_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)              # Depends: libc6 (>= ...), from dpkg-shlibdeps
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)        # a shlibs file for packages built against it
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
  OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
# ldconfig through dpkg's trigger, as Debian wants, not in maintainer
# scripts: CPack (3.25) writes a postinst and postrm calling ldconfig unless
# the package brings its own, so ours are empty.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/cmake/debian/triggers
  ${CMAKE_SOURCE_DIR}/cmake/debian/postinst ${CMAKE_SOURCE_DIR}/cmake/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# One package of the components listed (a monolithic package would take java too).
set(CPACK_COMPONENTS_ALL library shim cli debian)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
# A cross build's package is its target's: the Debian architecture of the
# target's compiler (scripts/make-deb.sh reads FASTCLOCK_DEB_ARCH from the
# calling tree's cache for the multiarch libdir), fastclock_0.1.0_arm64.deb.
# dpkg-shlibdeps cannot resolve the target's libc: cmake/deb-depends.cmake
# derives the Depends it would give from the staged binaries instead.
if(CMAKE_CROSSCOMPILING)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -dumpmachine
    OUTPUT_VARIABLE _fc_gnu_type OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND dpkg-architecture -t${_fc_gnu_type} -qDEB_HOST_ARCH
    OUTPUT_VARIABLE _fc_deb_arch OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  set(FASTCLOCK_DEB_ARCH "${_fc_deb_arch}" CACHE INTERNAL "Debian architecture of the cross build's target")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE "${FASTCLOCK_DEB_ARCH}")
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_FASTCLOCK_OBJDUMP ${CMAKE_OBJDUMP})
  set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_SOURCE_DIR}/cmake/deb-depends.cmake)
endif()
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
include(CPack)
