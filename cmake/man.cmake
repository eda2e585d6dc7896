# Man pages and bash completion.  Each page is generated from its one source
# (scripts/gen-man.py): fastclock(1) from the built command's --help texts,
# libfastclock(3) from the public headers, checked against the export list.
# Installed gzip'ed (-9n: no name or time inside), as Debian ships them.
find_package(Python3 COMPONENTS Interpreter)
find_program(FASTCLOCK_GZIP gzip)
if(NOT Python3_Interpreter_FOUND OR NOT FASTCLOCK_GZIP)
  message(STATUS "fastclock: no python3 or gzip; the man pages are not built")
else()
  set(_fc_man ${CMAKE_BINARY_DIR}/man)
  fc_runnable(_fc_cli fastclock_cli)
  file(MAKE_DIRECTORY ${_fc_man})
  add_custom_command(OUTPUT ${_fc_man}/fastclock.1 ${_fc_man}/fastclock.1.gz
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/gen-man.py cli ${_fc_cli} ${_fc_man}/fastclock.1
    COMMAND ${FASTCLOCK_GZIP} -9n -c ${_fc_man}/fastclock.1 > ${_fc_man}/fastclock.1.gz
    DEPENDS fastclock_cli ${CMAKE_SOURCE_DIR}/scripts/gen-man.py
    COMMENT "fastclock.1 from fastclock --help")
  add_custom_command(OUTPUT ${_fc_man}/libfastclock.3 ${_fc_man}/libfastclock.3.gz
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/gen-man.py lib ${CMAKE_SOURCE_DIR} ${_fc_man}/libfastclock.3
    COMMAND ${FASTCLOCK_GZIP} -9n -c ${_fc_man}/libfastclock.3 > ${_fc_man}/libfastclock.3.gz
    DEPENDS ${CMAKE_SOURCE_DIR}/scripts/gen-man.py ${CMAKE_SOURCE_DIR}/include/fastclock.h
            ${CMAKE_SOURCE_DIR}/include/fastclock_inline.h ${FASTCLOCK_VERSION_SCRIPT}
    COMMENT "libfastclock.3 from include/fastclock.h")
  add_custom_target(fastclock_man1 ALL DEPENDS ${_fc_man}/fastclock.1.gz)
  add_custom_target(fastclock_man3 ALL DEPENDS ${_fc_man}/libfastclock.3.gz)
  install(FILES ${_fc_man}/fastclock.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)
  install(FILES ${_fc_man}/libfastclock.3.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man3 COMPONENT library)
endif()

install(FILES ${CMAKE_SOURCE_DIR}/cli/fastclock.bash
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME fastclock COMPONENT cli)
