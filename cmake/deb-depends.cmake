# CPack pre-build script for a cross build's .deb (cmake/package.cmake): the
# package's Depends, which dpkg-shlibdeps gives a native package.  It cannot
# here: it looks each library the binaries need up in dpkg's database, where
# the target's libc (/usr/<triplet>/lib) belongs to libc6-<arch>-cross.
#
# So the Depends is derived as libc6's symbols file answers it: a symbol
# bound at version node GLIBC_x.y first came with glibc x.y, and the package
# needs libc6 (>= the highest node its binaries ask for).  A needed library
# asked for at no GLIBC_* node is not glibc's; its package is unknown here,
# so packaging stops rather than leave it out.  (tests/package_test.sh checks
# the same rule against dpkg-shlibdeps on a native package.)
if(NOT CPACK_DEBIAN_PACKAGE_ARCHITECTURE)
  message(FATAL_ERROR "fastclock: no Debian architecture for this cross build "
    "(cmake/package.cmake asks dpkg-architecture, from dpkg-dev)")
endif()

file(GLOB_RECURSE _files LIST_DIRECTORIES false "${CPACK_TEMPORARY_DIRECTORY}/*")
set(_glibc 0)
set(_needed)
set(_from_glibc)
foreach(_f IN LISTS _files)
  if(IS_SYMLINK "${_f}")
    continue()
  endif()
  file(READ "${_f}" _magic LIMIT 4 HEX)
  if(NOT _magic STREQUAL "7f454c46")                   # not ELF
    continue()
  endif()
  execute_process(COMMAND ${CPACK_FASTCLOCK_OBJDUMP} -p "${_f}"
    OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "fastclock: ${CPACK_FASTCLOCK_OBJDUMP} -p ${_f}: ${_err}")
  endif()
  # "  NEEDED   libc.so.6", then under "  required from libc.so.6:" lines
  # ending in the version node, e.g. "    0x06969194 0x00 03 GLIBC_2.34".
  string(REGEX REPLACE "\n" ";" _lines "${_out}")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^  NEEDED +([^ ]+)$")
      list(APPEND _needed "${CMAKE_MATCH_1}")
    elseif(_line MATCHES "^  required from (.+):$")
      set(_lib "${CMAKE_MATCH_1}")
    elseif(_line MATCHES " GLIBC_([0-9]+(\\.[0-9]+)*)$")
      list(APPEND _from_glibc "${_lib}")
      if(CMAKE_MATCH_1 VERSION_GREATER _glibc)
        set(_glibc "${CMAKE_MATCH_1}")
      endif()
    endif()
  endforeach()
endforeach()

list(REMOVE_DUPLICATES _needed)
foreach(_lib IN LISTS _needed)
  list(FIND _from_glibc "${_lib}" _i)
  if(_i LESS 0)
    message(FATAL_ERROR "fastclock: the package's binaries need ${_lib}, which is not glibc's: "
      "name its package in Depends (cmake/deb-depends.cmake)")
  endif()
endforeach()
if(_glibc)
  list(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= ${_glibc})")
  list(JOIN CPACK_DEBIAN_PACKAGE_DEPENDS ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
endif()
list(JOIN _needed ", " _needed)
message(STATUS "fastclock: Depends: ${CPACK_DEBIAN_PACKAGE_DEPENDS} (its binaries need ${_needed}, at GLIBC_${_glibc} at most)")
